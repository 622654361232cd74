// The OpenAI Images request fields, checked and mapped onto a Kiln image model's Gemini-form
// options. A field Kiln cannot honour is refused by name rather than dropped, so a client never
// pays for an image that ignores what it asked for.
import type { ImageModel, Model } from '../config/models.js';
import { KilnError, type ErrorCode } from '../shared/errors.js';
import { chars, LIMITS } from '../shared/limits.js';
import { BACKGROUNDS, OUTPUT_FORMATS, QUALITIES, sizeConfig } from '../shared/openai-images.js';

/** Images (tasks) one request may ask for. */
export const MAX_N = 4;

/** The aspect ratios Gemini image models take: a `size` must reduce to one of them. */
export const ASPECT_RATIOS = ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'] as const;

/** `quality` names the model's resolution tier (`imageSize`); `auto` leaves it to `size` or the model. */
export const QUALITY_TIERS: Record<string, string> = {
  low: '1K',
  standard: '1K',
  medium: '2K',
  hd: '2K',
  high: '4K',
};

export type ResponseFormat = 'url' | 'b64_json';

/**
 * A refusal of one request field: the OpenAI SDK reads `param` and `type` into its error classes
 * (BadRequestError.param), beside Kiln's own code and message.
 */
export class ParamError extends KilnError {
  constructor(
    code: ErrorCode,
    message: string,
    readonly param: string,
  ) {
    super(code, message);
  }
  override toBody() {
    return { error: { code: this.code, message: this.message, type: 'invalid_request_error', param: this.param } };
  }
}

const bad = (param: string, message: string) => new ParamError('invalid_request', message, param);

export interface ImagesAsk {
  model: string;
  prompt: string;
  n: number;
  responseFormat: ResponseFormat;
  size?: string;
  quality?: string;
  /** Sent on only to models whose channels all speak OpenAI's images API (provider openai-images). */
  background?: string;
  outputFormat?: string;
}

/** Fields taken and not passed on: advisory to OpenAI too (abuse monitoring, legacy styles, fidelity hints). */
const ADVISORY = new Set(['user', 'safety_identifier', 'style', 'moderation', 'input_fidelity']);
/** Fields Kiln's image models cannot honour, with what to do instead. */
const UNSUPPORTED: Record<string, string> = {
  output_compression: 'images come as the model returns them; omit output_compression',
  partial_images: 'streaming is not supported, so there are no partial images; omit partial_images',
  mask: "Kiln's image models take reference images, not masks; describe the edit in the prompt",
  markup: "Kiln's image models take reference images, not markup; describe the edit in the prompt",
};
const KNOWN = new Set([
  'model',
  'prompt',
  'n',
  'size',
  'quality',
  'response_format',
  'background',
  'output_format',
  'stream',
]);

/** A file sent under another name than `image`. */
export function unsupportedFile(name: string): ParamError {
  if (Object.hasOwn(UNSUPPORTED, name)) return bad(name, `${name} is not supported: ${UNSUPPORTED[name]}.`);
  if (KNOWN.has(name) || ADVISORY.has(name)) return bad(name, `${name} must be a text field, not a file.`);
  return bad(name, `Unknown parameter: ${name.slice(0, 60)}.`);
}

/**
 * The fields of a generations body (JSON) or an edits form (text fields, so numbers and booleans
 * arrive as strings). `null` is absent, as the SDK's own types allow.
 */
