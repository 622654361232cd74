// Chat request checks, in the contract's terms (part 7). Structure errors are invalid_request and
// name the field as `messages[i].content[j]…`; images have codes of their own.
import { imageSize } from 'image-size';
import { z } from 'zod';
import type { ChatModel } from '../config/models.js';
import { KilnError } from '../shared/errors.js';
import type { ChatMessage, ChatRequest, ImageInfo } from './providers/types.js';

export const CHAT_LIMITS = { messages: 1000, itemsPerMessage: 100 } as const;

const CONTENT_MUST_BE_ARRAY =
  'must be an array of content items, e.g. [{"type": "text", ' +
  '"text": "…"}]; a string or a single object is not accepted';
const ITEM_SHAPE =
  'must be {"type": "text", "text": "…"} or {"type": "image_url", ' +
  '"image_url": {"url": "data:image/<subtype>;base64,…"}}';

const Item = z.discriminatedUnion(
  'type',
  [
    z.strictObject({ type: z.literal('text'), text: z.string({ error: 'must be a string' }) }),
    z.strictObject({
      type: z.literal('image_url'),
      image_url: z.strictObject(
        {
          url: z.string({ error: 'must be a string' }).meta({
            description:
              'A data URI `data:image/<subtype>;base64,<data>`; the prefix is required, URLs are not fetched.',
          }),
          detail: z.enum(['auto', 'low', 'high']).optional(),
        },
        { error: 'must be an object {"url": "data:image/<subtype>;base64,…"}' },
      ),
    }),
  ],
  { error: ITEM_SHAPE },
);

const Message = z.strictObject(
  {
    role: z.enum(['system', 'user', 'assistant'], { error: 'must be "system", "user" or "assistant"' }),
    content: z
      .array(Item, { error: CONTENT_MUST_BE_ARRAY })
      .min(1, 'must hold at least one item')
      .max(CHAT_LIMITS.itemsPerMessage, `may hold at most ${CHAT_LIMITS.itemsPerMessage} items`),
  },
  { error: 'must be an object {"role": …, "content": [...]}' },
);

const ACCEPTED_FIELDS = [
  'model',
  'messages',
  'max_tokens',
  'max_completion_tokens',
  'temperature',
  'seed',
  'stream',
  'stream_options',
];

/** The request body schema for a model's limits (also the documented schema, with the defaults). */
export function chatBodySchema(model: Pick<ChatModel, 'id' | 'maxOutputTokens'>) {
  const maxTokens = z
    .number({ error: 'must be a whole number' })
    .int('must be a whole number')
    .min(1, 'must be at least 1')
    .max(model.maxOutputTokens, `must be at most ${model.maxOutputTokens} for model ${model.id}`)
    .nullish();
  return z.strictObject({
    // requestedModel() refuses an empty id before this schema runs; the bound is for the OpenAPI document.
    model: z.string().min(1),
    messages: z
      .array(Message, { error: 'must be an array of {"role", "content"} objects' })
      .min(1, 'must hold at least one message')
      .max(CHAT_LIMITS.messages, `may hold at most ${CHAT_LIMITS.messages} messages`),
    max_tokens: maxTokens,
    max_completion_tokens: maxTokens,
    temperature: z
      .number({ error: 'must be a number' })
      .min(0, 'must be between 0 and 2')
      .max(2, 'must be between 0 and 2')
      .nullish(),
    seed: z
      .number({ error: 'must be a whole number' })
      .int('must be a whole number')
      .min(Number.MIN_SAFE_INTEGER, 'is out of range')
      .max(Number.MAX_SAFE_INTEGER, 'is out of range')
      .nullish(),
    stream: z.boolean({ error: 'must be true or false' }).nullish(),
    stream_options: z.strictObject({ include_usage: z.boolean().optional() }).nullish(),
  });
}

/** `messages[1].content[0].image_url.url` from a zod path. */
function fieldPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>(
    (s, p) => (typeof p === 'number' ? `${s}[${p}]` : s ? `${s}.${String(p)}` : String(p)),
    '',
  );
}

/** The requested model id, checked before anything that depends on the model's limits. */
export function requestedModel(raw: unknown): string {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw))
    throw new KilnError('invalid_request', 'The request body must be a JSON object.');
  const model = (raw as { model?: unknown }).model;
  if (typeof model !== 'string' || model === '')
    throw new KilnError('invalid_request', 'model is required: a model id from GET /v1/models.');
  return model;
}

