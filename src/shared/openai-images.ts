// How a Kiln image request reads as the fields of OpenAI's images API (the `openai-images`
// provider): `size` from the channel's table of aspect ratios, `quality`, `background`,
// `output_format` from imageConfig keys of their own, `n` from generationConfig.candidateCount.
// One function serves the submit-time check (src/image/provider-options.ts), the OpenAI Images
// surface and the provider itself, so what is accepted at submit is exactly what can be sent.
// Pure module.
import type { ImageRequest } from './image-task.js';
import { promptText } from './prompt.js';

/** `size` for gpt-image models (OpenAI's own): the only three it renders besides `auto`. */
export const GPT_IMAGE_SIZES: Readonly<Record<string, string>> = {
  '1:1': '1024x1024',
  '3:2': '1536x1024',
  '2:3': '1024x1536',
};

/** openai-node 7.57's ImageGenerateParams quality values. */
export const QUALITIES = ['auto', 'low', 'medium', 'high', 'xhigh', 'max', 'standard', 'hd'] as const;
export const BACKGROUNDS = ['auto', 'transparent', 'opaque'] as const;
/** png, jpeg, webp: gif (animated, with frame fields) and svg (a document, not a picture) are not taken. */
export const OUTPUT_FORMATS = ['png', 'jpeg', 'webp'] as const;

/** imageConfig keys the provider sends; anything else there has no field to go to. */
const IMAGE_CONFIG_KEYS = ['aspectRatio', 'imageSize', 'quality', 'background', 'outputFormat'];
/** generationConfig keys the provider reads (responseModalities only says images are wanted). */
const GENERATION_CONFIG_KEYS = ['responseModalities', 'candidateCount', 'imageConfig'];

/** What a channel of the provider says about the fields (src/config/models.ts). */
export interface FieldsChannel {
  /** Kiln's `aspectRatio`, or `aspectRatio@imageSize` (`@imageSize` alone: no ratio asked), → `size`. */
  sizes: Readonly<Record<string, string>>;
  /** The largest `n` the upstream takes. */
  maxImages: number;
}

export interface OpenAIImagesFields {
  prompt: string;
  n?: number;
  size?: string;
  quality?: string;
  background?: string;
  output_format?: string;
}

/** An option the channel cannot send: the field as the caller wrote it, and what it takes. */
export interface FieldRefusal {
  field: string;
  got: string;
  allowed: readonly string[];
}

/** The key of a request's aspect ratio and tier in a channel's `sizes`; null when neither is asked. */
export function sizeKey(aspectRatio?: string, imageSize?: string): string | null {
  if (imageSize !== undefined) return `${aspectRatio ?? ''}@${imageSize}`;
  return aspectRatio ?? null;
}

/** The imageConfig that `sizeKey` reads back as that key. */
export function sizeConfig(key: string): { aspectRatio?: string; imageSize?: string } {
  const at = key.indexOf('@');
  if (at < 0) return { aspectRatio: key };
  const ratio = key.slice(0, at);
  return { ...(ratio ? { aspectRatio: ratio } : {}), imageSize: key.slice(at + 1) };
}

const str = (v: unknown): string => (typeof v === 'string' ? v : (JSON.stringify(v) ?? String(v)));

/** The request as the images API's fields, or the first option the channel cannot express. */
export function openaiImagesFields(
  request: ImageRequest,
  channel: FieldsChannel,
): { fields: OpenAIImagesFields } | { refused: FieldRefusal } {
  const refuse = (field: string, got: unknown, allowed: readonly string[]) => ({
    refused: { field, got: str(got), allowed },
  });
  if (request.tools?.length) return refuse('tools', `${request.tools.length} tools`, ['none']);
  if (request.systemInstruction) return refuse('systemInstruction', 'a system instruction', ['none']);
  if (request.contents.length > 1)
    return refuse('contents', `${request.contents.length} turns`, ['one user turn (text and reference images)']);
  const gc = request.generationConfig ?? {};
  for (const k of Object.keys(gc))
    if (!GENERATION_CONFIG_KEYS.includes(k)) return refuse(`generationConfig.${k}`, gc[k], GENERATION_CONFIG_KEYS);
  const ic = gc.imageConfig ?? {};
  for (const k of Object.keys(ic))
    if (!IMAGE_CONFIG_KEYS.includes(k)) return refuse(`generationConfig.imageConfig.${k}`, ic[k], IMAGE_CONFIG_KEYS);

  const fields: OpenAIImagesFields = { prompt: promptText(request) };
  const n = gc.candidateCount;
  if (n !== undefined) {
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > channel.maxImages)
      return refuse('generationConfig.candidateCount', n, [`a whole number from 1 to ${channel.maxImages}`]);
    if (n > 1) fields.n = n;
  }
  const key = sizeKey(ic.aspectRatio, ic.imageSize);
  if (key !== null) {
    const size = Object.hasOwn(channel.sizes, key) ? channel.sizes[key] : undefined;
    if (size === undefined) {
      const field = ic.imageSize === undefined ? 'aspectRatio' : 'aspectRatio@imageSize';
      return refuse(`generationConfig.imageConfig.${field}`, key, Object.keys(channel.sizes));
    }
    fields.size = size;
  }
  const pick = (name: string, allowed: readonly string[], put: (v: string) => void) => {
    const v = ic[name];
    if (v === undefined) return null;
    if (typeof v !== 'string' || !allowed.includes(v))
      return refuse(`generationConfig.imageConfig.${name}`, v, allowed);
    put(v);
    return null;
  };
  const bad =
    pick('quality', QUALITIES, (v) => (fields.quality = v)) ??
    pick('background', BACKGROUNDS, (v) => (fields.background = v)) ??
    pick('outputFormat', OUTPUT_FORMATS, (v) => (fields.output_format = v));
  if (bad) return bad;
  // A transparent background needs an alpha channel, which JPEG has not: OpenAI refuses the pair.
  if (fields.background === 'transparent' && fields.output_format === 'jpeg')
    return refuse('generationConfig.imageConfig.outputFormat', 'jpeg', ['png', 'webp']);
  return { fields };
}
