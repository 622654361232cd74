// How an images API answer reads in Kiln's terms: the error body (OpenAI's `{error: {message, type,
// param, code}}`, which Ark's Seedream shares with its own codes) as a Kiln failure, and the images
// (`b64_json` or `url`) copied into Kiln's blob store at once, since upstream URLs expire.
import type { APIError } from 'openai';
import type { BlobStore } from '../../../src/blobs/local.js';
import type { OpenAIImagesFields } from '../../../src/shared/openai-images.js';
import type { Fetched } from '../../../src/infra/safe-fetch.js';
import { sniffImage } from '../../../src/openai-images/multipart.js';
import type { Candidate } from '../../../src/shared/image-task.js';
import { upstreamMessage } from '../../../src/upstreams/answers.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import { parseRetryAfter } from '../../../src/upstreams/retry-after.js';

interface ErrorBody {
  message?: unknown;
  type?: unknown;
  param?: unknown;
  code?: unknown;
}

/**
 * Out of money or quota, not out of breath: waiting will not help. OpenAI answers 429
 * `insufficient_quota`; Ark 429 `QuotaExceeded` / `SetLimitExceeded` and 403 `AccountOverdueError`.
 */
const BALANCE = new Set([
  'insufficient_quota',
  'billing_hard_limit_reached',
  'QuotaExceeded',
  'SetLimitExceeded',
  'AccountOverdueError',
]);
/** OpenAI's `moderation_blocked` / `content_policy_violation`; Ark's `…SensitiveContentDetected…` and `…RiskDetection`. */
const CONTENT_POLICY = /^(moderation_blocked|content_policy_violation|content_filter)$|SensitiveContent|RiskDetection/;
/** "The engine is currently overloaded" (OpenAI `engine_overloaded`, Ark `ServerOverloaded`): nothing was done. */
const OVERLOADED = /overload/i;

const text = (v: unknown): string => (typeof v === 'string' ? v : '');

function parts(err: APIError) {
  const body: ErrorBody = err.error && typeof err.error === 'object' ? (err.error as ErrorBody) : {};
  return { code: text(body.code), type: text(body.type), param: text(body.param) };
}

/** A 429 that asks to slow down (resending later is safe), as opposed to one about money. */
export function isRateLimit(err: APIError): boolean {
  const { code, type } = parts(err);
  return err.status === 429 && !BALANCE.has(code) && !BALANCE.has(type);
}

/**
 * The Kiln failure of an error answer. `refused` marks answers given before any work (429, 503,
 * overloaded, the channel's key or balance): another channel may take the task. `retries`: the
 * 429s already resent on this channel, for the message.
 */
export function failureOf(err: APIError, key: string | undefined, idempotent: boolean, retries = 0): UpstreamFailure {
  const status = err.status ?? 0;
  const { code, type, param } = parts(err);
  const own = upstreamMessage(JSON.stringify({ error: err.error ?? err.message }), key);
  const said = `upstream answered ${status}${code ? ` ${code}` : ''}`;
  const after = parseRetryAfter(err.headers?.get('retry-after'));
  const info = (refused: boolean) => ({
    status,
    refused,
    ...(refused && after !== undefined ? { retryAfterMs: after * 1000 } : {}),
  });
  if (BALANCE.has(code) || BALANCE.has(type))
    return new UpstreamFailure('insufficient_balance', `${said}: ${own}`, false, info(true));
  if (status === 429) {
    const why = retries ? ` (after ${retries} ${retries === 1 ? 'retry' : 'retries'})` : '';
    return new UpstreamFailure('upstream_rate_limited', `${said}${why}: ${own}`, false, info(true));
  }
  if (status === 401 || status === 403) return new UpstreamFailure('auth_failed', `${said}: ${own}`, false, info(true));
  if (CONTENT_POLICY.test(code))
    return new UpstreamFailure(
      'invalid_request',
      `the upstream's content policy refused the request (${code}): ${own}`,
      false,
      info(false),
    );
  if (status === 408 || status === 504)
    return new UpstreamFailure('upstream_timeout', `${said}: ${own}`, false, info(false));
  if (status >= 400 && status < 500)
    return new UpstreamFailure(
      'invalid_request',
      `${said}${param ? `, naming the field ${param}` : ''}: ${own}`,
      false,
      info(false),
    );
  const overloaded = status === 503 || OVERLOADED.test(code) || OVERLOADED.test(type);
  // A 5xx reached the upstream; only an idempotent one may safely receive the request again.
  return new UpstreamFailure('upstream_error', `${said}: ${own}`, idempotent, info(overloaded));
}

export interface ImagesAnswer {
  data?: { b64_json?: unknown; url?: unknown; revised_prompt?: unknown; error?: ErrorBody }[];
  output_format?: unknown;
}

interface Storing {
  blobs: BlobStore;
  /** The SSRF-guarded download of an image the upstream answered as a URL. */
  download: (url: string) => Promise<Fetched>;
  key: string | undefined;
}

const TYPES: Record<string, string> = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp' };

/** Each image of the answer in Kiln's blob store, as one candidate each (n images, n candidates). */
export async function storeImages(answer: ImagesAnswer, fields: OpenAIImagesFields, s: Storing): Promise<Candidate[]> {
  const data = Array.isArray(answer?.data) ? answer.data : [];
  const declared = TYPES[text(answer?.output_format) || (fields.output_format ?? '')];
  const candidates: Candidate[] = [];
  let refusal: ErrorBody | undefined;
  for (const item of data) {
    if (!item || typeof item !== 'object') continue;
    // Seedream answers a picture it would not make with an error in its place, beside the others.
    if (item.error) refusal ??= item.error;
    const image = await storeOne(item, declared, s);
    if (!image) continue;
    const prompt = text(item.revised_prompt);
    candidates.push({
      content: { role: 'model', parts: [...(prompt ? [{ text: prompt }] : []), { inlineData: image }] },
      finishReason: 'STOP',
      index: candidates.length,
    });
  }
  if (candidates.length) return candidates;
  const code = text(refusal?.code);
  if (refusal && CONTENT_POLICY.test(code))
    throw new UpstreamFailure(
      'invalid_request',
      `the upstream's content policy refused the image (${code}): ${upstreamMessage(JSON.stringify({ error: refusal }), s.key)}`,
    );
  throw new UpstreamFailure('upstream_error', 'upstream answered without an image');
}

async function storeOne(
  item: NonNullable<ImagesAnswer['data']>[number],
  declared: string | undefined,
  s: Storing,
): Promise<{ mimeType: string; data: string } | null> {
  if (typeof item.b64_json === 'string' && item.b64_json !== '') {
    const bytes = Buffer.from(item.b64_json, 'base64');
    if (bytes.length === 0) return null;
    const mimeType = sniffImage(bytes) ?? declared ?? 'image/png';
    return { mimeType, data: await s.blobs.put(bytes, mimeType) };
  }
  if (typeof item.url !== 'string' || !/^https?:\/\//i.test(item.url)) return null;
  let got: Fetched;
  try {
    got = await s.download(item.url);
  } catch (err) {
    // The image was made (and billed): this is no refusal, and the request is not resent.
    throw new UpstreamFailure(
      'upstream_error',
      `the image the upstream made could not be downloaded from its URL (${(err as Error).message})`,
    );
  }
  const mimeType = sniffImage(got.data) ?? got.mediaType;
  return { mimeType, data: await s.blobs.put(got.data, mimeType) };
}
