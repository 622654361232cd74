// MiniMax Hailuo video models as a job: the create answers a task id, the task query reports it
// (Preparing, Queueing, Processing, Success with a `file_id`, Fail), and the file lookup gives a
// download link that expires, so it is asked for right before the video is copied into Kiln's blob
// store. MiniMax has no cancel call for these tasks: the provider has no `cancel`, so a canceled task
// stops checking and says the job may run on there (as Veo's does).
import type { BlobStore } from '../../../src/blobs/local.js';
import { minimaxVideoBody } from '../../../src/shared/minimax.js';
import type { VideoCheck, VideoJob, VideoOutput } from '../../../src/shared/video-task.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import type { VideoCall, VideoFinished, VideoProvider } from '../contract.js';
import { copyToBlobs } from '../http.js';
import { createTask, downloadUrl, queryTask, taskFailed } from './api.js';

export class MinimaxVideoProvider implements VideoProvider {
  constructor(private readonly blobs: BlobStore) {}

  async create(call: VideoCall & { dispatching(): Promise<void> }): Promise<VideoJob> {
    const upstreamModel = call.model.upstreamModel ?? call.model.id;
    const r = minimaxVideoBody(call.input.request, upstreamModel, call.model.sizes ?? []);
    // Refused at submit and at start-up; a task accepted under an older models file may still carry one.
    if ('refusal' in r)
      throw new UpstreamFailure(
        'invalid_request',
        `${r.refusal.field} "${r.refusal.got}" cannot be sent to ${upstreamModel}; allowed: ${r.refusal.allowed.join(', ')}`,
      );
    return createTask(call, r.body, call.input.id);
  }

  async check(call: VideoCall & { job: VideoJob }): Promise<VideoCheck> {
    const t = await queryTask(call, call.job);
    switch (t.status) {
      case 'Preparing':
      case 'Queueing':
      case 'Processing':
        // MiniMax reports no progress.
        return { state: 'running' };
      case 'Success': {
        const id = t.file_id === undefined || t.file_id === null ? '' : String(t.file_id);
        if (!/^\d{1,20}$/.test(id))
          throw new UpstreamFailure('upstream_error', 'the upstream task succeeded without a usable file_id');
        // The file's own address at MiniMax: its link is looked up when the video is fetched.
        const url = `${call.model.baseUrl!.replace(/\/+$/, '')}/v1/files/retrieve?file_id=${id}`;
        return { state: 'completed', outputs: [{ url, fileType: 'mp4' }] };
      }
      case 'Fail':
        throw taskFailed(t, call.key);
      default:
        throw new UpstreamFailure(
          'upstream_error',
          `upstream reported an unknown task status "${String(t.status).slice(0, 40)}"`,
        );
    }
  }

  async fetch(call: VideoCall & { job: VideoJob; outputs: VideoOutput[]; results: boolean }): Promise<VideoFinished> {
    const out = call.outputs[0];
    const fileId = out ? new URL(out.url).searchParams.get('file_id') : null;
    if (!fileId) throw new UpstreamFailure('upstream_error', 'the upstream task finished without a video');
    const link = await downloadUrl(call, fileId);
    // No key: the link is a signed URL on MiniMax's CDN, not on the channel's origin.
    const stored = await copyToBlobs(this.blobs, link, 'mp4', call.signal);
    return { video_url: stored.url, ...(call.results ? { results: [stored] } : {}) };
  }
}
