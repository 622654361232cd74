// DashScope video models (Wan text-to-video and image-to-video) as a job: the create answers a task
// id, the task query reports it, and the finished video (`output.video_url`, a link that expires
// after 24 h) is copied into Kiln's blob store at once.
import type { BlobStore } from '../../../src/blobs/local.js';
import { dashscopeVideoTask } from '../../../src/shared/dashscope.js';
import type { VideoCheck, VideoJob, VideoOutput } from '../../../src/shared/video-task.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import { copyToBlobs } from '../http.js';
import type { VideoCall, VideoFinished, VideoProvider } from '../contract.js';
import { cancelTask, createTask, readTask } from './api.js';

export class DashScopeVideoProvider implements VideoProvider {
  constructor(private readonly blobs: BlobStore) {}

  async create(call: VideoCall & { dispatching(): Promise<void> }): Promise<VideoJob> {
    const upstreamModel = call.model.upstreamModel ?? call.model.id;
    const r = dashscopeVideoTask(call.input.request, upstreamModel);
    // Before anything is sent: an image for a text-to-video model (or none for an image-to-video one).
    if ('refusal' in r)
      throw new UpstreamFailure(
        'invalid_request',
        `${r.refusal.field} "${r.refusal.got}" cannot be sent to ${upstreamModel}; allowed: ${r.refusal.allowed.join(', ')}`,
      );
    return createTask(call, r.task, call.input.id);
  }

  async check(call: VideoCall & { job: VideoJob }): Promise<VideoCheck> {
    const t = await readTask(call, call.job);
    if (t.state === 'running') return { state: 'running' };
    const url = t.output.video_url;
    if (typeof url !== 'string' || !/^https?:\/\//.test(url))
      throw new UpstreamFailure('upstream_error', 'the upstream task succeeded without a video_url');
    const outputs: VideoOutput[] = [{ url, fileType: 'mp4' }];
    return { state: 'completed', outputs };
  }

  async fetch(call: VideoCall & { job: VideoJob; outputs: VideoOutput[]; results: boolean }): Promise<VideoFinished> {
    const url = call.outputs[0]?.url;
    if (!url) throw new UpstreamFailure('upstream_error', 'the upstream task finished without a video');
    const stored = await copyToBlobs(this.blobs, url, 'mp4', call.signal);
    return { video_url: stored.url, ...(call.results ? { results: [stored] } : {}) };
  }

  cancel(call: VideoCall & { job: VideoJob }): Promise<void> {
    return cancelTask(call, call.job);
  }
}
