// Local video renderer: the prompt's PNG (render-png.ts) as background, a marker moving across it,
// encoded by ffmpeg as H.264 (yuv420p, faststart) so every browser plays it.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface Mp4Options {
  prompt: string;
  seconds: number;
  /** Requested `WxH`; the render keeps its aspect ratio within `maxSide`. */
  size: string;
  fps: number;
  maxSide: number;
  ffmpeg: string;
  signal?: AbortSignal;
}

/** Output dimensions: the requested aspect ratio, longest side at most `maxSide`, both even (yuv420p). */
export function renderDimensions(size: string, maxSide: number): { width: number; height: number } {
  const m = /^(\d+)x(\d+)$/.exec(size);
  if (!m) throw new Error(`invalid size "${size}"`);
  const [w, h] = [Number(m[1]), Number(m[2])];
  const scale = Math.min(1, maxSide / Math.max(w, h));
  const even = (n: number) => Math.max(2, 2 * Math.round((n * scale) / 2));
  return { width: even(w), height: even(h) };
}

export async function renderPromptMp4(o: Mp4Options): Promise<Buffer> {
  const { width, height } = renderDimensions(o.size, o.maxSide);
  const dir = await mkdtemp(join(tmpdir(), 'kiln-mp4-'));
  try {
    const { renderPromptPng } = await import('./render-png.js'); // jimp: loaded on first use
    const png = await renderPromptPng({
      prompt: o.prompt || '(workflow input)',
      aspectRatio: `${width}:${height}`,
      imageSize: '1K',
    });
    await writeFile(join(dir, 'still.png'), png);
    const dot = Math.max(4, 2 * Math.round(height / 24));
    const frames = Math.round(o.seconds * o.fps);
    await run(
      o.ffmpeg,
      [
        '-hide_banner',
        '-loglevel',
        'error',
        '-nostdin',
        '-y',
        '-loop',
        '1',
        '-framerate',
        String(o.fps),
        '-i',
        join(dir, 'still.png'),
        '-f',
        'lavfi',
        '-i',
        `color=c=0xE4572E:s=${dot}x${dot}:r=${o.fps}`,
        '-filter_complex',
        `[0:v]scale=${width}:${height},setsar=1[bg];` +
          `[bg][1:v]overlay=x=(W-w)*t/${o.seconds}:y=H-h-2:shortest=1,format=yuv420p[v]`,
        '-map',
        '[v]',
        '-frames:v',
        String(frames),
        '-r',
        String(o.fps),
        '-c:v',
        'libx264',
        '-preset',
        'ultrafast',
        '-pix_fmt',
        'yuv420p',
        '-movflags',
        '+faststart',
        join(dir, 'out.mp4'),
      ],
      { signal: o.signal, maxBuffer: 1024 * 1024 },
    );
    return await readFile(join(dir, 'out.mp4'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
