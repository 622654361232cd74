// The embedded video provider: no network; a "job" that finishes after latencyMs, then a real
// H.264 MP4 showing the prompt, rendered by ffmpeg and stored in the blob store.
import { randomUUID } from 'node:crypto';
import type { BlobStore } from '../../../src/blobs/local.js';
import type { VideoCheck, VideoJob } from '../../../src/shared/video-task.js';
import { renderPromptMp4 } from './render-mp4.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import type { VideoCall, VideoFinished, VideoProvider } from '../contract.js';

export class LocalVideoProvider implements VideoProvider {
  /** `ffmpeg`: the encoder binary (FFMPEG_BIN, .tools/bin/ffmpeg from the bootstrap, or PATH). */
  constructor(
    private readonly blobs: BlobStore,
    private readonly ffmpeg: string,
  ) {}

  async create({ model, dispatching }: VideoCall & { dispatching(): Promise<void> }): Promise<VideoJob> {
    await dispatching();
    return { upstreamId: `local-${randomUUID()}`, readyAtMs: Date.now() + model.latencyMs };
  }

  async check({ model, job }: VideoCall & { job: VideoJob }): Promise<VideoCheck> {
    const readyAt = job.readyAtMs ?? 0;
    const left = readyAt - Date.now();
    if (left <= 0) return { state: 'completed' };
    return { state: 'running', progress: Math.floor((100 * (model.latencyMs - left)) / Math.max(1, model.latencyMs)) };
  }

  async fetch({ input, model, signal, results }: VideoCall & { results: boolean }): Promise<VideoFinished> {
    let mp4: Buffer;
    try {
      mp4 = await renderPromptMp4({
        prompt: input.request.prompt,
        seconds: Number(input.request.seconds),
        size: input.request.size,
        fps: model.localFps,
        maxSide: model.localMaxSide,
        ffmpeg: this.ffmpeg,
        signal,
      });
    } catch (err) {
      if (signal.aborted) throw err;
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
        throw new UpstreamFailure(
          'upstream_error',
          `the local video renderer needs ffmpeg (${this.ffmpeg} not ` +
            `found): run scripts/bootstrap.sh or set FFMPEG_BIN`,
        );
      }
      throw new UpstreamFailure(
        'upstream_error',
        `the local video renderer failed: ${String((err as Error).message).slice(0, 300)}`,
      );
    }
    const url = await this.blobs.put(mp4, 'video/mp4');
    return { video_url: url, ...(results ? { results: [{ url, file_type: 'mp4', node_id: 'local' }] } : {}) };
  }
}
