// Kling video models (text-to-video and image-to-video) as a job: the create answers a task id,
// the query reports it, and the finished video (`task_result.videos[0].url`, a link Kling clears
// after 30 days) is copied into Kiln's blob store at once. The create carries Kiln's task id as
// `external_task_id`, so a create whose answer was lost is found again (`lookup`). Kling's API has
// no cancel call: a canceled task stops being checked, and Kling finishes (and bills) it.
import type { BlobStore } from '../../../src/blobs/local.js';
import { klingPath, klingVideoTask } from '../../../src/shared/kling.js';
import { kilnJobId } from '../../../src/shared/upstream-job.js';
import type { VideoCheck, VideoJob, VideoOutput } from '../../../src/shared/video-task.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import type { Lookup, VideoCall, VideoFinished, VideoProvider } from '../contract.js';
import { copyToBlobs } from '../http.js';
import { createTask, findTask, readTask } from './api.js';

export class KlingVideoProvider implements VideoProvider {
  constructor(private readonly blobs: BlobStore) {}

  async create(call: VideoCall & { dispatching(): Promise<void> }): Promise<VideoJob> {
    const upstreamModel = call.model.upstreamModel ?? call.model.id;
    const r = klingVideoTask(call.input.request, upstreamModel, {
      strict: call.model.strict,
      externalTaskId: kilnJobId(call.input),
    });
    // The models file is refused at start-up for such values; a task accepted under an older one may still carry one.
    if ('refusal' in r)
      throw new UpstreamFailure(
        'invalid_request',
        `${r.refusal.field} "${r.refusal.got}" cannot be sent to kling ${upstreamModel}; allowed: ${r.refusal.allowed.join(', ')}`,
      );
    return createTask(call, r.task);
  }

  async lookup(call: VideoCall): Promise<Lookup> {
    const found = await findTask(call, klingPath(call.input.request), kilnJobId(call.input));
    return found ? { found } : { absent: true };
  }

  async check(call: VideoCall & { job: VideoJob }): Promise<VideoCheck> {
    const t = await readTask(call, call.job);
    if (!t.done) return { state: 'running' };
    const url = t.task_result?.videos?.[0]?.url;
    if (typeof url !== 'string' || !/^https?:\/\//.test(url))
      throw new UpstreamFailure('upstream_error', 'the upstream task succeeded without a video url');
    const outputs: VideoOutput[] = [{ url, fileType: 'mp4' }];
    return { state: 'completed', outputs };
  }

  async fetch(call: VideoCall & { job: VideoJob; outputs: VideoOutput[]; results: boolean }): Promise<VideoFinished> {
    const url = call.outputs[0]?.url;
    if (!url) throw new UpstreamFailure('upstream_error', 'the upstream task finished without a video');
    const stored = await copyToBlobs(this.blobs, url, 'mp4', call.signal);
    return { video_url: stored.url, ...(call.results ? { results: [stored] } : {}) };
  }
}
