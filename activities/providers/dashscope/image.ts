// DashScope image models (Qwen-Image, Wan text-to-image, Wan image-to-image) as a job: the create
// answers a task id, the task query reports it, and the finished images (`output.results[].url`,
// links that expire after 24 h) are copied into Kiln's blob store at once.
import type { BlobStore } from '../../../src/blobs/local.js';
import { dashscopeImageTask } from '../../../src/shared/dashscope.js';
import type { Candidate, GenerationResult } from '../../../src/shared/image-task.js';
import type { JobCheck, JobOutput, UpstreamJob } from '../../../src/shared/upstream-job.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import { copyToBlobs } from '../http.js';
import type { ImageJobCall, ImageJobProvider } from '../contract.js';
import type { Dispatching } from '../../upstream-call.js';
import { cancelTask, createTask, readTask, taskFailed } from './api.js';

const IMAGE_TYPES: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  webp: 'image/webp',
};

export class DashScopeImageProvider implements ImageJobProvider {
  constructor(private readonly blobs: BlobStore) {}

  async create(call: ImageJobCall & { dispatching: Dispatching }): Promise<UpstreamJob> {
    const upstreamModel = call.model.upstreamModel ?? call.model.id;
    const r = dashscopeImageTask(call.input.request, upstreamModel);
    // Refused at submit; a task accepted under an older models file may still carry such an option.
    if ('refusal' in r)
      throw new UpstreamFailure(
        'invalid_request',
        `${r.refusal.field} "${r.refusal.got}" cannot be sent to ${upstreamModel}; allowed: ${r.refusal.allowed.join(', ')}`,
      );
    return createTask(call, r.task, call.input.id);
  }

  async check(call: ImageJobCall & { job: UpstreamJob }): Promise<JobCheck> {
    const t = await readTask(call, call.job);
    if (t.state === 'running') return { state: 'running' };
    const results = t.output.results ?? [];
    const outputs: JobOutput[] = results
      .filter((x): x is { url: string } => typeof x?.url === 'string' && /^https?:\/\//.test(x.url))
      .map((x) => ({ url: x.url, fileType: imageType(x.url) }));
    if (outputs.length === 0) {
      const failed = results.find((x) => x?.code);
      if (failed) throw taskFailed(failed.code, failed.message, call.key);
      throw new UpstreamFailure('upstream_error', 'the upstream task succeeded without an image');
    }
    return { state: 'completed', outputs };
  }

  async fetch(call: ImageJobCall & { job: UpstreamJob; outputs: JobOutput[] }): Promise<GenerationResult> {
    const candidates: Candidate[] = [];
    for (const [index, out] of call.outputs.entries()) {
      const type = out.fileType ?? 'png';
      const stored = await copyToBlobs(this.blobs, out.url, type, call.signal);
      candidates.push({
        content: {
          role: 'model',
          parts: [{ inlineData: { mimeType: IMAGE_TYPES[type] ?? 'image/png', data: stored.url } }],
        },
        finishReason: 'STOP',
        index,
      });
    }
    return {
      response_id: call.job.upstreamId,
      model_version: call.model.upstreamModel ?? call.model.id,
      candidates,
    };
  }

  cancel(call: ImageJobCall & { job: UpstreamJob }): Promise<void> {
    return cancelTask(call, call.job);
  }
}

/** The image's type by its URL's extension (DashScope serves PNG unless the model says otherwise). */
function imageType(url: string): string {
  try {
    const ext = /\.([A-Za-z]{3,4})$/.exec(new URL(url).pathname)?.[1]?.toLowerCase();
    return ext && IMAGE_TYPES[ext] ? ext : 'png';
  } catch {
    return 'png';
  }
}
