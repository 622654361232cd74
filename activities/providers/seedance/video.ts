// Seedance (Volcengine Ark, BytePlus ModelArk) video models as a job: the create answers a task id,
// the task query reports it, and the finished video (`content.video_url`, a link Ark clears after
// 24 h) is copied into Kiln's blob store at once. No lookup: Ark takes no id of the caller's.
import type { BlobStore } from '../../../src/blobs/local.js';
import { seedanceTask } from '../../../src/shared/seedance.js';
import type { VideoCheck, VideoJob, VideoOutput } from '../../../src/shared/video-task.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import { copyToBlobs } from '../http.js';
import type { VideoCall, VideoFinished, VideoProvider } from '../contract.js';
import { cancelTask, createTask, readTask } from './api.js';

export class SeedanceVideoProvider implements VideoProvider {
  constructor(private readonly blobs: BlobStore) {}

  async create(call: VideoCall & { dispatching(): Promise<void> }): Promise<VideoJob> {
    const upstreamModel = call.model.upstreamModel ?? call.model.id;
    const t = seedanceTask(call.input.request, upstreamModel);
    // Refused at start-up or submit already; a task accepted under an older models file may still carry one.
    if ('refusal' in t)
      throw new UpstreamFailure(
        'invalid_request',
        `${t.refusal.field} "${t.refusal.got}" cannot be sent to ${upstreamModel}; allowed: ${t.refusal.allowed.join(', ')}`,
      );
    return createTask(call, t.body, call.input.id);
  }

  async check(call: VideoCall & { job: VideoJob }): Promise<VideoCheck> {
    const t = await readTask(call, call.job);
    if (t.state === 'running') return { state: 'running' };
    if (typeof t.videoUrl !== 'string' || !/^https?:\/\//.test(t.videoUrl))
      throw new UpstreamFailure('upstream_error', 'the upstream task succeeded without a video_url');
    return { state: 'completed', outputs: [{ url: t.videoUrl, fileType: 'mp4' }] };
  }

  async fetch(call: VideoCall & { job: VideoJob; outputs: VideoOutput[]; results: boolean }): Promise<VideoFinished> {
    const url = call.outputs[0]?.url;
    if (!url) throw new UpstreamFailure('upstream_error', 'the upstream task finished without a video');
    // No key: the video sits in Ark's object storage behind a signed link, not on the API's origin.
    const stored = await copyToBlobs(this.blobs, url, 'mp4', call.signal);
    return { video_url: stored.url, ...(call.results ? { results: [stored] } : {}) };
  }

  cancel(call: VideoCall & { job: VideoJob }): Promise<void> {
    return cancelTask(call, call.job);
  }
}
