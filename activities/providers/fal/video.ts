// fal video apps (text-to-video and image-to-video, e.g. fal-ai/kling-video/…) through the queue:
// Kiln's video request as the app's input (prompt, duration, aspect_ratio, resolution, image_url),
// the result's `video.url` copied into Kiln's blob store. A size fal cannot express was refused when
// the models file was read (src/config/models.ts, falChecks).
import type { BlobStore } from '../../../src/blobs/local.js';
import { falVideoShape } from '../../../src/shared/fal.js';
import type { VideoCheck, VideoJob, VideoOutput, VideoRequest } from '../../../src/shared/video-task.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import type { Dispatching } from '../../upstream-call.js';
import type { VideoCall, VideoFinished, VideoProvider } from '../contract.js';
import { copyToBlobs } from '../http.js';
import { cancel, fileTypeOf, fileUrl, result, status, submit } from './queue.js';

export class FalVideoProvider implements VideoProvider {
  constructor(private readonly blobs: BlobStore) {}

  create(call: VideoCall & { dispatching: Dispatching }): Promise<VideoJob> {
    return submit(call, falVideoInput(call.input.request));
  }

  /** On COMPLETED the result is read at once: a model error (a flagged prompt …) ends the task here. */
  async check(call: VideoCall & { job: VideoJob }): Promise<VideoCheck> {
    const state = await status(call, call.job);
    if (state.state !== 'completed') return state;
    const body = await result(call, call.job);
    const url = fileUrl(body.video);
    if (!url) throw new UpstreamFailure('upstream_error', 'the fal result has no video url');
    return {
      state: 'completed',
      outputs: [{ url, fileType: fileTypeOf((body.video as { content_type?: unknown }).content_type, url) ?? 'mp4' }],
    };
  }

  async fetch(call: VideoCall & { job: VideoJob; outputs: VideoOutput[]; results: boolean }): Promise<VideoFinished> {
    const out = call.outputs[0];
    if (!out) throw new UpstreamFailure('upstream_error', 'the fal result has no video');
    // No key: the file is on fal's CDN, not on the channel's origin.
    const stored = await copyToBlobs(this.blobs, out.url, out.fileType ?? 'mp4', call.signal);
    return { video_url: stored.url, ...(call.results ? { results: [stored] } : {}) };
  }

  cancel(call: VideoCall & { job: VideoJob }): Promise<void> {
    return cancel(call, call.job);
  }
}

/** A video request as a fal video app's input: `duration` is the seconds as fal's apps spell them ("5"). */
export function falVideoInput(r: VideoRequest): Record<string, unknown> {
  const shape = falVideoShape(r.size);
  // The models file is refused at start-up for such sizes; a task accepted under an older file may still carry one.
  if (!shape)
    throw new UpstreamFailure(
      'invalid_request',
      `size "${r.size}" cannot be expressed as fal's aspect_ratio and resolution.`,
    );
  return { prompt: r.prompt, duration: r.seconds, ...shape, ...(r.image ? { image_url: r.image } : {}) };
}
