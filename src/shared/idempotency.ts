// `Idempotency-Key` on submits: the header's rules, the request fingerprint a replay is compared
// with, and the task id a key stands for. The id is the arbiter: it is the Temporal workflow id, so
// two submits with one key (concurrent or not) can start only one workflow.
import { createHash, createHmac, hkdfSync } from 'node:crypto';
import { KilnError } from './errors.js';

export const IDEMPOTENCY_HEADER = 'Idempotency-Key';
/** Response header of an answer that returns an earlier submit's task. */
export const REPLAYED_HEADER = 'Idempotent-Replayed';
export const IDEMPOTENCY_KEY_MAX = 255;

/** Visible ASCII, no space: 0x21–0x7E (a UUID, a ULID, base64url, `"quoted"` all fit). */
const KEY_CHARS = /^[\x21-\x7e]+$/;

/**
 * The key of an `Idempotency-Key` header value, undefined when the header is absent. 1–255
 * characters 0x21–0x7E; anything else (empty, longer, spaces, tabs, control or non-ASCII
 * characters, the header sent twice: Node joins repeats with ", ") is refused with 400.
 */
export function parseIdempotencyKey(value: string | string[] | undefined): string | undefined {
  if (value === undefined) return undefined;
  const bad = (why: string) =>
    new KilnError(
      'invalid_request',
      `The ${IDEMPOTENCY_HEADER} header ${why}; send one key of 1 ` +
        `to ${IDEMPOTENCY_KEY_MAX} visible ASCII characters (0x21-0x7E, no spaces), e.g. a UUID.`,
    );
  if (Array.isArray(value) || value.includes(', ')) throw bad('was sent more than once');
  if (value.length === 0) throw bad('is empty');
  if (value.length > IDEMPOTENCY_KEY_MAX) throw bad(`is ${value.length} characters long`);
  if (!KEY_CHARS.test(value)) throw bad('contains a character outside 0x21-0x7E');
  return value;
}

/**
 * JSON with object keys sorted (recursively), so two encodings of one request (key order) give
 * one text. Arrays keep their order; `undefined` members are left out, as JSON.stringify does.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  const entries = Object.keys(value)
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
  return `{${entries.join(',')}}`;
}

/**
 * What makes two submits "the same request": the endpoint (task form, direct form with its output,
 * video create), the model, the validated request (defaults filled in, Kiln's own switches
 * removed) and the webhook asked for, as SHA-256 of their canonical JSON. Without a webhook the
 * JSON has no webhook field (undefined is left out), so a key an older release fingerprinted still matches.
 */
export function requestFingerprint(endpoint: string, model: string, request: unknown, webhook?: unknown): string {
  return createHash('sha256')
    .update(canonicalJson({ v: 1, endpoint, model, request, webhook }))
    .digest('hex');
}

/** The HMAC key for idempotent ids, derived from the owner key (itself derived from KILN_SECRET). */
export function idempotencySecret(ownerKey: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', ownerKey, Buffer.alloc(0), 'kiln idempotent task id v1', 32));
}

/**
 * The task id of an owner's key: `<prefix>_` and 32 hex digits of HMAC(secret, prefix, owner, key)
 * (the owner length-prefixed, so no two (owner, key) pairs share an input).
 * Unguessable without the secret, of the usual id format, and different per owner and per kind.
 */
export function idempotentTaskId(secret: Buffer, prefix: 'task' | 'video', owner: string, key: string): string {
  const mac = createHmac('sha256', secret).update(`${prefix}\n${owner.length}:${owner}\n${key}`).digest('hex');
  return `${prefix}_${mac.slice(0, 32)}`;
}

/** What a keyed submit leaves in its workflow's memo (and its fingerprint next to the Redis record). */
export interface IdempotencyMemo {
  fingerprint: string;
  created_at: number;
}
export const IDEMPOTENCY_MEMO = 'kilnIdempotency';
