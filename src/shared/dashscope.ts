// How a Kiln image or video request reads as a DashScope (Alibaba Cloud Model Studio) async task:
// the service path and the `{model, input, parameters}` body, or why it cannot be expressed. The
// API refuses an image request at submit with the same answer the worker would build the body
// from (src/image/provider-options.ts), so nothing is dropped on the way.
// Pure module: no I/O.
import type { ImageRequest } from './image-task.js';
import { promptText, referenceImages } from './prompt.js';
import type { VideoRequest } from './video-task.js';

export interface DashScopeRefusal {
  field: string;
  got: string;
  allowed: readonly string[];
}

export interface DashScopeTask {
  /** Under {baseUrl}/api/v1/services/aigc/. */
  path: string;
  body: { model: string; input: Record<string, unknown>; parameters: Record<string, unknown> };
}

/**
 * Qwen-Image (qwen-image, qwen-image-plus on the async path) draws one image at one of five sizes,
 * each an aspect ratio (Model Studio's Qwen-Image API reference, `size`).
 */
export const QWEN_IMAGE_SIZES: Readonly<Record<string, string>> = {
  '1:1': '1328*1328',
  '16:9': '1664*928',
  '9:16': '928*1664',
  '4:3': '1472*1140',
  '3:4': '1140*1472',
};

/**
 * Wan text-to-image models take any `W*H` whose area lies within 512*512 to 1440*1440 and whose
 * ratio lies within 1:4 to 4:1: Kiln's tiers are the area (1K ≈ 1024*1024, 2K the most, 1440*1440).
 */
const WAN_TIER_SIDE: Readonly<Record<string, number>> = { '1K': 1024, '2K': 1440 };
const WAN_MAX_N = 4;
/** wan2.5-i2i and its kind edit 1 to 3 images sent in `input.images`. */
const I2I_MAX_IMAGES = 3;

/** Image-to-video `parameters.resolution` by the shorter side of Kiln's `size`. */
const I2V_RESOLUTIONS: Readonly<Record<number, string>> = { 480: '480P', 720: '720P', 1080: '1080P' };
const I2V_SIZES = ['sizes whose shorter side is 480, 720 or 1080 (an -i2v model takes resolution 480P, 720P or 1080P)'];

const GENERATION_KEYS = ['responseModalities', 'imageConfig', 'candidateCount', 'seed'];

export const isQwenImage = (model: string): boolean => /^qwen-image/i.test(model);
/** The image-to-image models the official SDKs send to `image2image` with `input.images` (wan2.5-i2i-preview …). */
export const isImageToImage = (model: string): boolean => /-i2i/i.test(model);
/** Wan image-to-video models (`input.img_url`): wan2.x-i2v-*, wanx2.1-i2v-*. */
export const isImageToVideo = (model: string): boolean => /-i2v/i.test(model);

const refusal = (field: string, got: unknown, allowed: readonly string[]): { refusal: DashScopeRefusal } => ({
  refusal: { field, got: String(got), allowed },
});

/** The image task for `upstreamModel`, or the first option it cannot express. */
export function dashscopeImageTask(
  request: ImageRequest,
  upstreamModel: string,
): { task: DashScopeTask } | { refusal: DashScopeRefusal } {
  if (request.tools?.length) return refusal('tools', `${request.tools.length} tool(s)`, ['none']);
  if (request.systemInstruction) return refusal('systemInstruction', 'set', ['none (put it in the prompt)']);
  const role = request.contents.find((c) => (c.role ?? 'user') !== 'user')?.role;
  if (role) return refusal('contents.role', role, ['user (DashScope takes one prompt, not a conversation)']);
  const gc = request.generationConfig ?? {};
  const extra = Object.keys(gc).find((k) => !GENERATION_KEYS.includes(k));
  if (extra) return refusal(`generationConfig.${extra}`, 'set', GENERATION_KEYS);
  const ic = gc.imageConfig ?? {};
  const extraIc = Object.keys(ic).find((k) => k !== 'aspectRatio' && k !== 'imageSize');
  if (extraIc) return refusal(`imageConfig.${extraIc}`, 'set', ['aspectRatio', 'imageSize']);

  const qwen = isQwenImage(upstreamModel);
  const parameters: Record<string, unknown> = {};
  const size = imageSize(ic.aspectRatio, ic.imageSize, qwen);
  if ('refusal' in size) return size;
  if (size.size) parameters.size = size.size;

  const n = gc.candidateCount;
  const maxN = qwen ? 1 : WAN_MAX_N;
  if (n !== undefined) {
    if (!Number.isInteger(n) || (n as number) < 1 || (n as number) > maxN)
      return refusal(
        'generationConfig.candidateCount',
        n,
        Array.from({ length: maxN }, (_, i) => String(i + 1)),
      );
    parameters.n = n;
  }
  if (gc.seed !== undefined) {
    if (!Number.isInteger(gc.seed) || (gc.seed as number) < 0 || (gc.seed as number) > 2147483647)
      return refusal('generationConfig.seed', gc.seed, ['a whole number from 0 to 2147483647']);
    parameters.seed = gc.seed;
  }

  const refs = referenceImages(request).map((r) => r.data);
  const input: Record<string, unknown> = { prompt: promptText(request) };
  let path = 'text2image/image-synthesis';
  if (isImageToImage(upstreamModel)) {
    if (refs.length < 1 || refs.length > I2I_MAX_IMAGES)
      return refusal('reference images', `${refs.length}`, [`1 to ${I2I_MAX_IMAGES} (${upstreamModel} edits images)`]);
    input.images = refs;
    path = 'image2image/image-synthesis';
  } else if (refs.length > 0) {
    return refusal('reference images', `${refs.length}`, [`none (${upstreamModel} is a text-to-image model)`]);
  }
  return { task: { path, body: { model: upstreamModel, input, parameters } } };
}

