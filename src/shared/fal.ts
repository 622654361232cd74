// How Kiln's image and video options read in fal's app inputs (the `fal` provider), and which of
// them fal cannot take. Image requests are checked at submit (src/image/provider-options.ts),
// video models at start-up (src/config/models.ts): a value fal cannot express never reaches it.
// Pure module: safe to value-import from workflow code.
import type { ImageRequest } from './image-task.js';
import { referenceImages } from './prompt.js';

/** fal's named `image_size` presets (the text-to-image apps' schema) by the aspect ratio they have. */
export const FAL_IMAGE_SIZE_PRESETS: Readonly<Record<string, string>> = {
  '1:1': 'square_hd',
  '4:3': 'landscape_4_3',
  '3:4': 'portrait_4_3',
  '16:9': 'landscape_16_9',
  '9:16': 'portrait_16_9',
};

/** The longer side the presets have: a named ratio asked at this side (or without a size) takes its preset. */
const PRESET_SIDE = 1024;
/** fal's apps take pixel sizes in steps of 16 (the latent's patch size). */
const STEP = 16;

/** The images one fal call makes (`num_images`): the apps' own limit. */
export const FAL_MAX_IMAGES = 4;

/** The `generationConfig` fields fal can express; every other one is refused at submit. */
const IMAGE_CONFIG_FIELDS = new Set(['responseModalities', 'imageConfig', 'candidateCount', 'seed']);

export type FalImageSize = string | { width: number; height: number };

/** A resolution tier's longer side: `1K` is 1024, `2K` 2048; a bare number is pixels; null when neither. */
export function tierSide(tier: string): number | null {
  const k = /^([1-9]\d?(?:\.\d)?)K$/i.exec(tier);
  if (k) return Math.round(Number(k[1]) * 1024);
  return /^[1-9]\d{1,4}$/.test(tier) ? Number(tier) : null;
}

/**
 * The `image_size` of one request: a preset when the ratio has one at 1K, else `{width, height}`
 * with the longer side the tier's (1K when none is asked) and the other in 16-pixel steps.
 * Undefined when the request names neither (the app's default).
 */
export function falImageSize(aspectRatio?: string, imageSize?: string): FalImageSize | undefined {
  if (aspectRatio === undefined && imageSize === undefined) return undefined;
  const ratio = aspectRatio ?? '1:1';
  const side = imageSize === undefined ? PRESET_SIDE : (tierSide(imageSize) ?? PRESET_SIDE);
  const preset = FAL_IMAGE_SIZE_PRESETS[ratio];
  if (preset && side === PRESET_SIDE) return preset;
  const [w, h] = ratio.split(':').map(Number) as [number, number];
  const short = Math.max(STEP, Math.round((side * Math.min(w, h)) / Math.max(w, h) / STEP) * STEP);
  return w >= h ? { width: side, height: short } : { width: short, height: side };
}

/** One option of an image request fal cannot take: the field, what was asked, and what it takes. */
export interface FalRefusal {
  field: string;
  got: string;
  allowed: readonly string[];
}

/** Why an image request cannot go to fal, or null when everything asked can be sent. */
export function falImageRefusal(request: ImageRequest): FalRefusal | null {
  const refs = referenceImages(request).length;
  // One `image_url`: apps that take several name the field differently, so more would be dropped.
  if (refs > 1) return { field: 'reference images', got: String(refs), allowed: ['0', '1'] };
  if (request.tools?.length) return { field: 'tools', got: `${request.tools.length} tools`, allowed: ['none'] };
  if (request.systemInstruction)
    return { field: 'systemInstruction', got: 'a system instruction', allowed: ['none (put it in the prompt)'] };
  const gc = request.generationConfig ?? {};
  for (const k of Object.keys(gc))
    if (!IMAGE_CONFIG_FIELDS.has(k))
      return { field: `generationConfig.${k}`, got: JSON.stringify(gc[k]) ?? '', allowed: ['(omit it)'] };
  const modalities = gc.responseModalities;
  if (Array.isArray(modalities) && !modalities.includes('IMAGE'))
    return { field: 'generationConfig.responseModalities', got: modalities.join(','), allowed: ['IMAGE'] };
  const n = gc.candidateCount;
  if (n !== undefined && !(Number.isInteger(n) && (n as number) >= 1 && (n as number) <= FAL_MAX_IMAGES))
    return {
      field: 'generationConfig.candidateCount',
      got: String(n),
      allowed: Array.from({ length: FAL_MAX_IMAGES }, (_, i) => String(i + 1)),
    };
  if (gc.seed !== undefined && !Number.isSafeInteger(gc.seed))
    return { field: 'generationConfig.seed', got: String(gc.seed), allowed: ['a whole number'] };
  const ic = gc.imageConfig ?? {};
  for (const k of Object.keys(ic))
    if (k !== 'aspectRatio' && k !== 'imageSize')
      return { field: `generationConfig.imageConfig.${k}`, got: String(ic[k]), allowed: ['aspectRatio', 'imageSize'] };
  if (ic.imageSize !== undefined && tierSide(ic.imageSize) === null)
    return {
      field: 'generationConfig.imageConfig.imageSize',
      got: ic.imageSize,
      allowed: ['1K', '2K', '4K', 'a longer side in pixels'],
    };
  return null;
}

/** fal video apps' `aspect_ratio` values. */
export const FAL_VIDEO_RATIOS = ['16:9', '9:16', '1:1', '4:3', '3:4', '21:9', '9:21'] as const;
/** fal video apps' `resolution` values, by the shorter side. */
export const FAL_VIDEO_RESOLUTIONS: Readonly<Record<number, string>> = {
  480: '480p',
  580: '580p',
  720: '720p',
  1080: '1080p',
};
/** How far a size's ratio may be from the one it is sent as (854x480 is 16:9). */
const RATIO_TOLERANCE = 0.02;

/** Kiln's `size` (`WxH`) as fal's `aspect_ratio` and `resolution`; undefined when fal has none for it. */
export function falVideoShape(size: string): { aspect_ratio: string; resolution: string } | undefined {
  const m = /^([1-9]\d{1,4})x([1-9]\d{1,4})$/.exec(size);
  if (!m) return undefined;
  const w = Number(m[1]);
  const h = Number(m[2]);
  const resolution = FAL_VIDEO_RESOLUTIONS[Math.min(w, h)];
  const aspect_ratio = FAL_VIDEO_RATIOS.find((r) => {
    const [a, b] = r.split(':').map(Number) as [number, number];
    return Math.abs(w / h / (a / b) - 1) <= RATIO_TOLERANCE;
  });
  return resolution && aspect_ratio ? { aspect_ratio, resolution } : undefined;
}

/** Why a video model's `sizes` cannot go to a fal channel: one message per size, empty when all can. */
export function falVideoRefusals(options: { sizes: readonly string[] }): { field: 'sizes'; message: string }[] {
  return options.sizes
    .filter((s) => !falVideoShape(s))
    .map((s) => ({
      field: 'sizes' as const,
      message:
        `size "${s}" cannot be sent to fal: its apps take aspect_ratio ${FAL_VIDEO_RATIOS.join(', ')} at ` +
        `resolution ${Object.values(FAL_VIDEO_RESOLUTIONS).join(', ')} (the shorter side; set the model's sizes)`,
    }));
}
