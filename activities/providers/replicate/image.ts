// Replicate image models as jobs: the task's request becomes a prediction's `input` (src/shared/replicate-input.ts), a
// job watch checks the prediction, and the finished files are copied into Kiln's
// blob store, one candidate each, in the order of `output`.
import type { BlobStore } from '../../../src/blobs/local.js';
import type { SafeFetch } from '../../../src/infra/safe-fetch.js';
import type { GenerationResult, ImageRequest } from '../../../src/shared/image-task.js';
import { referenceImages } from '../../../src/shared/prompt.js';
import type { JobCheck, JobOutput, UpstreamJob } from '../../../src/shared/upstream-job.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import type { Dispatching } from '../../upstream-call.js';
import type { ImageJobCall, ImageJobProvider } from '../contract.js';
import { downloadReference } from '../references.js';
import { imageInput, imageInputRefusal } from '../../../src/shared/replicate-input.js';
import { cancelPrediction, checkPrediction, copyOutput, createPrediction } from './predictions.js';

const MIME_BY_TYPE: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  webp: 'image/webp',
  gif: 'image/gif',
};

export class ReplicateImageProvider implements ImageJobProvider {
  /** `fetchReference`: the SSRF-guarded downloader, for channels that send reference images as bytes. */
  constructor(
    private readonly blobs: BlobStore,
    private readonly fetchReference: SafeFetch,
  ) {}

  async create(call: ImageJobCall & { dispatching: Dispatching }): Promise<UpstreamJob> {
    const { input, model, signal } = call;
    // The submit check refuses these; a task accepted under an older models file may still carry one.
    const refused = imageInputRefusal(input.request, model.inputNames);
    if (refused)
      throw new UpstreamFailure(
        'invalid_request',
        `${refused.field} "${refused.got.slice(0, 60)}" cannot be sent to ${model.upstreamModel}; allowed: ${refused.allowed.join(', ')}`,
      );
    const images = await this.references(input.request, model.inlineReferences, model.referenceMaxBytes, signal);
    const body = imageInput(input.request, model.inputNames, model.inputDefaults, images);
    return createPrediction(call, body, input.id);
  }

  check(call: ImageJobCall & { job: UpstreamJob }): Promise<JobCheck> {
    return checkPrediction(call);
  }

  async fetch(call: ImageJobCall & { job: UpstreamJob; outputs: JobOutput[] }): Promise<GenerationResult> {
    const candidates: GenerationResult['candidates'] = [];
    // One at a time: a model's outputs may be large, and a retry starts over anyway.
    for (const out of call.outputs) {
      const stored = await copyOutput(this.blobs, call, out.url, 'png');
      const mimeType = MIME_BY_TYPE[stored.file_type];
      if (!mimeType) continue;
      candidates.push({
        content: { role: 'model', parts: [{ inlineData: { mimeType, data: stored.url } }] },
        finishReason: 'STOP',
        index: candidates.length,
      });
    }
    if (!candidates.length) throw new UpstreamFailure('upstream_error', 'the prediction produced no image');
    return { response_id: call.job.upstreamId, model_version: call.model.upstreamModel ?? call.model.id, candidates };
  }

  cancel(call: ImageJobCall & { job: UpstreamJob }): Promise<void> {
    return cancelPrediction(call);
  }

  /**
   * Reference images as Replicate takes file inputs: URLs it fetches itself, or data URIs for bytes
   * (uploads of /v1/images/edits, or every reference when the channel sets `inlineReferences`).
   */
  private async references(
    request: ImageRequest,
    inline: boolean,
    maxBytes: number,
    signal: AbortSignal,
  ): Promise<string[]> {
    const out: string[] = [];
    let n = 0;
    for (const ref of referenceImages(request)) {
      n++;
      let { mimeType, data } = { mimeType: ref.mimeType ?? 'image/png', data: ref.data };
      if (/^https?:/i.test(data) && !inline) {
        out.push(data);
        continue;
      }
      if (/^https?:/i.test(data))
        ({ mimeType, data } = await downloadReference(
          this.fetchReference,
          data,
          signal,
          `Reference image ${n}`,
          maxBytes,
        ));
      out.push(`data:${mimeType};base64,${data}`);
    }
    return out;
  }
}
