// Kiln's image and video requests as a Replicate prediction's `input`. Input names vary per model
// (a model's API tab, or its version's openapi_schema, lists them): Kiln sends the common ones by
// default, a channel's `inputNames` renames them or sets one to null (the model has no such input),
// and an option that cannot be sent is refused (at submit for images, before the create for video),
// never dropped. Pure module: the API's submit check imports it too.
import type { ImageRequest } from './image-task.js';
import { promptText, referenceImages } from './prompt.js';
import type { VideoRequest } from './video-task.js';

type Name = string | null | undefined;

/** A channel's `inputNames` for image models (models-file shape). */
export interface ImageInputNames {
  prompt?: Name;
  image?: Name;
  imageList?: boolean | undefined;
  aspectRatio?: Name;
  imageSize?: Name;
  count?: Name;
  seed?: Name;
}

/** A channel's `inputNames` for video models (models-file shape). */
export interface VideoInputNames {
  prompt?: Name;
  image?: Name;
  seconds?: Name;
  aspectRatio?: Name;
  resolution?: Name;
}

/**
 * The names most of Replicate's image models take (FLUX, Seedream, Imagen, Ideogram …). No default
 * image input: it differs by model (`input_image`, `image_input`, `image_prompt` …), so a model
 * takes reference images only once its channel names it. `imageSize` (1K/2K/4K) likewise.
 */
export const IMAGE_INPUT_DEFAULTS = {
  prompt: 'prompt',
  image: null,
  aspectRatio: 'aspect_ratio',
  imageSize: null,
  count: 'num_outputs',
  seed: 'seed',
} as const satisfies Record<string, string | null>;

/** The names most of Replicate's video models take (Seedance, Wan, Kling, Veo …). */
export const VIDEO_INPUT_DEFAULTS = {
  prompt: 'prompt',
  image: 'image',
  seconds: 'duration',
  aspectRatio: 'aspect_ratio',
  resolution: 'resolution',
} as const satisfies Record<string, string | null>;

function names<D extends Record<string, string | null>>(defaults: D, given: object | undefined) {
  const out: Record<string, string | null> = { ...defaults };
  for (const [k, v] of Object.entries(given ?? {})) if (k in defaults && v !== undefined) out[k] = v as string | null;
  return out as { [K in keyof D]: string | null };
}

/** One option a channel cannot send: the field as the caller wrote it, and what it takes instead. */
export interface InputRefusal {
  field: string;
  got: string;
  allowed: readonly string[];
}

/** generationConfig fields a Replicate image model can take (responseModalities: the output is images anyway). */
const GENERATION_KEYS = ['imageConfig', 'candidateCount', 'seed', 'responseModalities'];
const IMAGE_CONFIG_KEYS = ['aspectRatio', 'imageSize'];

const refusal = (field: string, got: unknown, allowed: readonly string[]): InputRefusal => ({
  field,
  got: typeof got === 'string' ? got : (JSON.stringify(got) ?? String(got)),
  allowed,
});
const unnamed = (option: string) => [`none: the channel's inputNames.${option} is null (set it to the model's input)`];

