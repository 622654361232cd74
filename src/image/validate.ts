// Submit checks, in the contract's terms. Each failure is a KilnError with the contract's code.
import { deflateRawSync } from 'node:zlib';
import { z } from 'zod';
import type { ImageModel } from '../config/models.js';
import { KilnError } from '../shared/errors.js';
import { referenceImages } from '../shared/prompt.js';
import type { ImageRequest, Part } from '../shared/image-task.js';
import { checkHttpUrl } from '../shared/http-url.js';
import { chars, LIMITS } from '../shared/limits.js';
import { refuseInexpressible } from './provider-options.js';

/** True when a JSON value nests deeper than `max`; stops descending at that depth. */
function deeperThan(v: unknown, max: number): boolean {
  if (v === null || typeof v !== 'object') return false;
  if (max === 0) return true;
  return Object.values(v).some((x) => deeperThan(x, max - 1));
}

const Part = z.object({
  text: z.string().optional(),
  inlineData: z.object({ mimeType: z.string().max(100).optional(), data: z.string().optional() }).optional(),
});

export const SubmitBody = z.object({
  contents: z
    .array(z.object({ role: z.string().max(32).optional(), parts: z.array(Part).max(LIMITS.partsPerContent) }))
    .min(1)
    .max(LIMITS.contents),
  generationConfig: z
    .object({
      responseModalities: z.array(z.string().max(32)).max(8).optional(),
      topP: z.number().min(0).max(1).optional(),
      imageConfig: z
        .object({
          aspectRatio: z.string().max(16).optional(),
          imageSize: z.string().max(16).optional(),
          output: z.string().max(32).optional(),
        })
        .passthrough()
        .optional(),
    })
    .passthrough()
    .optional(),
  tools: z.array(z.record(z.string(), z.unknown())).max(16).optional(),
  systemInstruction: z
    .object({ parts: z.array(z.object({ text: z.string().max(LIMITS.promptChars * 4) })).max(16) })
    .optional(),
  output: z.string().max(32).optional(),
});
export type SubmitBody = z.infer<typeof SubmitBody>;

const ASPECT = /^([1-9]\d?):([1-9]\d?)$/;

export function validateSubmit(raw: unknown, queryOutput: string | undefined, model: ImageModel): ImageRequest {
  const parsed = SubmitBody.safeParse(raw);
  if (!parsed.success) {
    const i = parsed.error.issues[0];
    throw new KilnError('invalid_request', `Invalid request body at ${i.path.join('.') || '(root)'}: ${i.message}`);
  }
  const body = parsed.data;
  if (deeperThan(body, LIMITS.jsonDepth)) {
    throw new KilnError('invalid_request', `The request body nests more than ${LIMITS.jsonDepth} levels deep.`);
  }
  const bodyOutput = body.generationConfig?.imageConfig?.output ?? body.output;
  const outputs = [queryOutput, bodyOutput].filter((o): o is string => o !== undefined);
  if (outputs.length === 0 || outputs.some((o) => o !== 'url')) {
    throw new KilnError(
      'output_must_be_url',
      'Task submissions must resolve to output=url (query ?output=url or generationConfig.imageConfig.output).',
    );
  }
  const texts = body.contents.flatMap((c) => c.parts.map((p) => p.text ?? ''));
  const total = texts.reduce((n, t) => n + chars(t), 0);
  if (total === 0 || texts.every((t) => t.trim() === '')) {
    throw new KilnError('invalid_request', 'A prompt is required: add a text part to contents[].parts.');
  }
  if (total > LIMITS.promptChars) {
    throw new KilnError(
      'prompt_too_long',
      `The prompt has ${total} characters; at most ${LIMITS.promptChars} are allowed.`,
    );
  }
  const refs = referenceImages(body as ImageRequest);
  if (refs.length > LIMITS.referenceImages) {
    throw new KilnError(
      'too_many_reference_images',
      `${refs.length} reference images were sent; at most ${LIMITS.referenceImages} are allowed.`,
    );
  }
  refs.forEach((r, i) => checkHttpUrl(r.data, 'inlineData.data', `reference image ${i + 1}`));
  const ic = body.generationConfig?.imageConfig;
  if (ic?.aspectRatio !== undefined && !ASPECT.test(ic.aspectRatio)) {
    throw new KilnError(
      'invalid_request',
      `aspectRatio must look like "16:9" (two whole numbers from 1 to 99); got "${ic.aspectRatio}".`,
    );
  }
  if (ic?.imageSize !== undefined && !model.imageSizes.includes(ic.imageSize)) {
    throw new KilnError(
      'invalid_request',
      `imageSize must be one of ${model.imageSizes.join(', ')} for model ${model.id}.`,
    );
  }
  // Kiln's own output switch is not part of the upstream request.
  const { output: _o, ...imageConfig } = ic ?? {};
  const generationConfig = body.generationConfig
    ? { ...body.generationConfig, ...(ic ? { imageConfig } : {}) }
    : undefined;
  const request: ImageRequest = {
    contents: body.contents.map((c) => ({
      role: c.role ?? 'user',
      parts: c.parts.map((p): Part =>
        p.inlineData ? { ...p, inlineData: { ...p.inlineData, data: p.inlineData.data ?? '' } } : { text: p.text },
      ),
    })),
    ...(generationConfig ? { generationConfig } : {}),
    ...(body.tools ? { tools: body.tools } : {}),
    ...(body.systemInstruction ? { systemInstruction: body.systemInstruction } : {}),
  };
  refuseInexpressible(request, model);
  // The payload codec deflates a large payload (src/temporal/codec.ts): what must fit is that.
  // Within the 2 MiB body limit it always does; this is the guard for the request it cannot take.
  const json = JSON.stringify(request);
  const bytes = Buffer.byteLength(json);
  if (bytes > LIMITS.requestBytes && deflateRawSync(json).length > LIMITS.requestBytes) {
    throw new KilnError(
      'request_too_large',
      `The request's fields take ${bytes} bytes once parsed, more than ${LIMITS.requestBytes} even compressed.`,
    );
  }
  return request;
}
