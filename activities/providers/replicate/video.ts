// Replicate video models as jobs: prompt, image, seconds and size become the prediction's `input`
// (src/shared/replicate-input.ts), a job watch checks it (progress from the model's logs), and the
// finished file is copied into Kiln's blob store.
import type { BlobStore } from '../../../src/blobs/local.js';
import type { VideoCheck, VideoJob, VideoOutput } from '../../../src/shared/video-task.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import type { Dispatching } from '../../upstream-call.js';
import type { VideoCall, VideoFinished, VideoProvider } from '../contract.js';
import { videoInput, videoInputRefusal } from '../../../src/shared/replicate-input.js';
import { cancelPrediction, checkPrediction, copyOutput, createPrediction } from './predictions.js';

export class ReplicateVideoProvider implements VideoProvider {
  constructor(private readonly blobs: BlobStore) {}

  async create(call: VideoCall & { dispatching: Dispatching }): Promise<VideoJob> {
    const { input, model } = call;
    // Before anything is sent: an option the model cannot take is the request's, not the upstream's.
    const refused = videoInputRefusal(input.request, model.inputNames);
    if (refused)
      throw new UpstreamFailure(
        'invalid_request',
        `${refused.field} "${refused.got.slice(0, 60)}" cannot be sent to ${model.upstreamModel}; allowed: ${refused.allowed.join(', ')}`,
      );
    const body = videoInput(input.request, model.inputNames, model.inputDefaults, input.request.image);
    return createPrediction(call, body, input.id);
  }

  check(call: VideoCall & { job: VideoJob }): Promise<VideoCheck> {
    return checkPrediction(call);
  }

  async fetch(call: VideoCall & { job: VideoJob; outputs: VideoOutput[]; results: boolean }): Promise<VideoFinished> {
    const [first, ...rest] = call.outputs;
    if (!first) throw new UpstreamFailure('upstream_error', 'the prediction produced no video');
    const stored = await copyOutput(this.blobs, call, first.url, 'mp4');
    if (!call.results) return { video_url: stored.url };
    const results = [stored];
    for (const o of rest) results.push(await copyOutput(this.blobs, call, o.url, 'mp4'));
    return { video_url: stored.url, results };
  }

  cancel(call: VideoCall & { job: VideoJob }): Promise<void> {
    return cancelPrediction(call);
  }
}