export function parseAsk(raw: Record<string, unknown>, form: boolean): ImagesAsk {
  for (const [name, value] of Object.entries(raw)) {
    if (value === null || value === undefined || KNOWN.has(name)) continue;
    if (Object.hasOwn(UNSUPPORTED, name)) throw bad(name, `${name} is not supported: ${UNSUPPORTED[name]}.`);
    if (!ADVISORY.has(name)) throw bad(name, `Unknown parameter: ${name.slice(0, 60)}.`);
    if (typeof value !== 'string') throw bad(name, `${name} must be a string.`);
  }
  const text = (name: string): string | undefined => {
    const v = raw[name];
    if (v === null || v === undefined) return undefined;
    if (typeof v !== 'string') throw bad(name, `${name} must be a string.`);
    return v;
  };
  const model = text('model');
  if (!model) throw bad('model', 'model is required: an image model id (GET /v1/models lists them).');
  const prompt = text('prompt');
  if (prompt === undefined || prompt.trim() === '') throw bad('prompt', 'prompt is required and must not be blank.');
  const length = chars(prompt);
  if (length > LIMITS.promptChars)
    throw new ParamError(
      'prompt_too_long',
      `The prompt has ${length} characters; at most ${LIMITS.promptChars} are allowed.`,
      'prompt',
    );
  const stream = raw.stream;
  if (stream !== undefined && stream !== null && stream !== false && !(form && stream === 'false'))
    throw bad('stream', 'stream must be false (or omitted): streaming image generation is not supported.');
  const format = text('response_format') ?? 'url';
  if (format !== 'url' && format !== 'b64_json')
    throw bad('response_format', `response_format must be url or b64_json; got "${format.slice(0, 40)}".`);
  return {
    model,
    prompt,
    n: count(raw.n, form),
    responseFormat: format,
    size: text('size'),
    quality: text('quality'),
    background: text('background'),
    outputFormat: text('output_format'),
  };
}

function count(v: unknown, form: boolean): number {
  if (v === undefined || v === null) return 1;
  const n = form && typeof v === 'string' && /^\d{1,3}$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_N)
    throw bad('n', `n must be a whole number from 1 to ${MAX_N}; got ${JSON.stringify(v).slice(0, 40)}.`);
  return n;
}

/** The longest side of a tier name as Kiln's models use them (`1K` → 1024, `2K` → 2048, `512` → 512). */
function tierSide(tier: string): number | null {
  const k = /^(\d+(?:\.\d+)?)K$/i.exec(tier);
  if (k) return Math.round(Number(k[1]) * 1024);
  return /^\d{1,5}$/.test(tier) ? Number(tier) : null;
}

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/**
 * `size` and `quality` as the model's `imageConfig`: `WIDTHxHEIGHT` gives the aspect ratio, and its
 * longer side the smallest of the model's tiers that covers it; a `quality` other than `auto`
 * names the tier itself. Anything the model cannot render is refused, naming what it takes.
 */