export function validateChat(raw: unknown, model: ChatModel): { request: ChatRequest; images: ImageInfo[] } {
  const parsed = chatBodySchema(model).safeParse(raw);
  if (!parsed.success) {
    const i = parsed.error.issues[0];
    const where = fieldPath(i.path);
    if (i.code === 'unrecognized_keys') {
      const keys = i.keys.join(', ');
      throw new KilnError(
        'invalid_request',
        `${where ? `${where}: ` : ''}unsupported ` +
          `field(s) ${keys}${where ? '' : `; accepted: ${ACCEPTED_FIELDS.join(', ')}`}.`,
      );
    }
    throw new KilnError('invalid_request', `${where || 'body'}: ${i.message}`);
  }
  const b = parsed.data;
  if (b.max_tokens != null && b.max_completion_tokens != null && b.max_tokens !== b.max_completion_tokens) {
    throw new KilnError('invalid_request', 'max_tokens and max_completion_tokens disagree; send one of them.');
  }
  const messages = b.messages as ChatMessage[];
  const images = checkImages(messages, model);
  const maxTokens = b.max_tokens ?? b.max_completion_tokens;
  const request: ChatRequest = {
    messages,
    ...(maxTokens != null ? { max_tokens: maxTokens } : {}),
    ...(b.temperature != null ? { temperature: b.temperature } : {}),
    ...(b.seed != null ? { seed: b.seed } : {}),
    stream: b.stream === true,
    ...(b.stream === true && b.stream_options ? { stream_options: b.stream_options } : {}),
  };
  return { request, images };
}

function checkImages(messages: ChatMessage[], model: ChatModel): ImageInfo[] {
  const found: { where: string; url: string }[] = [];
  messages.forEach((m, i) =>
    m.content.forEach((item, j) => {
      if (item.type !== 'image_url') return;
      const where = `messages[${i}].content[${j}]`;
      if (m.role !== 'user')
        throw new KilnError(
          'invalid_request',
          `${where}: images are accepted in user messages only, not in ${m.role} messages.`,
        );
      found.push({ where, url: item.image_url.url });
    }),
  );
  if (found.length > model.maxImages) {
    throw new KilnError(
      'too_many_images',
      `${found.length} images were sent; model ${model.id} accepts at most ${model.maxImages} per request.`,
    );
  }
  return found.map(({ where, url }) => inspectImage(where, url, model));
}

// RFC 2397 with the contract's constraints: a media type, `;base64`, then the data.
const DATA_URI = /^data:([^;,/]*)\/([^;,]*);base64,/i;
const TOKEN = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$/i;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function inspectImage(where: string, url: string, model: ChatModel): ImageInfo {
  const field = `${where}.image_url.url`;
  const form = 'data:image/<subtype>;base64,<data>';
  if (!/^data:/i.test(url)) {
    throw new KilnError(
      'invalid_image_url',
      `${field} must be a data URI of the form ${form}; ` +
        (/^https?:/i.test(url) ? 'http(s) URLs are not fetched.' : 'the "data:image/…;base64," prefix is missing.'),
    );
  }
  const m = DATA_URI.exec(url);
  if (!m)
    throw new KilnError(
      'invalid_image_url',
      `${field} must be a data URI of the form ${form}; its prefix is malformed.`,
    );
  const [prefix, type, subtype] = m;
  if (type.toLowerCase() !== 'image' || !TOKEN.test(subtype)) {
    throw new KilnError(
      'invalid_image_url',
      `${field} declares "${`${type}/${subtype}`.slice(0, 60)}", which is not an image type; use ${form}.`,
    );
  }
  const data = url.slice(prefix.length);
  const unpadded = data.replace(/=+$/, '');
  if (data === '' || !BASE64.test(data) || unpadded.length % 4 === 1 || (data !== unpadded && data.length % 4 !== 0)) {
    throw new KilnError(
      'invalid_image_url',
      `${field}: the data after "base64," is ${data === '' ? 'empty' : 'not valid base64'}.`,
    );
  }
  // Exact decoded size, known before decoding anything.
  const bytes = Math.floor((unpadded.length * 3) / 4);
  if (bytes > model.maxImageBytes) {
    throw new KilnError(
      'image_too_large',
      `${where}: the image has ${bytes} bytes once decoded; model ${model.id} accepts at most ${model.maxImageBytes}.`,
    );
  }
  let size: { width: number; height: number; type?: string };
  try {
    size = imageSize(Buffer.from(data, 'base64'));
  } catch {
    throw new KilnError(
      'invalid_image_url',
      `${field}: the decoded bytes are not an image Kiln can read ` +
        '(png, jpeg, gif, webp, bmp, tiff, heif/avif, svg …).',
    );
  }
  return {
    where,
    declared: subtype.toLowerCase(),
    format: size.type ?? subtype.toLowerCase(),
    width: size.width,
    height: size.height,
    bytes,
  };
}
