// Stills of a stored video (GET /v1/videos/{id}/content?variant=thumbnail|spritesheet), made by
// ffmpeg in the API process, which has the blob store. A still is made once and stored; ffmpeg is
// bounded in every way a request could make it costly: one run per process at a time (others wait
// briefly, then are told to retry), a time limit, and caps on the video read and the image written.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KilnError } from '../shared/errors.js';
import { PROJECT_ROOT } from '../infra/project-root.js';

export type Still = 'thumbnail' | 'spritesheet';

export const FRAME_LIMITS = {
  /** One ffmpeg run, start to exit. */
  timeoutMs: 20_000,
  /** How long a request waits for the process's ffmpeg to be free before a 503. */
  queueMs: 5_000,
  /** Videos larger than this are not read. */
  maxInputBytes: 256 * 1024 * 1024,
  /** An image larger than this is refused (a spritesheet of 16 frames 160 px wide is ~100 KB). */
  maxOutputBytes: 8 * 1024 * 1024,
};

const BOOTSTRAPPED_FFMPEG = join(PROJECT_ROOT, '.tools', 'bin', 'ffmpeg');

/** FFMPEG_BIN, else the one scripts/bootstrap.sh linked into .tools/bin, else `ffmpeg` on PATH (as the workers find it). */
export function ffmpegPath(env: NodeJS.ProcessEnv = process.env): string {
  return env.FFMPEG_BIN || (existsSync(BOOTSTRAPPED_FFMPEG) ? BOOTSTRAPPED_FFMPEG : 'ffmpeg');
}

const unavailable = (why: string) =>
  new KilnError('service_unavailable', `The ${why}; the video itself is available (variant=video).`, 5);

/** ffmpeg's arguments for a still; `seconds` (the video's length) spreads a spritesheet's 16 frames over it. */
function args(still: Still, input: string, output: string, seconds: number, seek: boolean): string[] {
  const head = ['-hide_banner', '-loglevel', 'error', '-nostdin', '-y'];
  const tail = ['-frames:v', '1', '-c:v', 'mjpeg', '-q:v', '4', '-f', 'image2', output];
  if (still === 'thumbnail') {
    return [...head, ...(seek ? ['-ss', '1'] : []), '-i', input, '-vf', "scale='min(1280,iw)':-2", ...tail];
  }
  const fps = seconds > 0 ? Math.min(4, 16 / seconds) : 1;
  return [...head, '-i', input, '-vf', `fps=${fps.toFixed(4)},scale=160:-2,tile=4x4`, ...tail];
}

/** One process-wide ffmpeg slot: a FIFO of waiters, each giving up after FRAME_LIMITS.queueMs. */
class Slot {
  private busy = false;
  private readonly waiters: (() => void)[] = [];

  async run<T>(f: () => Promise<T>): Promise<T> {
    if (this.busy) await this.wait();
    this.busy = true;
    try {
      return await f();
    } finally {
      const next = this.waiters.shift();
      if (next) next();
      else this.busy = false;
    }
  }

  private wait(): Promise<void> {
    return new Promise((resolve, reject) => {
      const go = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(go), 1);
        reject(new KilnError('service_unavailable', 'Another still is being made; retry shortly.', 2));
      }, FRAME_LIMITS.queueMs);
      this.waiters.push(go);
    });
  }
}

const slot = new Slot();

/** Runs ffmpeg, killed at the time limit; rejects with a 503 when it is missing, fails or is killed. */
function runFfmpeg(bin: string, argv: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-500)));
    const timer = setTimeout(() => child.kill('SIGKILL'), FRAME_LIMITS.timeoutMs);
    child.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(unavailable(err.code === 'ENOENT' ? 'still cannot be made: ffmpeg is not installed' : 'still failed'));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else if (signal) reject(unavailable(`still took over ${FRAME_LIMITS.timeoutMs / 1000} s and was stopped`));
      else reject(unavailable(`still could not be made (ffmpeg: ${stderr.trim().split('\n').pop() ?? code})`));
    });
  });
}

/**
 * A JPEG still of `video` (its bytes, read by `load` only once the slot is ours): a thumbnail (the
 * frame at 1 s, or the first of a shorter video) or a 4x4 spritesheet of frames across it.
 */
export async function makeStill(
  still: Still,
  load: () => Promise<Buffer>,
  seconds: number,
  bin = ffmpegPath(),
): Promise<Buffer> {
  return slot.run(async () => {
    const video = await load();
    if (video.length > FRAME_LIMITS.maxInputBytes) throw unavailable('video is too large for a still');
    const dir = await mkdtemp(join(tmpdir(), 'kiln-still-'));
    try {
      const input = join(dir, 'in.mp4');
      const output = join(dir, 'out.jpg');
      await writeFile(input, video);
      await runFfmpeg(bin, args(still, input, output, seconds, true));
      // A video shorter than the seek has no frame there: its first frame, then.
      const size = await stat(output).then(
        (s) => s.size,
        () => 0,
      );
      if (size === 0 && still === 'thumbnail') await runFfmpeg(bin, args(still, input, output, seconds, false));
      const out = await readFile(output).catch(() => Buffer.alloc(0));
      if (out.length === 0) throw unavailable('still could not be made (ffmpeg wrote no image)');
      if (out.length > FRAME_LIMITS.maxOutputBytes) throw unavailable('still is too large');
      return out;
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
}
