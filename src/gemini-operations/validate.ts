// The Veo request of POST /v1beta/models/{model}:predictLongRunning, as the Gemini Developer API
// takes it (and as @google/genai's generateVideos wrote it while it spoke to that API), checked
// against the model's `seconds` and `sizes`. Everything refused here is refused before an image is
// stored or a workflow exists.
import { z } from 'zod';
import { videoOptions, type VideoModel } from '../config/models.js';
import { KilnError } from '../shared/errors.js';
import type { VideoRequest } from '../shared/video-task.js';
import { PROMPT_RULES, validateVideo } from '../video/validate.js';

/** Decompressed body limit: the reference image travels inline, base64, so Kiln's 2 MB is too small. */
export const PREDICT_BODY_BYTES = 10 * 1024 * 1024;

/** The image types a reference image may have (Veo's, and what the blob store names by extension). */
const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/webp'] as const;
type ImageType = (typeof IMAGE_TYPES)[number];

/** An aspectRatio selects a size whose width:height is within this share of it (16:9 selects 1792x1024). */
export const RATIO_TOLERANCE = 0.02;

const ImageInput = z
  .strictObject({
    bytesBase64Encoded: z
      .string({ message: 'bytesBase64Encoded is required (the image, base64)' })
      .min(1, 'bytesBase64Encoded must not be empty')
      .meta({ description: 'The image, base64 (standard or URL-safe alphabet)' }),
    mimeType: z.enum(IMAGE_TYPES).optional().meta({ description: 'Default: read from the bytes' }),
  })
  .meta({ description: 'First frame of the video; stored in the blob store, the upstream fetches it by URL' });

const Instance = z.strictObject({
  prompt: z
    .string({ message: 'prompt is required (a string)' })
    .meta({ ...PROMPT_RULES, description: 'At most 4000 characters, not blank' }),
  image: ImageInput.optional(),
});

const ONE = 'Kiln makes one video per operation: send 1 or leave it out';
const onlyOne = z.number({ message: 'must be the number 1' }).int(ONE).min(1, ONE).max(1, ONE).optional();

const Parameters = z.strictObject({
  aspectRatio: z.string().max(16).optional().meta({
    description: "`W:H`; selects the model's size of that ratio (within 2%). Default: the model's first size",
  }),
  durationSeconds: z
    .number({ message: 'must be a number of seconds' })
    .int('must be a whole number of seconds')
    .optional()
    .meta({ description: "One of the model's `seconds` (GET /v1/models); default: the first" }),
  resolution: z
    .string()
    .max(16)
    .optional()
    .meta({ description: "`<N>p` (`720p`; `4k` = `2160p`): the shorter side of the model's size" }),
  numberOfVideos: onlyOne,
  sampleCount: onlyOne.meta({ description: 'What the SDK sends for numberOfVideos; only 1' }),
  negativePrompt: z.string().max(4000).optional().meta({ description: 'Refused unless empty: no upstream takes one' }),
  personGeneration: z
    .enum(['allow_all', 'allow_adult', 'dont_allow'])
    .optional()
    .meta({ description: 'Only `allow_all`: Kiln cannot restrict what its upstreams render' }),
});

export const PredictBody = z.strictObject({
  instances: z
    .array(Instance, { message: 'instances must be a list of one {prompt, image?}' })
    // min+max rather than .length(): the OpenAPI generator carries these over as minItems/maxItems.
    .min(1, 'instances must hold exactly one {prompt, image?}')
    .max(1, 'instances must hold exactly one {prompt, image?}'),
  parameters: Parameters.optional(),
});
export type PredictBody = z.infer<typeof PredictBody>;

const invalid = (message: string) => new KilnError('invalid_request', message);

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

function parseRatio(s: string): number {
  const m = /^([1-9]\d{0,3}):([1-9]\d{0,3})$/.exec(s.trim());
  if (!m) throw invalid(`parameters.aspectRatio must look like 16:9 (W:H, whole numbers 1-9999); got "${s}".`);
  return Number(m[1]) / Number(m[2]);
}

const near = (a: number, b: number) => Math.abs(a / b - 1) <= RATIO_TOLERANCE;

interface Size {
  size: string;
  ratio: number;
  /** The ratio as Veo names it (16:9, 9:16) when it is within the tolerance, else reduced W:H. */
  label: string;
  /** The shorter side: `720p`. */
  resolution: string;
}

function sizeOf(size: string): Size {
  const [w, h] = size.split('x').map(Number) as [number, number];
  const ratio = w / h;
  const g = gcd(w, h);
  const label = near(ratio, 16 / 9) ? '16:9' : near(ratio, 9 / 16) ? '9:16' : `${w / g}:${h / g}`;
  return { size, ratio, label, resolution: `${Math.min(w, h)}p` };
}