function imageSize(
  aspectRatio: string | undefined,
  tier: string | undefined,
  qwen: boolean,
): { size?: string } | { refusal: DashScopeRefusal } {
  if (aspectRatio === undefined && tier === undefined) return {};
  const ratio = aspectRatio ?? '1:1';
  if (qwen) {
    if (tier !== undefined && tier !== '1K')
      return refusal('imageConfig.imageSize', tier, ['1K (Qwen-Image has one size per aspect ratio)']);
    const size = QWEN_IMAGE_SIZES[ratio];
    return size ? { size } : refusal('imageConfig.aspectRatio', ratio, Object.keys(QWEN_IMAGE_SIZES));
  }
  const side = WAN_TIER_SIDE[tier ?? '1K'];
  if (!side) return refusal('imageConfig.imageSize', tier, Object.keys(WAN_TIER_SIDE));
  const [w, h] = ratio.split(':').map(Number) as [number, number];
  if (!(w > 0 && h > 0) || w / h > 4 || h / w > 4)
    return refusal('imageConfig.aspectRatio', ratio, ['W:H from 1:4 to 4:1']);
  return { size: wanSize(w / h, side * side) };
}

/** Width and height of `ratio` covering at most `area` pixels, each a multiple of 16. */
export function wanSize(ratio: number, area: number): string {
  const width = Math.floor(Math.sqrt(area * ratio) / 16) * 16;
  const height = Math.floor(Math.sqrt(area / ratio) / 16) * 16;
  return `${width}*${height}`;
}

/** The video task for `upstreamModel`, or why this request cannot go to it. */
export function dashscopeVideoTask(
  request: VideoRequest,
  upstreamModel: string,
): { task: DashScopeTask } | { refusal: DashScopeRefusal } {
  if (request.nodeInfoList?.length) return refusal('nodeInfoList', 'set', ['none']);
  const i2v = isImageToVideo(upstreamModel);
  if (request.image && !i2v)
    return refusal('image', 'set', [`none (${upstreamModel} is a text-to-video model; an -i2v model takes one)`]);
  if (!request.image && i2v) return refusal('image', 'none', [`one image URL (${upstreamModel} animates an image)`]);
  const m = /^(\d+)x(\d+)$/.exec(request.size);
  if (!m) return refusal('size', request.size, ['WIDTHxHEIGHT']);
  const [width, height] = [Number(m[1]), Number(m[2])];
  // Image-to-video takes a resolution tier; the picture itself sets the aspect ratio.
  const tier = i2v ? I2V_RESOLUTIONS[Math.min(width, height)] : undefined;
  if (i2v && !tier) return refusal('size', request.size, I2V_SIZES);
  const input: Record<string, unknown> = {
    prompt: request.prompt,
    ...(request.image ? { img_url: request.image } : {}),
  };
  return {
    task: {
      path: 'video-generation/video-synthesis',
      body: {
        model: upstreamModel,
        input,
        parameters: {
          ...(tier ? { resolution: tier } : { size: `${width}*${height}` }),
          duration: Number(request.seconds),
        },
      },
    },
  };
}

/** A dashscope video model's `seconds` when the models file names none: Wan's 5 s, which every Wan video model takes. */
export const DASHSCOPE_DEFAULT_SECONDS = ['5'] as const;

/** Why a model's `sizes` cannot go to a dashscope channel of `upstreamModel`: one message per value. */
export function dashscopeVideoRefusals(sizes: readonly string[], upstreamModel: string): string[] {
  if (!isImageToVideo(upstreamModel)) return [];
  return sizes
    .filter((s) => {
      const [w, h] = s.split('x').map(Number) as [number, number];
      return !I2V_RESOLUTIONS[Math.min(w, h)];
    })
    .map((s) => `size "${s}" cannot be sent to dashscope ${upstreamModel}: ${I2V_SIZES[0]} (set the model's sizes)`);
}
