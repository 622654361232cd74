// ComfyUI image models: the channel's stored workflow with the prompt, reference image, size, seed
// and count set on the nodes the models file names (src/shared/comfyui.ts), queued on the box, and
// its saved images copied from GET /view into Kiln's blob store. What the workflow cannot take was
// refused at submit (comfyuiImageRefusal).
import type { BlobStore } from '../../../src/blobs/local.js';
import type { SafeFetch } from '../../../src/infra/safe-fetch.js';
import { imageInputs } from '../../../src/shared/comfyui.js';
import type { Candidate, GenerationResult } from '../../../src/shared/image-task.js';
import { referenceImages } from '../../../src/shared/prompt.js';
import type { JobCheck, JobOutput, UpstreamJob } from '../../../src/shared/upstream-job.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import type { Dispatching } from '../../upstream-call.js';
import type { ImageJobCall, ImageJobProvider, Lookup } from '../contract.js';
import { copyToBlobs } from '../http.js';
import { viewHeaders, viewUrl } from './api.js';
import { cancelPrompt, checkPrompt, createPrompt, lookupPrompt, uploadReference } from './jobs.js';

const MIME: Record<string, string> = { png: 'image/png', jpg: 'image/jpeg', webp: 'image/webp', gif: 'image/gif' };

export class ComfyImageProvider implements ImageJobProvider {
  constructor(private readonly deps: { blobs: BlobStore; fetchReference: SafeFetch }) {}

  create(call: ImageJobCall & { dispatching: Dispatching }): Promise<UpstreamJob> {
    return createPrompt(call, async () => {
      const ref = referenceImages(call.input.request)[0];
      const image = ref ? await uploadReference(call, this.deps.fetchReference, ref) : undefined;
      return imageInputs(call.input.request, call.model.nodes, image);
    });
  }

  check(call: ImageJobCall & { job: UpstreamJob }): Promise<JobCheck> {
    return checkPrompt(call, call.job);
  }

  async fetch(call: ImageJobCall & { job: UpstreamJob; outputs: JobOutput[] }): Promise<GenerationResult> {
    const candidates: Candidate[] = [];
    for (const [index, out] of call.outputs.entries()) {
      const stored = await copyToBlobs(
        this.deps.blobs,
        viewUrl(call, out),
        out.fileType ?? 'png',
        call.signal,
        viewHeaders(call),
        call.key,
      );
      candidates.push({
        content: {
          role: 'model',
          parts: [{ inlineData: { mimeType: MIME[stored.file_type] ?? 'image/png', data: stored.url } }],
        },
        finishReason: 'STOP',
        index,
      });
    }
    if (!candidates.length) throw new UpstreamFailure('upstream_error', 'the ComfyUI prompt wrote no image');
    return {
      response_id: call.job.upstreamId,
      model_version: call.model.upstreamModel ?? call.model.id,
      candidates,
    };
  }

  cancel(call: ImageJobCall & { job: UpstreamJob }): Promise<void> {
    return cancelPrompt(call, call.job);
  }

  lookup(call: ImageJobCall): Promise<Lookup> {
    return lookupPrompt(call);
  }
}
