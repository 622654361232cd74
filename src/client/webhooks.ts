// Webhooks: the caller's signing secret, and verification of a delivery (Standard Webhooks) with
// WebCrypto only, so it runs in browsers, workers and Node 20 alike without a dependency.
import type { KilnCore } from './core.js';
import { KilnClientError } from './errors.js';

export interface WebhookSecret {
  object: 'webhook.secret';
  /** `whsec_` and base64 of the signing key. */
  secret: string;
  /** Bumped by every rotation. */
  generation: number;
}

export class Webhooks {
  constructor(private readonly core: KilnCore) {}

  /** `GET /v1/webhooks/secret`: the secret deliveries are signed with. */
  async secret(opts: { signal?: AbortSignal } = {}): Promise<WebhookSecret> {
    return (await this.core.request<WebhookSecret>('GET', '/v1/webhooks/secret', { signal: opts.signal })).data;
  }

  /**
   * `POST /v1/webhooks/secret/rotate`: a new secret signs every delivery from now on (retries of
   * earlier ones too). A retry after a lost answer rotates once more; the answer is still the secret
   * in force, which is all a caller needs.
   */
  async rotateSecret(opts: { signal?: AbortSignal } = {}): Promise<WebhookSecret> {
    return (await this.core.request<WebhookSecret>('POST', '/v1/webhooks/secret/rotate', { signal: opts.signal })).data;
  }
}

/** A delivery that is not signed with the secret, is malformed, or is too old or too new. */
export class WebhookVerificationError extends KilnClientError {}

export interface VerifyWebhookOptions {
  /** Accepted clock difference, seconds (replay protection). Default 300, as Standard Webhooks. */
  toleranceSeconds?: number;
  /** Current time, epoch ms (tests). */
  now?: number;
}

type HeaderSource = Headers | Record<string, string | string[] | undefined>;

function header(headers: HeaderSource, name: string): string {
  const v = headers instanceof Headers ? headers.get(name) : (headers[name] ?? headers[name.toLowerCase()]);
  const s = Array.isArray(v) ? v.join(' ') : v;
  if (!s) throw new WebhookVerificationError(`Missing ${name} header.`);
  return s;
}

function fromBase64(s: string): Uint8Array {
  const bin = atob(s);
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

function toBase64(bytes: Uint8Array): string {
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin);
}

/** Equal strings, compared in time independent of where they differ. */
function sameText(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/**
 * Verifies a delivery's `webhook-signature` (`v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`,
 * several space-separated during a rotation) and its timestamp, and returns the parsed body (the
 * task object). `payload` must be the raw body text, exactly as received. Throws
 * WebhookVerificationError otherwise. Deduplicate deliveries by `webhook-id`: retries repeat it.
 */
export async function verifyWebhook<T = unknown>(
  payload: string,
  headers: HeaderSource,
  secret: string,
  opts: VerifyWebhookOptions = {},
): Promise<T> {
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  const ts = Number(timestamp);
  if (!/^\d+$/.test(timestamp)) throw new WebhookVerificationError('Invalid webhook-timestamp header.');
  const skew = Math.abs((opts.now ?? Date.now()) / 1000 - ts);
  if (skew > (opts.toleranceSeconds ?? 300))
    throw new WebhookVerificationError(`webhook-timestamp is ${Math.round(skew)} s off the current time.`);
  let keyBytes: Uint8Array;
  try {
    keyBytes = fromBase64(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret);
  } catch {
    throw new WebhookVerificationError('The secret is not base64 (expected whsec_...).');
  }
  const subtle = globalThis.crypto?.subtle;
  if (!subtle) throw new WebhookVerificationError('WebCrypto (crypto.subtle) is not available here.');
  const key = await subtle.importKey('raw', keyBytes as BufferSource, { name: 'HMAC', hash: 'SHA-256' }, false, [
    'sign',
  ]);
  const signed = new TextEncoder().encode(`${id}.${timestamp}.${payload}`);
  const expected = toBase64(new Uint8Array(await subtle.sign('HMAC', key, signed)));
  const match = signatures.split(' ').some((s) => s.startsWith('v1,') && sameText(s.slice(3), expected));
  if (!match) throw new WebhookVerificationError('No matching signature: wrong secret, or the body was altered.');
  try {
    return JSON.parse(payload) as T;
  } catch {
    throw new WebhookVerificationError('The body is not JSON.');
  }
}
