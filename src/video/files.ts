// A video's files in the blob store: the outputs the worker stored, and the stills the API makes of
// them (frames.ts). A still's name is derived from its video's (unguessable) name, so it is found
// again without any record of it: the second request for it runs no ffmpeg, and a delete finds it.
import { createHash } from 'node:crypto';
import type { Blobs } from '../blobs/stores.js';
import type { VideoTaskRecord } from '../shared/video-task.js';
import { KilnError } from '../shared/errors.js';
import { makeStill, type Still } from './frames.js';

export const VARIANTS = ['video', 'thumbnail', 'spritesheet'] as const;
export type Variant = (typeof VARIANTS)[number];
const STILLS: readonly Still[] = ['thumbnail', 'spritesheet'];

/** The stored name of a still of the video stored as `video`. */
export function stillName(video: string, still: Still): string {
  return `${createHash('sha256').update(`${video}\n${still}`).digest('hex').slice(0, 32)}.jpg`;
}

export class VideoFiles {
  /** Stills being made, by name: concurrent requests for one share its ffmpeg run. */
  private readonly making = new Map<string, Promise<string>>();

  constructor(
    private readonly blobs: Blobs,
    private readonly ffmpeg?: string,
  ) {}

  /** The URL of a still of the video at `videoUrl`, made and stored on its first request. */
  async still(videoUrl: string, still: Still, seconds: number): Promise<string> {
    const video = this.blobs.nameOf(videoUrl);
    if (!video) {
      throw new KilnError('service_unavailable', 'This video is not in the blob store: no still can be made of it.', 5);
    }
    const name = stillName(video, still);
    const stored = await this.blobs.urlOf(name);
    if (stored) return stored;
    let run = this.making.get(name);
    if (!run) {
      run = this.make(videoUrl, name, still, seconds).finally(() => this.making.delete(name));
      this.making.set(name, run);
    }
    return run;
  }

  private async make(videoUrl: string, name: string, still: Still, seconds: number): Promise<string> {
    const load = async () => {
      const blob = await this.blobs.read(videoUrl);
      if (!blob) throw new KilnError('service_unavailable', 'The stored video could not be read; retry shortly.', 5);
      return blob.data;
    };
    const image = await makeStill(still, load, seconds, this.ffmpeg);
    return this.blobs.putAs(name, image, 'image/jpeg');
  }

  /** Deletes every file of the video (outputs and stills); files already gone are no error. */
  async remove(record: VideoTaskRecord): Promise<void> {
    const urls = [record.video_url, ...(record.results ?? []).map((r) => r.url)];
    const names = new Set<string>();
    for (const url of urls) {
      const name = url ? this.blobs.nameOf(url) : null;
      if (!name) continue;
      names.add(name);
      for (const s of STILLS) names.add(stillName(name, s));
    }
    // A still this process is making would be stored after the delete: it is let finish first.
    await Promise.allSettled([...names].map((n) => this.making.get(n)));
    // Every removal ends before the answer, failed or not: a 503 then means exactly "these are
    // left", and a repeat never races removals still under way.
    const removed = await Promise.allSettled([...names].map((n) => this.blobs.remove(n)));
    const failed = removed.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }
}
