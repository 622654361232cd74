// How an upstream's answer reads in Kiln's terms: error codes for its HTTP status (image, video and
// chat), its message, and whether a transport failure left the request on this machine.
import type { TaskFailureCode } from '../shared/errors.js';

const MAX_MESSAGE = 300;

export function statusToCode(status: number): TaskFailureCode {
  if (status === 401 || status === 403) return 'auth_failed';
  if (status === 402) return 'insufficient_balance';
  if (status === 429) return 'upstream_rate_limited';
  if (status === 408 || status === 504) return 'upstream_timeout';
  if (status >= 400 && status < 500) return 'invalid_request';
  return 'upstream_error';
}

/**
 * Answers that refuse a request before processing it: rate limited (429), unavailable (503), the
 * channel's own credential (401/403) or balance (402). Another channel may take the request.
 */
export function isRefusalStatus(status: number): boolean {
  return status === 429 || status === 503 || status === 401 || status === 403 || status === 402;
}

/** The upstream's own error message, trimmed, with the caller's key masked should it be echoed. */
export function upstreamMessage(text: string, key?: string): string {
  let msg = text;
  try {
    const j = JSON.parse(text) as { error?: { message?: string } | string };
    msg = typeof j.error === 'string' ? j.error : (j.error?.message ?? text);
  } catch {
    /* not JSON: keep the text */
  }
  if (typeof msg !== 'string') msg = text;
  if (key) msg = msg.split(key).join('[redacted]');
  msg = msg.replace(/\s+/g, ' ').trim();
  return msg.length > MAX_MESSAGE ? `${msg.slice(0, MAX_MESSAGE)}…` : msg || '(no message)';
}

/** Errors that happen before a single byte of the request can have left this machine. */
export const NOT_DISPATCHED_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * A failed TLS handshake (the certificate, the protocol version): fetch writes the request only
 * after the handshake, so it cannot have left.
 */
const HANDSHAKE_FAILURE = /CERT|SIGNATURE|HANDSHAKE|WRONG_VERSION_NUMBER|PROTOCOL_VERSION|UNSUPPORTED_PROTOCOL/;

/** Whether a transport failure's system error code means the request never left this machine. */
export function notDispatched(code: string | undefined): boolean {
  return !!code && (NOT_DISPATCHED_CODES.has(code) || HANDSHAKE_FAILURE.test(code));
}

/** The system error code (ECONNREFUSED …) under a fetch failure, if any. */
export function causeCode(err: unknown): string | undefined {
  return (err as { cause?: { code?: string } } | null)?.cause?.code;
}
