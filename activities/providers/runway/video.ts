// Runway's video models (gen4_turbo, gen4.5, veo3.1 …) as a job: the create picks image_to_video
// or text_to_video by whether the request has an image, the task is checked on Kiln's durable
// timers (THROTTLED is Runway's queue, not an error), and the finished video (`output[0]`, a signed
// link that expires within 24–48 h) is copied into Kiln's blob store at once. A value the model
// cannot take was refused at start-up or at submit (src/shared/runway.ts); a task accepted under an
// older models file that still carries one fails here, before anything is sent.
import type { BlobStore } from '../../../src/blobs/local.js';
import { runwayVideoTask } from '../../../src/shared/runway.js';
import type { VideoCheck, VideoJob, VideoOutput } from '../../../src/shared/video-task.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import type { Dispatching } from '../../upstream-call.js';
import type { VideoCall, VideoFinished, VideoProvider } from '../contract.js';
import { copyToBlobs } from '../http.js';
import { createTask, deleteTask, readTask, taskFailed } from './api.js';

export class RunwayVideoProvider implements VideoProvider {
  constructor(private readonly blobs: BlobStore) {}

  create(call: VideoCall & { dispatching: Dispatching }): Promise<VideoJob> {
    const upstreamModel = call.model.upstreamModel ?? call.model.id;
    const r = runwayVideoTask(call.input.request, upstreamModel);
    if ('refusal' in r)
      throw new UpstreamFailure(
        'invalid_request',
        `${r.refusal.field} "${r.refusal.got}" cannot be sent to runway ${upstreamModel}; ` +
          `allowed: ${r.refusal.allowed.join(', ')}`,
      );
    return createTask(call, r.task, call.input.id);
  }

  async check(call: VideoCall & { job: VideoJob }): Promise<VideoCheck> {
    const t = await readTask(call, call.job);
    switch (t.status) {
      case 'PENDING':
      case 'THROTTLED':
        return { state: 'running' };
      case 'RUNNING':
        return {
          state: 'running',
          ...(typeof t.progress === 'number' ? { progress: Math.round(t.progress * 100) } : {}),
        };
      case 'SUCCEEDED': {
        const url = Array.isArray(t.output) ? t.output[0] : undefined;
        if (typeof url !== 'string' || !/^https?:\/\//.test(url))
          throw new UpstreamFailure('upstream_error', 'the upstream task succeeded without an output URL');
        return { state: 'completed', outputs: [{ url, fileType: 'mp4' }] };
      }
      case 'FAILED':
        throw taskFailed(t.failureCode, t.failure, call.key);
      case 'CANCELLED':
        throw new UpstreamFailure('upstream_error', 'the upstream task was canceled there');
      default:
        throw new UpstreamFailure(
          'upstream_error',
          `upstream reported an unknown task status "${String(t.status).slice(0, 40)}"`,
        );
    }
  }

  async fetch(call: VideoCall & { job: VideoJob; outputs: VideoOutput[]; results: boolean }): Promise<VideoFinished> {
    const out = call.outputs[0];
    if (!out) throw new UpstreamFailure('upstream_error', 'the upstream task finished without a video');
    // No key: the output link is signed and lives on Runway's CDN, not on the API's origin.
    const stored = await copyToBlobs(this.blobs, out.url, out.fileType ?? 'mp4', call.signal);
    return { video_url: stored.url, ...(call.results ? { results: [stored] } : {}) };
  }

  cancel(call: VideoCall & { job: VideoJob }): Promise<void> {
    return deleteTask(call, call.job);
  }
}
