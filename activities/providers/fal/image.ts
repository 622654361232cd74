// fal image apps (text-to-image and image-to-image, e.g. fal-ai/flux/dev) through the queue:
// Kiln's generateContent request as the app's input (prompt, image_size, num_images, seed,
// image_url), the result's `images[].url` copied into Kiln's blob store. What fal cannot express
// was refused at submit (src/shared/fal.ts, falImageRefusal).
import type { BlobStore } from '../../../src/blobs/local.js';
import type { SafeFetch } from '../../../src/infra/safe-fetch.js';
import { falImageSize } from '../../../src/shared/fal.js';
import type { Candidate, GenerationResult, ImageRequest } from '../../../src/shared/image-task.js';
import { promptText, referenceImages } from '../../../src/shared/prompt.js';
import type { JobCheck, JobOutput, UpstreamJob } from '../../../src/shared/upstream-job.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import type { Dispatching } from '../../upstream-call.js';
import type { ImageJobCall, ImageJobProvider } from '../contract.js';
import { copyToBlobs } from '../http.js';
import { inlineReferences } from '../references.js';
import { cancel, fileTypeOf, fileUrl, result, status, submit } from './queue.js';

const MIME: Record<string, string> = { png: 'image/png', jpg: 'image/jpeg', webp: 'image/webp', gif: 'image/gif' };

export class FalImageProvider implements ImageJobProvider {
  constructor(private readonly deps: { blobs: BlobStore; fetchReference: SafeFetch }) {}

  async create(call: ImageJobCall & { dispatching: Dispatching }): Promise<UpstreamJob> {
    const request = call.model.inlineReferences
      ? await inlineReferences(call.input.request, this.deps.fetchReference, call.model, call.signal)
      : call.input.request;
    return submit(call, falImageInput(request));
  }

  /** On COMPLETED the result is read at once: a model error or a flagged image ends the task here. */
  async check(call: ImageJobCall & { job: UpstreamJob }): Promise<JobCheck> {
    const state = await status(call, call.job);
    if (state.state !== 'completed') return state;
    return { state: 'completed', outputs: imageOutputs(await result(call, call.job)) };
  }

  async fetch(call: ImageJobCall & { job: UpstreamJob; outputs: JobOutput[] }): Promise<GenerationResult> {
    const candidates: Candidate[] = [];
    for (const [index, out] of call.outputs.entries()) {
      // No key: the files are on fal's CDN, not on the channel's origin.
      const stored = await copyToBlobs(this.deps.blobs, out.url, out.fileType ?? 'png', call.signal);
      const mimeType = MIME[stored.file_type] ?? 'image/png';
      candidates.push({
        content: { role: 'model', parts: [{ inlineData: { mimeType, data: stored.url } }] },
        finishReason: 'STOP',
        index,
      });
    }
    if (!candidates.length) throw new UpstreamFailure('upstream_error', 'the fal result has no image');
    return {
      response_id: call.job.upstreamId,
      model_version: call.model.upstreamModel ?? call.model.id,
      candidates,
    };
  }

  cancel(call: ImageJobCall & { job: UpstreamJob }): Promise<void> {
    return cancel(call, call.job);
  }
}

/** A generateContent request as a fal image app's input. */
export function falImageInput(request: ImageRequest): Record<string, unknown> {
  const gc = request.generationConfig;
  const ic = gc?.imageConfig;
  const size = falImageSize(ic?.aspectRatio, ic?.imageSize);
  const ref = referenceImages(request)[0];
  return {
    prompt: promptText(request),
    ...(size !== undefined ? { image_size: size } : {}),
    ...(typeof gc?.candidateCount === 'number' ? { num_images: gc.candidateCount } : {}),
    ...(typeof gc?.seed === 'number' ? { seed: gc.seed } : {}),
    ...(ref ? { image_url: referenceUrl(ref) } : {}),
  };
}

/** A reference as fal takes it: its URL, or its bytes as a data URI (uploads, inlineReferences). */
function referenceUrl(ref: { mimeType?: string; data: string }): string {
  if (/^https?:\/\//i.test(ref.data)) return ref.data;
  return `data:${ref.mimeType ?? 'image/png'};base64,${ref.data}`;
}

/**
 * The images of a result. A flux-style safety checker answers a blank image with
 * `has_nsfw_concepts[i]` true: those are dropped, and a result with nothing else fails as refused
 * by the content policy (the caller's prompt: invalid_request).
 */
export function imageOutputs(body: Record<string, unknown>): JobOutput[] {
  const images = Array.isArray(body.images) ? (body.images as unknown[]) : [];
  const flags = Array.isArray(body.has_nsfw_concepts) ? (body.has_nsfw_concepts as unknown[]) : [];
  const kept = images.filter((_, i) => flags[i] !== true);
  if (images.length && !kept.length)
    throw new UpstreamFailure(
      'invalid_request',
      `fal's content policy: the safety checker flagged ${images.length === 1 ? 'the image' : `all ${images.length} images`}`,
    );
  const outputs: JobOutput[] = [];
  for (const img of kept) {
    const url = fileUrl(img);
    if (!url) throw new UpstreamFailure('upstream_error', 'the fal result has an image without an http(s) url');
    const fileType = fileTypeOf((img as { content_type?: unknown }).content_type, url);
    outputs.push({ url, ...(fileType ? { fileType } : {}) });
  }
  if (!outputs.length) throw new UpstreamFailure('upstream_error', 'the fal result has no image');
  return outputs;
}
