// How a Kiln video request reads as a Seedance content-generation task (Volcengine Ark, BytePlus
// ModelArk): the `{model, content, ratio, resolution, duration}` body, or why it cannot be
// expressed. The models file is checked with the same rules at start-up (src/config/models.ts) and a
// request's image at submit (src/video/validate.ts), so nothing is dropped on the way.
// Parameters go as body fields, as the current API reference and the official SDKs send them
// (volcenginesdkarkruntime `content_generation.tasks.create(..., ratio, resolution, duration)`), not
// as the older `--ratio 16:9 --dur 5` commands appended to the prompt.
// Pure module: no I/O.
import type { VideoRequest } from './video-task.js';

export interface SeedanceRefusal {
  field: string;
  got: string;
  allowed: readonly string[];
}

export interface SeedanceTaskBody {
  model: string;
  content: ({ type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string }; role: 'first_frame' })[];
  ratio: string;
  resolution: string;
  duration: number;
}

/** Seedance's `ratio` values (without `adaptive` / `keep_ratio`: Kiln's size names the ratio). */
export const SEEDANCE_RATIOS = ['16:9', '4:3', '1:1', '3:4', '9:16', '21:9'] as const;
/**
 * Seedance's `resolution` tiers name an area, not a side: at 720p a 16:9 video is 1248x704 and a 1:1
 * one 960x960 (Ark's pixel table). Kiln's size goes as the tier whose 16:9 area it is near.
 */
export const SEEDANCE_RESOLUTIONS: readonly { resolution: string; area: number }[] = [
  { resolution: '480p', area: 854 * 480 },
  { resolution: '720p', area: 1280 * 720 },
  { resolution: '1080p', area: 1920 * 1080 },
];
/** How far a size's ratio may be from the one it is sent as (854x480 is 16:9), and its area from the tier's. */
const RATIO_TOLERANCE = 0.02;
const AREA_TOLERANCE = 0.1;

/** A seedance video model's `seconds` when the models file names none: 5 and 10, which every Seedance model takes. */
export const SEEDANCE_DEFAULT_SECONDS = ['5', '10'] as const;

/**
 * The durations each family takes (Ark's model list): Seedance 2.0 4 to 15 s, 1.5 pro 4 to 12 s,
 * 1.0 (pro, pro-fast, lite) 2 to 12 s; Wan 2.1 on Ark only 5 s. First match wins.
 */
const DURATIONS: readonly { model: RegExp; min: number; max: number }[] = [
  { model: /seedance-2-0/i, min: 4, max: 15 },
  { model: /seedance-1-5/i, min: 4, max: 12 },
  { model: /wan2-1/i, min: 5, max: 5 },
  { model: /^/, min: 2, max: 12 },
];

const durationsOf = (model: string) => DURATIONS.find((d) => d.model.test(model))!;
const durationWords = (d: { min: number; max: number }) =>
  d.min === d.max ? `${d.min}` : `whole seconds from ${d.min} to ${d.max}`;

/** Text-to-video only (…-lite-t2v, wan2-1-14b-t2v): no image. */
export const isTextOnly = (model: string): boolean => /-t2v/i.test(model);
/** Image-to-video only (…-lite-i2v, wan2-1-14b-i2v): the first frame is required. */
export const needsImage = (model: string): boolean => /-i2v/i.test(model);

/** Kiln's `size` (`WxH`) as Seedance's ratio and resolution; undefined when Seedance has none for it. */
export function seedanceShape(size: string): { ratio: string; resolution: string } | undefined {
  const m = /^([1-9]\d{1,4})x([1-9]\d{1,4})$/.exec(size);
  if (!m) return undefined;
  const [w, h] = [Number(m[1]), Number(m[2])];
  const resolution = SEEDANCE_RESOLUTIONS.find((r) => Math.abs((w * h) / r.area - 1) <= AREA_TOLERANCE)?.resolution;
  const ratio = SEEDANCE_RATIOS.find((r) => {
    const [a, b] = r.split(':').map(Number) as [number, number];
    return Math.abs(w / h / (a / b) - 1) <= RATIO_TOLERANCE;
  });
  return resolution && ratio ? { ratio, resolution } : undefined;
}

const SIZE_WORDS =
  `ratio ${SEEDANCE_RATIOS.join(', ')} at resolution 480p, 720p or 1080p ` +
  '(the area of 854x480, 1280x720 or 1920x1080, within 10 %)';

/** Why this request's image cannot go to `upstreamModel` (checked at submit and again before the create). */
export function seedanceImageRefusal(image: string | undefined, upstreamModel: string): SeedanceRefusal | undefined {
  if (image !== undefined && isTextOnly(upstreamModel))
    return { field: 'image', got: 'set', allowed: [`none (${upstreamModel} is a text-to-video model)`] };
  if (image === undefined && needsImage(upstreamModel))
    return { field: 'image', got: 'none', allowed: [`one image URL (${upstreamModel} animates a first frame)`] };
  return undefined;
}

/** The task body for `upstreamModel`, or the first thing it cannot express. */
export function seedanceTask(
  request: VideoRequest,
  upstreamModel: string,
): { body: SeedanceTaskBody } | { refusal: SeedanceRefusal } {
  if (request.nodeInfoList?.length) return { refusal: { field: 'nodeInfoList', got: 'set', allowed: ['none'] } };
  const image = seedanceImageRefusal(request.image, upstreamModel);
  if (image) return { refusal: image };
  const shape = seedanceShape(request.size);
  if (!shape) return { refusal: { field: 'size', got: request.size, allowed: [SIZE_WORDS] } };
  const d = durationsOf(upstreamModel);
  const seconds = Number(request.seconds);
  if (!Number.isInteger(seconds) || seconds < d.min || seconds > d.max)
    return { refusal: { field: 'seconds', got: request.seconds, allowed: [durationWords(d)] } };
  return {
    body: {
      model: upstreamModel,
      content: [
        { type: 'text', text: request.prompt },
        ...(request.image
          ? [{ type: 'image_url' as const, image_url: { url: request.image }, role: 'first_frame' as const }]
          : []),
      ],
      ratio: shape.ratio,
      resolution: shape.resolution,
      duration: seconds,
    },
  };
}

/** Why a video model's `seconds` and `sizes` cannot go to a seedance channel of `upstreamModel`: one per value. */
export function seedanceVideoRefusals(
  options: { seconds: readonly string[]; sizes: readonly string[] },
  upstreamModel: string,
): { field: 'seconds' | 'sizes'; message: string }[] {
  const d = durationsOf(upstreamModel);
  const seconds = options.seconds
    .filter((s) => Number(s) < d.min || Number(s) > d.max)
    .map((s) => ({
      field: 'seconds' as const,
      message: `seconds "${s}" cannot be sent to seedance ${upstreamModel}: it takes ${durationWords(d)} (set the model's seconds)`,
    }));
  const sizes = options.sizes
    .filter((s) => !seedanceShape(s))
    .map((s) => ({
      field: 'sizes' as const,
      message: `size "${s}" cannot be sent to seedance: it takes ${SIZE_WORDS} (set the model's sizes)`,
    }));
  return [...seconds, ...sizes];
}
