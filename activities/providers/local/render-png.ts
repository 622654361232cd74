// Local placeholder renderer: a real PNG of the requested size showing the prompt, made offline with jimp.
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { createJimp } from '@jimp/core';
import png, { PNGFilterType } from '@jimp/js-png';
import { measureText, methods as printMethods } from '@jimp/plugin-print';
import { loadFont } from '@jimp/plugin-print/load-font';
import { SANS_16_BLACK, SANS_32_BLACK, SANS_64_BLACK, SANS_128_BLACK } from '@jimp/plugin-print/fonts';

// Only what the renderer uses: PNG and text. The whole `jimp` (every format and plugin) cost a
// worker running local models ~11 MiB; this builds the same bytes.
const Jimp = createJimp({ formats: [png], plugins: [printMethods] });

export interface RenderOptions {
  prompt: string;
  aspectRatio?: string;
  imageSize?: string;
  seed?: number;
}

type Font = Awaited<ReturnType<typeof loadFont>>;

const LONG_SIDE = new Map([
  ['1K', 1024],
  ['2K', 2048],
  ['4K', 4096],
]);
const FONT_FILES = new Map([
  [16, SANS_16_BLACK],
  [32, SANS_32_BLACK],
  [64, SANS_64_BLACK],
  [128, SANS_128_BLACK],
]);
const ELLIPSIS = '...'; // the bundled fonts have no U+2026 glyph

export function imageDimensions(aspectRatio = '1:1', imageSize = '1K'): { width: number; height: number } {
  const long = LONG_SIDE.get(imageSize.toUpperCase());
  if (long === undefined) throw new Error(`invalid imageSize "${imageSize}": expected 1K, 2K or 4K`);
  const m = /^(\d+):(\d+)$/.exec(aspectRatio);
  const rw = m ? Number(m[1]) : NaN;
  const rh = m ? Number(m[2]) : NaN;
  if (!Number.isSafeInteger(rw) || !Number.isSafeInteger(rh) || rw <= 0 || rh <= 0) {
    throw new Error(`invalid aspectRatio "${aspectRatio}": expected "<w>:<h>" with positive integers, e.g. "16:9"`);
  }
  const short = Math.max(1, Math.round((long * Math.min(rw, rh)) / Math.max(rw, rh)));
  return rw >= rh ? { width: long, height: short } : { width: short, height: long };
}

const fontCache = new Map<number, Promise<Font>>();
function getFont(size: number): Promise<Font> {
  let font = fontCache.get(size);
  if (!font) {
    font = loadFont(FONT_FILES.get(size)!);
    fontCache.set(size, font);
    font.catch(() => fontCache.delete(size)); // don't cache a failed load forever
  }
  return font;
}

/** Soft (pastel) opaque RGBA pixel, stable for a given prompt + seed. */
function backgroundPixel(prompt: string, seed?: number): Buffer {
  const h = createHash('sha256')
    .update(`${seed ?? ''}\u0000${prompt}`)
    .digest();
  const hue = h.readUInt16BE(0) % 360;
  const sat = 0.35 + (h[2]! / 255) * 0.25;
  const light = 0.82 + (h[3]! / 255) * 0.08; // light enough for black text to stay readable
  const f = (n: number) => {
    const k = (n + hue / 30) % 12;
    const c = light - sat * Math.min(light, 1 - light) * Math.max(-1, Math.min(k - 3, 9 - k, 1));
    return Math.round(c * 255);
  };
  return Buffer.from([f(0), f(8), f(4), 255]);
}

/** Collapse whitespace and replace glyphs the font lacks, so measuring matches what print() draws. */
function sanitize(font: Font, text: string): string {
  return Array.from(text.replace(/\s+/g, ' ').trim(), (ch) => (font.chars[ch] ? ch : '?')).join('');
}