export function imageConfigOf(
  ask: Pick<ImagesAsk, 'size' | 'quality' | 'background' | 'outputFormat'>,
  model: ImageModel,
): ImageConfig {
  if (model.channels.every((c) => c.provider === 'openai-images')) return openaiImagesConfig(ask, model);
  const { background, outputFormat } = ask;
  if (background !== undefined && background !== 'auto')
    throw bad('background', `background must be auto (or omitted): model ${model.id} cannot honour "${background}".`);
  if (outputFormat !== undefined)
    throw bad(
      'output_format',
      `output_format is not supported by model ${model.id}: images come in the format it returns (usually PNG); omit output_format.`,
    );
  const tiers = model.imageSizes
    .map((t) => ({ tier: t, side: tierSide(t) }))
    .filter((t): t is { tier: string; side: number } => t.side !== null)
    .sort((a, b) => a.side - b.side);
  const out: { aspectRatio?: string; imageSize?: string } = {};
  const size = ask.size;
  if (size !== undefined && size !== 'auto') {
    const m = /^([1-9]\d{0,4})x([1-9]\d{0,4})$/.exec(size);
    const w = m ? Number(m[1]) : 0;
    const h = m ? Number(m[2]) : 0;
    const g = m ? gcd(w, h) : 1;
    const ratio = `${w / g}:${h / g}`;
    // A model whose tiers have no known sides takes the ratio alone.
    const tier = tiers.find((t) => t.side >= Math.max(w, h));
    if (!m || !(ASPECT_RATIOS as readonly string[]).includes(ratio) || (tiers.length > 0 && !tier)) {
      const largest = tiers.at(-1);
      throw bad(
        'size',
        `size must be auto or WIDTHxHEIGHT with an aspect ratio of ${ASPECT_RATIOS.join(', ')}` +
          (largest
            ? ` and a longer side of at most ${largest.side} for model ${model.id} ` +
              `(${tiers.map((t) => `${t.tier} up to ${t.side}`).join(', ')})`
            : '') +
          `, e.g. 1024x1024, 1536x1024 or 1024x1536; got "${size.slice(0, 40)}".`,
      );
    }
    out.aspectRatio = ratio;
    if (tier) out.imageSize = tier.tier;
  }
  const quality = ask.quality;
  if (quality !== undefined && quality !== 'auto') {
    const tier = Object.hasOwn(QUALITY_TIERS, quality) ? QUALITY_TIERS[quality] : undefined;
    if (!tier || !model.imageSizes.includes(tier)) {
      const allowed = Object.entries(QUALITY_TIERS).filter(([, t]) => model.imageSizes.includes(t));
      throw bad(
        'quality',
        `quality must be one of ${['auto', ...allowed.map(([q, t]) => `${q} (${t})`)].join(', ')} for model ${model.id}; ` +
          `got "${quality.slice(0, 40)}".`,
      );
    }
    out.imageSize = tier;
  }
  return out;
}

type ImageConfig = { aspectRatio?: string; imageSize?: string } & Record<string, string>;

/**
 * A model on OpenAI's images API takes the fields themselves: `size` is one its channel lists (the
 * table's entry becomes the aspect ratio it is keyed by), the others travel as imageConfig keys.
 */
function openaiImagesConfig(
  ask: Pick<ImagesAsk, 'size' | 'quality' | 'background' | 'outputFormat'>,
  model: ImageModel,
) {
  const out: ImageConfig = {};
  const { sizes } = model.channels[0]!;
  if (ask.size !== undefined && ask.size !== 'auto') {
    const key = Object.keys(sizes).find((k) => sizes[k] === ask.size);
    if (key === undefined)
      throw bad(
        'size',
        `size must be one of auto, ${[...new Set(Object.values(sizes))].join(', ')} for model ${model.id}; got "${ask.size.slice(0, 40)}".`,
      );
    Object.assign(out, sizeConfig(key));
  }
  const passed: [string, string | undefined, readonly string[], string][] = [
    ['quality', ask.quality, QUALITIES, 'quality'],
    ['background', ask.background, BACKGROUNDS, 'background'],
    ['output_format', ask.outputFormat, OUTPUT_FORMATS, 'outputFormat'],
  ];
  for (const [param, value, allowed, key] of passed) {
    if (value === undefined || value === 'auto') continue;
    if (!allowed.includes(value))
      throw bad(
        param,
        `${param} must be one of ${allowed.join(', ')} for model ${model.id}; got "${value.slice(0, 40)}".`,
      );
    out[key] = value;
  }
  return out;
}

/**
 * The image model of that id. Another kind's model is the caller's mistake about the endpoint
 * (400, naming the image models); an unknown id is 404 `model_not_found`, as everywhere in Kiln.
 */
export function imageModelOf(models: readonly Model[], id: string): ImageModel {
  const m = models.find((x) => x.id === id);
  if (!m)
    throw new ParamError('model_not_found', `Model "${id}" does not exist; GET /v1/models lists the models.`, 'model');
  if (m.kind !== 'image') {
    const images = models.filter((x) => x.kind === 'image').map((x) => x.id);
    throw bad(
      'model',
      `Model "${id}" is a ${m.kind} model; the images endpoints take image models: ${images.join(', ') || 'none is configured'}.`,
    );
  }
  return m;
}
