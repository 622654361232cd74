// How Kiln's video request reads in Runway's generation calls (the `runway` provider): which call
// (`image_to_video` with an image, `text_to_video` without), `ratio` from `size` (1280x720 →
// "1280:720"), `duration` from `seconds`. The models file is refused at start-up when a model
// offers a value its Runway model cannot take (src/config/models.ts), and POST /v1/videos refuses
// what depends on the request (an image, the prompt's length: src/video/validate.ts), both from
// these same functions, so nothing the upstream cannot express is sent or silently dropped.
// Pure module: no I/O.
import type { VideoRequest } from './video-task.js';

/** What Runway's API reference (version 2024-11-06, @runwayml/sdk 4.x types) says one model takes. */
interface RunwayModelSpec {
  /** `ratio` values of `image_to_video`; undefined: the model takes no image. */
  i2v?: readonly string[];
  /** `ratio` values of `text_to_video`; undefined: the model needs an image (gen4_turbo). */
  t2v?: readonly string[];
  /** `duration` values, in seconds. */
  durations: readonly number[];
}

const GEN4_I2V = ['1280:720', '720:1280', '1104:832', '832:1104', '960:960', '1584:672'] as const;
const VEO_RATIOS = ['1280:720', '720:1280', '1080:1920', '1920:1080'] as const;
const TWO_TO_TEN = [2, 3, 4, 5, 6, 7, 8, 9, 10] as const;

/**
 * The models Kiln knows the limits of. Another `upstreamModel` is sent as asked (ratio W:H, duration
 * the seconds), and Runway's own 400 names the field it refuses.
 */
export const RUNWAY_MODELS: Readonly<Record<string, RunwayModelSpec>> = {
  gen4_turbo: { i2v: GEN4_I2V, durations: TWO_TO_TEN },
  'gen4.5': { i2v: GEN4_I2V, t2v: ['1280:720', '720:1280'], durations: TWO_TO_TEN },
  'veo3.1': { i2v: VEO_RATIOS, t2v: VEO_RATIOS, durations: [4, 6, 8] },
  'veo3.1_fast': { i2v: VEO_RATIOS, t2v: VEO_RATIOS, durations: [4, 6, 8] },
  veo3: { i2v: VEO_RATIOS, t2v: VEO_RATIOS, durations: [8] },
};

/** `promptText` is at most 1000 UTF-16 code units for every model Runway documents. */
export const RUNWAY_MAX_PROMPT = 1000;

/** A runway model's `seconds` when the models file names none: values its Runway model takes. */
export function runwayDefaultSeconds(upstreamModel: string | undefined): readonly string[] {
  const spec = upstreamModel ? RUNWAY_MODELS[upstreamModel] : undefined;
  if (spec && !spec.durations.includes(5)) return spec.durations.map(String).reverse();
  return ['5', '10'];
}

export interface RunwayRefusal {
  field: string;
  got: string;
  allowed: readonly string[];
}

export interface RunwayTask {
  /** Under {baseUrl}/v1/. */
  path: 'image_to_video' | 'text_to_video';
  body: { model: string; promptText: string; ratio: string; duration: number; promptImage?: string };
}

/** Kiln's `size` (`WxH`) as Runway's `ratio` (`W:H`: Runway names its output resolutions so). */
export function runwayRatio(size: string): string | undefined {
  const m = /^([1-9]\d{1,4})x([1-9]\d{1,4})$/.exec(size);
  return m ? `${m[1]}:${m[2]}` : undefined;
}

const refusal = (field: string, got: unknown, allowed: readonly string[]): { refusal: RunwayRefusal } => ({
  refusal: { field, got: String(got), allowed },
});

const sizesOf = (ratios: readonly string[]) => ratios.map((r) => r.replace(':', 'x'));

/** The create call of one task, or the first thing in it `upstreamModel` cannot take. */
export function runwayVideoTask(
  request: VideoRequest,
  upstreamModel: string,
): { task: RunwayTask } | { refusal: RunwayRefusal } {
  if (request.nodeInfoList?.length) return refusal('nodeInfoList', 'set', ['none']);
  const spec = RUNWAY_MODELS[upstreamModel];
  const image = request.image;
  if (image !== undefined && !/^(https:\/\/|data:image\/)/i.test(image))
    return refusal('image', image.slice(0, 60), ['an https URL (Runway fetches only https)']);
  if (spec && image !== undefined && !spec.i2v)
    return refusal('image', 'set', [`none (${upstreamModel} is a text-to-video model)`]);
  if (spec && image === undefined && !spec.t2v)
    return refusal('image', 'none', [`an https image URL (${upstreamModel} animates an image)`]);
  // String length counts UTF-16 code units, as Runway measures it.
  if (spec && request.prompt.length > RUNWAY_MAX_PROMPT)
    return refusal('prompt', `${request.prompt.length} UTF-16 units`, [`at most ${RUNWAY_MAX_PROMPT}`]);
  const ratio = runwayRatio(request.size);
  if (!ratio) return refusal('size', request.size, ['WIDTHxHEIGHT']);
  const ratios = spec ? (image !== undefined ? spec.i2v : spec.t2v) : undefined;
  if (ratios && !ratios.includes(ratio))
    return refusal('size', request.size, [
      ...sizesOf(ratios),
      `nothing else for ${upstreamModel} ${image !== undefined ? 'with' : 'without'} an image`,
    ]);
  const duration = Number(request.seconds);
  if (!Number.isInteger(duration) || (spec && !spec.durations.includes(duration)))
    return refusal('seconds', request.seconds, (spec?.durations ?? TWO_TO_TEN).map(String));
  return {
    task: {
      path: image !== undefined ? 'image_to_video' : 'text_to_video',
      body: {
        model: upstreamModel,
        promptText: request.prompt,
        ratio,
        duration,
        ...(image !== undefined ? { promptImage: image } : {}),
      },
    },
  };
}

/**
 * Why a video model's options cannot go to a runway channel of `upstreamModel`: one message per
 * value (a size neither call of the model takes, a duration it has not), empty when all can.
 */
export function runwayVideoRefusals(
  options: { seconds: readonly string[]; sizes: readonly string[]; form: string },
  upstreamModel: string,
): { field: 'form' | 'seconds' | 'sizes'; message: string }[] {
  const out: { field: 'form' | 'seconds' | 'sizes'; message: string }[] = [];
  if (options.form === 'workflow-node')
    out.push({ field: 'form', message: 'runway cannot take nodeInfoList (form workflow-node)' });
  const spec = RUNWAY_MODELS[upstreamModel];
  const ratios = new Set([...(spec?.i2v ?? []), ...(spec?.t2v ?? [])]);
  for (const s of options.sizes) {
    const ratio = runwayRatio(s);
    if (!ratio || (spec && !ratios.has(ratio)))
      out.push({
        field: 'sizes',
        message:
          `size "${s}" cannot be sent to runway ${upstreamModel}: its ratio takes ` +
          `${spec ? sizesOf([...ratios]).join(', ') : 'WIDTHxHEIGHT'} (set the model's sizes)`,
      });
  }
  const durations = spec?.durations ?? TWO_TO_TEN;
  for (const s of options.seconds)
    if (spec && !durations.includes(Number(s)))
      out.push({
        field: 'seconds',
        message: `seconds "${s}" cannot be sent to runway ${upstreamModel}: its duration takes ${durations.join(', ')} (set the model's seconds)`,
      });
  return out;
}