/** The first option of `request` a channel with these `inputNames` cannot send; null when it can send all. */
export function imageInputRefusal(request: ImageRequest, given?: ImageInputNames): InputRefusal | null {
  const n = names(IMAGE_INPUT_DEFAULTS, given);
  if (request.tools?.length) return refusal('tools', request.tools, ['none: Replicate models take no tools']);
  if (request.systemInstruction)
    return refusal('systemInstruction', 'given', ['none: Replicate models take one prompt; put it there']);
  const gc = request.generationConfig ?? {};
  for (const k of Object.keys(gc))
    if (!GENERATION_KEYS.includes(k)) return refusal(`generationConfig.${k}`, gc[k], GENERATION_KEYS);
  const ic = gc.imageConfig ?? {};
  for (const k of Object.keys(ic))
    if (!IMAGE_CONFIG_KEYS.includes(k)) return refusal(`imageConfig.${k}`, ic[k], IMAGE_CONFIG_KEYS);
  if (ic.aspectRatio !== undefined && !n.aspectRatio)
    return refusal('aspectRatio', ic.aspectRatio, unnamed('aspectRatio'));
  if (ic.imageSize !== undefined && !n.imageSize) return refusal('imageSize', ic.imageSize, unnamed('imageSize'));
  const count = gc.candidateCount;
  if (count !== undefined && (typeof count !== 'number' || !Number.isInteger(count) || count < 1 || count > 8))
    return refusal('candidateCount', count, ['a whole number from 1 to 8']);
  if (count !== undefined && count > 1 && !n.count) return refusal('candidateCount', count, ['1', ...unnamed('count')]);
  if (gc.seed !== undefined && (typeof gc.seed !== 'number' || !Number.isInteger(gc.seed)))
    return refusal('seed', gc.seed, ['a whole number']);
  if (gc.seed !== undefined && !n.seed) return refusal('seed', gc.seed, unnamed('seed'));
  const refs = referenceImages(request).length;
  if (refs > 0 && !n.image) return refusal('reference images', `${refs} given`, unnamed('image'));
  if (refs > 1 && !given?.imageList)
    return refusal('reference images', `${refs} given`, ['at most 1 (the model takes one image; imageList: false)']);
  return null;
}

/** An image task's prediction input; `images`: the reference images as the model takes them (URLs or data URIs). */
export function imageInput(
  request: ImageRequest,
  given: ImageInputNames | undefined,
  defaults: Record<string, unknown> | undefined,
  images: string[],
): Record<string, unknown> {
  const n = names(IMAGE_INPUT_DEFAULTS, given);
  const ic = request.generationConfig?.imageConfig ?? {};
  const count = request.generationConfig?.candidateCount;
  const seed = request.generationConfig?.seed;
  const input: Record<string, unknown> = { ...defaults };
  if (n.prompt) input[n.prompt] = promptText(request);
  if (n.image && images.length) input[n.image] = given?.imageList ? images : images[0];
  if (n.aspectRatio && ic.aspectRatio !== undefined) input[n.aspectRatio] = ic.aspectRatio;
  if (n.imageSize && ic.imageSize !== undefined) input[n.imageSize] = ic.imageSize;
  // One output is every model's default, and models without the input may refuse it.
  if (n.count && typeof count === 'number' && count > 1) input[n.count] = count;
  if (n.seed && seed !== undefined) input[n.seed] = seed;
  return input;
}

/** What a video request cannot send to a channel with these `inputNames`; null when it can send all. */
export function videoInputRefusal(request: VideoRequest, given?: VideoInputNames): InputRefusal | null {
  const n = names(VIDEO_INPUT_DEFAULTS, given);
  if (request.nodeInfoList?.length)
    return refusal('nodeInfoList', 'given', ['none: Replicate models take inputs, not nodes']);
  if (request.image && !n.image) return refusal('image', request.image.slice(0, 60), unnamed('image'));
  return null;
}

/**
 * `seconds` is a number (`duration`), and `size` (WxH) the aspect ratio reduced (1280x720 → 16:9)
 * and the resolution its shorter side (720p): the forms Replicate's video models share. A name set
 * to null leaves that option to the model's own default (its models-file values must agree).
 */
export function videoInput(
  request: VideoRequest,
  given: VideoInputNames | undefined,
  defaults: Record<string, unknown> | undefined,
  image: string | undefined,
): Record<string, unknown> {
  const n = names(VIDEO_INPUT_DEFAULTS, given);
  const [w, h] = request.size.split('x').map(Number) as [number, number];
  const input: Record<string, unknown> = { ...defaults };
  if (n.prompt) input[n.prompt] = request.prompt;
  if (n.image && image) input[n.image] = image;
  if (n.seconds) input[n.seconds] = Number(request.seconds);
  if (n.aspectRatio) input[n.aspectRatio] = aspectRatio(w, h);
  if (n.resolution) input[n.resolution] = `${Math.min(w, h)}p`;
  return input;
}

export function aspectRatio(w: number, h: number): string {
  const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));
  const d = gcd(w, h) || 1;
  return `${w / d}:${h / d}`;
}