/** Greedy word wrap; words wider than a line are hard-broken. Stops early once maxLines is exceeded. */
function wrap(font: Font, text: string, maxWidth: number, maxLines: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (let word of text.split(' ')) {
    while (lines.length <= maxLines) {
      const candidate = line ? `${line} ${word}` : word;
      if (measureText(font, candidate) <= maxWidth) {
        line = candidate;
        break;
      }
      if (line) {
        lines.push(line);
        line = '';
        continue;
      }
      let n = 1;
      while (n < word.length && measureText(font, word.slice(0, n + 1)) <= maxWidth) n++;
      lines.push(word.slice(0, n));
      word = word.slice(n);
    }
    if (lines.length > maxLines) break;
  }
  if (line) lines.push(line);
  if (lines.length <= maxLines) return lines;
  let last = lines[maxLines - 1]!;
  while (last && measureText(font, last.trimEnd() + ELLIPSIS) > maxWidth) last = last.slice(0, -1);
  return [...lines.slice(0, maxLines - 1), last.trimEnd() + ELLIPSIS];
}

/**
 * Renders kept (a prompt sent again, or a load test's one prompt, gets the same bytes: a render is
 * a pure function of its options). A render costs a 1024×10 picture ~0.4 ms of CPU and a 4K one
 * far more, with a bitmap and a zlib stream for the collector: this stand-in for an upstream's
 * servers should not weigh on the worker that runs Kiln beside it. Bounded by bytes.
 */
const kept = new LRUCache<string, Buffer>({
  maxSize: 8 * 1024 * 1024,
  // One picture never takes more than an eighth of the room: a larger one is not kept.
  maxEntrySize: 1024 * 1024,
  sizeCalculation: (png) => png.length,
});

/** A PNG showing the prompt, of the requested size. Callers must not change the bytes: they may be shared. */
export async function renderPromptPng(opts: RenderOptions): Promise<Buffer> {
  const key = JSON.stringify([opts.prompt, opts.aspectRatio ?? null, opts.imageSize ?? null, opts.seed ?? null]);
  const hit = kept.get(key);
  if (hit) return hit;
  const png = await renderFresh(opts);
  kept.set(key, png);
  return png;
}

/** A new render, past the kept ones (tests: a render is a pure function, which is what makes keeping them exact). */
export async function renderFresh(opts: RenderOptions): Promise<Buffer> {
  const { width, height } = imageDimensions(opts.aspectRatio, opts.imageSize);
  const scale = Math.sqrt(width * height);
  const bodySize = scale >= 2800 ? 128 : scale >= 1400 ? 64 : scale >= 480 ? 32 : 16;
  const [body, small] = await Promise.all([getFont(bodySize), getFont(Math.max(16, bodySize / 2))]);
  // Buffer.alloc's native fill is far faster than Jimp's per-pixel `color` fill on 4K images.
  const data = Buffer.alloc(width * height * 4, backgroundPixel(opts.prompt, opts.seed));
  const image = new Jimp({ width, height, data });

  const margin = Math.round(Math.min(width, height) * 0.06);
  const footer = `kiln local · ${width}x${height}`;
  const footerH = small.common.lineHeight;
  const footerY = height - margin - footerH;
  const footerW = measureText(small, footer);
  if (footerY >= 0 && footerW <= width) {
    image.print({ font: small, x: Math.round((width - footerW) / 2), y: footerY, text: footer });
  }

  const areaW = width - 2 * margin;
  const areaH = footerY - Math.round(footerH / 2) - margin;
  const lineH = body.common.lineHeight;
  const maxLines = Math.floor(areaH / lineH);
  const text = sanitize(body, opts.prompt);
  if (text && maxLines >= 1 && areaW >= lineH) {
    const lines = wrap(body, text, areaW, maxLines);
    let y = margin + Math.round((areaH - lines.length * lineH) / 2);
    for (const line of lines) {
      const x = margin + Math.round((areaW - measureText(body, line)) / 2);
      image.print({ font: body, x, y, text: line });
      y += lineH;
    }
  }

  // A fixed filter instead of the default adaptive one: much faster at 4K for flat backgrounds, similar size.
  return image.getBuffer('image/png', { filterType: PNGFilterType.UP });
}
