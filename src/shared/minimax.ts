// How a Kiln video request reads as a MiniMax (Hailuo) `POST /v1/video_generation` body, or why it
// cannot be expressed. The models file is checked at start-up (src/config/models.ts) and each
// request at submit (src/video/provider-options.ts) with these same rules, so a value MiniMax
// cannot take never reaches it; the worker builds the body from them again.
// Pure module: no I/O.
import type { VideoRequest } from './video-task.js';

export interface MinimaxRefusal {
  field: string;
  got: string;
  allowed: readonly string[];
}

/** The body MiniMax's create takes (`prompt_optimizer` is left to MiniMax's default). */
export interface MinimaxBody {
  model: string;
  prompt: string;
  duration: number;
  resolution: string;
  first_frame_image?: string;
}

type Tier = '512P' | '720P' | '768P' | '1080P';

interface Family {
  /** Takes a text-only request / a first-frame image. */
  t2v: boolean;
  i2v: boolean;
  /** The durations each resolution renders; `i2vOnly`: only with a first-frame image. */
  tiers: Partial<Record<Tier, { seconds: readonly number[]; i2vOnly?: boolean }>>;
}

const HAILUO_TIERS = { '768P': { seconds: [6, 10] }, '1080P': { seconds: [6] } } as const;
const SERIES_01 = { '720P': { seconds: [6] } } as const;

/**
 * MiniMax's video models (platform.minimax.io, Video Generation: text to video, image to video):
 * Hailuo 2.3 and 02 render 6 s or 10 s at 768P and 6 s at 1080P, Hailuo-02 also 512P from an
 * image; the 01 series 6 s at 720P. By name, case-insensitive.
 */
const FAMILIES: Readonly<Record<string, Family>> = {
  'minimax-hailuo-2.3': { t2v: true, i2v: true, tiers: HAILUO_TIERS },
  'minimax-hailuo-2.3-fast': { t2v: false, i2v: true, tiers: HAILUO_TIERS },
  'minimax-hailuo-02': {
    t2v: true,
    i2v: true,
    tiers: { '512P': { seconds: [6, 10], i2vOnly: true }, ...HAILUO_TIERS },
  },
  't2v-01': { t2v: true, i2v: false, tiers: SERIES_01 },
  't2v-01-director': { t2v: true, i2v: false, tiers: SERIES_01 },
  'i2v-01': { t2v: false, i2v: true, tiers: SERIES_01 },
  'i2v-01-director': { t2v: false, i2v: true, tiers: SERIES_01 },
  'i2v-01-live': { t2v: false, i2v: true, tiers: SERIES_01 },
};

/** A model Kiln does not know by name (a newer one): every tier and duration, MiniMax checks the rest. */
const ANY: Family = {
  t2v: true,
  i2v: true,
  tiers: { '512P': { seconds: [6, 10] }, '720P': { seconds: [6, 10] }, ...HAILUO_TIERS },
};

/** Models whose create needs fields Kiln's request has none of (`subject_reference`). */
const UNSENDABLE = /^s2v-/i;

/** Resolution tiers by the shorter side of Kiln's `size`. */
const TIER_BY_SIDE: Readonly<Record<number, Tier>> = { 512: '512P', 720: '720P', 768: '768P', 1080: '1080P' };

/** A minimax video model's `seconds` when the models file names none: 6 s, which every MiniMax model renders. */
export const MINIMAX_DEFAULT_SECONDS = ['6'] as const;
/** Its `sizes` when the models file names none: Hailuo's 768P and 1080P, landscape (the 01 series must name 1280x720). */
export const MINIMAX_DEFAULT_SIZES = ['1366x768', '1920x1080'] as const;

const familyOf = (upstreamModel: string): Family => FAMILIES[upstreamModel.toLowerCase()] ?? ANY;

/**
 * Kiln's `size` as a MiniMax resolution: 16:9 (MiniMax renders text-to-video in 16:9; from an
 * image, at the image's own ratio) with a shorter side of 512, 720, 768 or 1080.
 */
export function minimaxShape(size: string): { tier: Tier; portrait: boolean } | undefined {
  const m = /^(\d+)x(\d+)$/.exec(size);
  if (!m) return undefined;
  const [w, h] = [Number(m[1]), Number(m[2])];
  const tier = TIER_BY_SIDE[Math.min(w, h)];
  if (!tier || Math.abs(Math.max(w, h) / Math.min(w, h) - 16 / 9) > 0.02) return undefined;
  return { tier, portrait: h > w };
}

