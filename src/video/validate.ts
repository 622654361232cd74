// POST /v1/videos checks. Everything refused here is refused before a workflow exists, so a
// refused value can never reach an upstream.
import { z } from 'zod';
import { videoOptions, type VideoModel } from '../config/models.js';
import { KilnError } from '../shared/errors.js';
import type { NodeInfo, VideoRequest } from '../shared/video-task.js';
import { checkHttpUrl } from '../shared/http-url.js';
import { seedanceImageRefusal } from '../shared/seedance.js';
import { chars, LIMITS } from '../shared/limits.js';
import { optionalText } from '../tasks/openapi.js';
import { refuseInexpressibleVideo } from './provider-options.js';
import { comfyuiVideoRefusal } from '../shared/comfyui.js';

const NodeInfoSchema = z.object({
  nodeId: z.string().min(1).max(100),
  fieldName: z.string().min(1).max(100),
  fieldValue: z.union([z.string().max(LIMITS.promptChars), z.number(), z.boolean()]),
});

/**
 * validateVideo's prompt rules as JSON Schema states them: maxLength counts code points, as chars()
 * does (zod's .max counts UTF-16 units). Workflow-node models also take a blank placeholder.
 */
export const PROMPT_RULES = { maxLength: LIMITS.promptChars, pattern: '\\S' };

/** checkHttpUrl's scheme rule, for the document (the rest of its rules are in words). */
export const HTTP_URL_PATTERN = '^[Hh][Tt][Tt][Pp][Ss]?://';

export const VideoBody = z.object({
  model: z.string({ message: 'model is required' }).min(1, 'model is required').max(200),
  prompt: z.string({ message: 'prompt is required (a string)' }),
  image: z.string().max(8192).optional(),
  /** The OpenAI SDK's reference form; a file upload is not accepted, a URL is. */
  input_reference: z.object({ image_url: z.string().max(8192) }).optional(),
  // Integers are accepted as their decimal string, as OpenAI's own examples sometimes send them.
  seconds: z.union([z.string().max(16), z.number().int().transform(String)]).optional(),
  size: z.string().max(32).optional(),
  nodeInfoList: z.array(NodeInfoSchema).max(64).optional(),
  webhook: optionalText('https URL that receives the signed task object when it ends (see Webhooks)'),
  webhook_events: optionalText('`terminal` (default): the final state only; `all`: also queued and in_progress'),
});
export type VideoBody = z.infer<typeof VideoBody>;

export function parseVideoBody(raw: unknown): VideoBody {
  const parsed = VideoBody.safeParse(raw);
  if (!parsed.success) {
    const i = parsed.error.issues[0];
    throw new KilnError('invalid_request', `Invalid request body at ${i.path.join('.') || '(root)'}: ${i.message}`);
  }
  return parsed.data;
}

export function validateVideo(body: VideoBody, model: VideoModel): VideoRequest {
  const opts = videoOptions(model);
  const prompt = body.prompt;
  // Workflow-node workflows take their inputs from nodeInfoList; the prompt may be a placeholder.
  if (opts.form !== 'workflow-node' && prompt.trim() === '') {
    throw new KilnError('invalid_request', 'A prompt is required: set "prompt" to a non-empty text.');
  }
  if (chars(prompt) > LIMITS.promptChars) {
    throw new KilnError(
      'prompt_too_long',
      `The prompt has ${chars(prompt)} characters; at most ${LIMITS.promptChars} are allowed.`,
    );
  }
  const seconds = body.seconds ?? opts.seconds[0];
  if (!opts.seconds.includes(seconds)) {
    throw new KilnError(
      'invalid_request',
      `seconds must be one of ${opts.seconds.map((s) => `"${s}"`).join(', ')} for model ${model.id}; got "${seconds}".`,
    );
  }
  const size = body.size ?? opts.sizes[0];
  if (!opts.sizes.includes(size)) {
    throw new KilnError(
      'invalid_request',
      `size must be one of ${opts.sizes.join(', ')} for model ${model.id}; got "${size}".`,
    );
  }
  if (body.image !== undefined && body.input_reference !== undefined) {
    throw new KilnError('invalid_request', 'Send the reference image once: either image or input_reference.image_url.');
  }
  const image = body.image ?? body.input_reference?.image_url;
  if (image !== undefined) checkHttpUrl(image, 'image');
  seedanceChecks(model, image);
  if (body.nodeInfoList && opts.form !== 'workflow-node') {
    throw new KilnError(
      'invalid_request',
      `nodeInfoList is only accepted by workflow-node models; ${model.id} is not one.`,
    );
  }
  const request: VideoRequest = {
    prompt,
    seconds,
    size,
    ...(image !== undefined ? { image } : {}),
    ...(body.nodeInfoList ? { nodeInfoList: body.nodeInfoList as NodeInfo[] } : {}),
  };
  // A comfyui box's stored workflow takes only its own nodes' inputs, and only those the model allows.
  for (const c of model.channels) {
    if (c.provider !== 'comfyui') continue;
    const r = comfyuiVideoRefusal(request, c);
    if (r) throw new KilnError('invalid_request', `${r.field}: ${r.message} (model ${model.id}).`);
  }
  refuseInexpressibleVideo(request, model);
  return request;
}

/** A Seedance text-to-video model takes no image, an image-to-video one needs it: refused before a workflow exists. */
function seedanceChecks(model: VideoModel, image: string | undefined): void {
  for (const c of model.channels) {
    if (c.provider !== 'seedance') continue;
    const r = seedanceImageRefusal(image, c.upstreamModel ?? model.id);
    if (r)
      throw new KilnError(
        'invalid_request',
        `${r.field} cannot be ${r.got === 'none' ? 'left out' : 'sent'} for model ${model.id}; allowed: ${r.allowed.join(', ')}.`,
      );
  }
}