/** `720p`, `1080P`, `4k` → `720p`, `1080p`, `2160p`; null when it is neither form. */
function normalResolution(s: string): string | null {
  const t = s.trim().toLowerCase();
  if (t === '4k') return '2160p';
  return /^[1-9]\d{1,4}p$/.test(t) ? t : null;
}

const describe = (sizes: Size[]) => sizes.map((s) => `${s.size} (${s.label}, ${s.resolution})`).join(', ');

/** The model's size for aspectRatio and resolution: the first that fits both; its first size when neither is given. */
export function pickSize(model: VideoModel, aspectRatio?: string, resolution?: string): string {
  const sizes = videoOptions(model).sizes.map(sizeOf);
  let fit = sizes;
  if (aspectRatio !== undefined) {
    const ratio = parseRatio(aspectRatio);
    fit = fit.filter((s) => near(s.ratio, ratio));
    if (fit.length === 0) {
      const offered = [...new Set(sizes.map((s) => s.label))].join(', ');
      throw invalid(
        `parameters.aspectRatio "${aspectRatio}" is not offered by ${model.id}; allowed: ${offered} ` +
          `(its sizes: ${describe(sizes)}).`,
      );
    }
  }
  if (resolution !== undefined) {
    const wanted = normalResolution(resolution);
    if (!wanted) throw invalid(`parameters.resolution must look like 720p, 1080p or 4k; got "${resolution}".`);
    const both = fit.filter((s) => s.resolution === wanted);
    if (both.length === 0) {
      const offered = [...new Set(fit.map((s) => s.resolution))].join(', ');
      const scope = aspectRatio === undefined ? '' : ` at aspectRatio ${aspectRatio}`;
      throw invalid(
        `parameters.resolution "${resolution}" is not offered by ${model.id}${scope}; allowed: ${offered} ` +
          `(its sizes: ${describe(sizes)}).`,
      );
    }
    fit = both;
  }
  return fit[0]!.size;
}

/** The model's `seconds` entry for durationSeconds; its first when absent. */
export function pickSeconds(model: VideoModel, durationSeconds?: number): string {
  const allowed = videoOptions(model).seconds;
  if (durationSeconds === undefined) return allowed[0]!;
  const s = String(durationSeconds);
  if (!allowed.includes(s)) {
    throw invalid(
      `parameters.durationSeconds ${durationSeconds} is not offered by ${model.id}; allowed: ${allowed.join(', ')}.`,
    );
  }
  return s;
}

/** What the image's first bytes say it is, of the accepted types. */
function sniff(data: Buffer): ImageType | undefined {
  if (data.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return 'image/png';
  if (data[0] === 0xff && data[1] === 0xd8 && data[2] === 0xff) return 'image/jpeg';
  if (data.toString('latin1', 0, 4) === 'RIFF' && data.toString('latin1', 8, 12) === 'WEBP') return 'image/webp';
  return undefined;
}

/** The reference image's bytes and type: base64 that decodes exactly, to an image of the type it claims. */
export function decodeImage(image: NonNullable<PredictBody['instances'][0]['image']>): {
  data: Buffer;
  mimeType: ImageType;
} {
  const b64 = image.bytesBase64Encoded;
  const where = 'instances[0].image.bytesBase64Encoded';
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(b64)) throw invalid(`${where} is not base64.`);
  const data = Buffer.from(b64, /[-_]/.test(b64) ? 'base64url' : 'base64');
  const found = sniff(data);
  if (!found) throw invalid(`${where} is not a PNG, JPEG or WebP image.`);
  if (image.mimeType !== undefined && image.mimeType !== found) {
    throw invalid(`instances[0].image.mimeType says ${image.mimeType}, but the bytes are ${found}.`);
  }
  return { data, mimeType: found };
}

/**
 * The video request (without its image) for a checked body: parameters Kiln cannot honour are
 * refused with the reason, never dropped, so a caller never believes a setting took effect.
 */
export function toVideoRequest(body: PredictBody, model: VideoModel): VideoRequest {
  const p = body.parameters ?? {};
  if (p.negativePrompt !== undefined && p.negativePrompt.trim() !== '') {
    throw invalid(`parameters.negativePrompt is not supported: the upstreams of ${model.id} take no negative prompt.`);
  }
  if (p.personGeneration !== undefined && p.personGeneration !== 'allow_all') {
    throw invalid(
      `parameters.personGeneration "${p.personGeneration}" is not supported: Kiln cannot restrict what ` +
        `its upstreams render; send allow_all or leave it out.`,
    );
  }
  const seconds = pickSeconds(model, p.durationSeconds);
  const size = pickSize(model, p.aspectRatio, p.resolution);
  // The prompt's own rules (not blank, at most 4000 characters) are the video surface's.
  return validateVideo({ model: model.id, prompt: body.instances[0]!.prompt, seconds, size }, model);
}