const SIZE_RULE = '16:9 sizes whose shorter side is one of the model’s resolutions';

function sizeWords(f: Family): string {
  const tiers = Object.keys(f.tiers).join(', ');
  return `${SIZE_RULE} (${tiers}: e.g. 1280x720 for 720P, 1366x768 for 768P, 1920x1080 for 1080P)`;
}

const refusal = (field: string, got: unknown, allowed: readonly string[]): { refusal: MinimaxRefusal } => ({
  refusal: { field, got: String(got), allowed },
});

/**
 * The create body for `upstreamModel`, or the first thing in the request it cannot take.
 * `sizes`: the model's sizes, named in a refusal of a portrait size without an image.
 */
export function minimaxVideoBody(
  request: VideoRequest,
  upstreamModel: string,
  sizes: readonly string[] = [],
): { body: MinimaxBody } | { refusal: MinimaxRefusal } {
  if (request.nodeInfoList?.length) return refusal('nodeInfoList', 'set', ['none']);
  if (UNSENDABLE.test(upstreamModel))
    return refusal('model', upstreamModel, ['a MiniMax text-to-video or image-to-video model']);
  const f = familyOf(upstreamModel);
  const image = request.image;
  if (image && !f.i2v)
    return refusal('image', 'set', [
      `none (${upstreamModel} is a text-to-video model; an image-to-video one takes one)`,
    ]);
  if (!image && !f.t2v) return refusal('image', 'none', [`one image URL (${upstreamModel} animates an image)`]);
  const shape = minimaxShape(request.size);
  const tier = shape ? f.tiers[shape.tier] : undefined;
  if (!shape || !tier) return refusal('size', request.size, [sizeWords(f)]);
  if (!image && shape.portrait) {
    const landscape = sizes.filter((s) => minimaxShape(s)?.portrait === false);
    return refusal('size', request.size, [
      ...landscape,
      'a portrait size only with an image (MiniMax renders text-to-video in landscape 16:9; from an image, at its ratio)',
    ]);
  }
  if (!image && tier.i2vOnly)
    return refusal('size', request.size, [`${shape.tier} only with an image (${upstreamModel} renders it from one)`]);
  const seconds = Number(request.seconds);
  if (!tier.seconds.includes(seconds))
    return refusal(
      'seconds',
      request.seconds,
      tier.seconds.map((s) => `${s} (at ${shape.tier})`),
    );
  return {
    body: {
      model: upstreamModel,
      prompt: request.prompt,
      duration: seconds,
      resolution: shape.tier,
      ...(image ? { first_frame_image: image } : {}),
    },
  };
}

/**
 * Why a model's `seconds` / `sizes` cannot go to a minimax channel of `upstreamModel`: one message
 * per value, empty when all can (each size must render at one of the seconds, with an image at least).
 */
export function minimaxVideoRefusals(
  options: { seconds: readonly string[]; sizes: readonly string[] },
  upstreamModel: string,
): { field: 'seconds' | 'sizes' | 'upstreamModel'; message: string }[] {
  if (UNSENDABLE.test(upstreamModel))
    return [
      {
        field: 'upstreamModel',
        message: `minimax ${upstreamModel} needs subject_reference, which Kiln's video request cannot send`,
      },
    ];
  const f = familyOf(upstreamModel);
  const out: { field: 'seconds' | 'sizes'; message: string }[] = [];
  const all = new Set(Object.values(f.tiers).flatMap((t) => t.seconds));
  for (const s of options.seconds)
    if (!all.has(Number(s)))
      out.push({
        field: 'seconds',
        message: `seconds "${s}" cannot be sent to minimax ${upstreamModel}: it renders ${[...all].join(' or ')} s (set the model's seconds)`,
      });
  for (const s of options.sizes) {
    const shape = minimaxShape(s);
    const tier = shape ? f.tiers[shape.tier] : undefined;
    const why =
      !shape || !tier
        ? sizeWords(f)
        : shape.portrait && !f.i2v
          ? 'a text-to-video model renders landscape 16:9 only'
          : !options.seconds.some((x) => tier.seconds.includes(Number(x)))
            ? `${shape.tier} renders ${tier.seconds.join(' or ')} s, none of the model's seconds`
            : undefined;
    if (why)
      out.push({
        field: 'sizes',
        message: `size "${s}" cannot be sent to minimax ${upstreamModel}: ${why} (set the model's sizes)`,
      });
  }
  return out;
}
