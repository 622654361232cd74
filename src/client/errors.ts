// Typed errors of the Kiln client. The codes and their HTTP statuses come from the server's one
// catalogue (src/shared/errors.ts, a pure module), so client and server cannot drift apart.
import { ERROR_STATUS, type ErrorCode } from '../shared/errors.js';
import { parseRetryAfter } from '../upstreams/retry-after.js';

export { ERROR_STATUS, type ErrorCode, parseRetryAfter };

/** Base of every error this client throws. */
export class KilnClientError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The server answered with an HTTP error status and (usually) `{error: {code, message}}`. */
export class KilnAPIError extends KilnClientError {
  /** Seconds from the `Retry-After` header, when the server sent one. */
  readonly retryAfter: number | undefined;
  constructor(
    readonly status: number,
    /** The error code from the body (`rate_limited`, `not_found`, …), or `http_<status>` when the body had none. */
    readonly code: string,
    message: string,
    readonly headers: Headers,
    readonly body: unknown,
  ) {
    super(`${status} ${code}: ${message}`);
    this.retryAfter = parseRetryAfter(headers.get('retry-after'));
  }
}

export class BadRequestError extends KilnAPIError {}
export class AuthenticationError extends KilnAPIError {}
export class NotFoundError extends KilnAPIError {}
export class MethodNotAllowedError extends KilnAPIError {}
/** 409 `task_not_ready`: content asked for before the task finished. */
export class TaskNotReadyError extends KilnAPIError {}
/** 409 `task_failed`: content asked for a task that ended failed or uncertain. */
export class TaskFailedError extends KilnAPIError {}
export class ConflictError extends KilnAPIError {}
/** 422 `idempotency_key_reused`: the Idempotency-Key was used before for a different request. */
export class IdempotencyKeyReusedError extends KilnAPIError {}
/** 409 `canceled`: the task was canceled (a direct-form request that waited for it). */
export class CanceledError extends KilnAPIError {}
export class RequestTooLargeError extends KilnAPIError {}
export class UnsupportedMediaTypeError extends KilnAPIError {}
/** 429 `rate_limited`: polled too fast. `retryAfter` says how long to wait. */
export class RateLimitedError extends KilnAPIError {}
/** 503 `queue_full`: retry the submission after `retryAfter`. */
export class QueueFullError extends KilnAPIError {}
export class ServiceUnavailableError extends KilnAPIError {}
export class InternalServerError extends KilnAPIError {}
/** The upstream generator's own answer (chat): upstream_timeout, upstream_error, auth_failed, insufficient_balance. */
export class UpstreamError extends KilnAPIError {}

/** No HTTP status at all: DNS, refused or reset connection, TLS failure, request timeout. Retryable. */
export class APIConnectionError extends KilnClientError {}
export class APIConnectionTimeoutError extends APIConnectionError {}

/** Waiting gave up after the total timeout. The task goes on server-side: refresh it later by id. */
export class PollTimeoutError extends KilnClientError {
  constructor(
    /** The (first) task still unfinished; `kiln tasks wait <taskId>` resumes. */
    readonly taskId: string,
    readonly elapsedMs: number,
    /** Every id still unfinished (batch waits). */
    readonly taskIds: string[] = [taskId],
    /** Last status seen per unfinished id, when one was seen. */
    readonly lastStatus: Record<string, string> = {},
  ) {
    const more = taskIds.length > 1 ? ` (and ${taskIds.length - 1} more)` : '';
    super(
      `Gave up waiting for task ${taskId}${more} after ${Math.round(elapsedMs / 1000)} s; it may ` +
        `still finish: refresh it later with GET /v1/tasks/${taskId} or \`kiln tasks wait ${taskId}\`.`,
    );
  }
}

const BY_CODE: Partial<Record<string, typeof KilnAPIError>> = {
  task_not_ready: TaskNotReadyError,
  task_failed: TaskFailedError,
  idempotency_key_reused: IdempotencyKeyReusedError,
  canceled: CanceledError,
  rate_limited: RateLimitedError,
  queue_full: QueueFullError,
  service_unavailable: ServiceUnavailableError,
  upstream_rate_limited: RateLimitedError,
  upstream_timeout: UpstreamError,
  upstream_error: UpstreamError,
  auth_failed: UpstreamError,
  insufficient_balance: UpstreamError,
};

const BY_STATUS: Partial<Record<number, typeof KilnAPIError>> = {
  400: BadRequestError,
  401: AuthenticationError,
  404: NotFoundError,
  405: MethodNotAllowedError,
  409: ConflictError,
  413: RequestTooLargeError,
  415: UnsupportedMediaTypeError,
  429: RateLimitedError,
  503: ServiceUnavailableError,
};

/** Builds the typed error for an HTTP error response; the body's code decides first, then the status. */
export function errorFromResponse(status: number, headers: Headers, body: unknown): KilnAPIError {
  const err = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  const code = typeof err?.code === 'string' ? err.code : `http_${status}`;
  const message =
    typeof err?.message === 'string'
      ? err.message
      : typeof body === 'string' && body
        ? body.slice(0, 200)
        : 'no error body';
  const Cls = BY_CODE[code] ?? BY_STATUS[status] ?? (status >= 500 ? InternalServerError : KilnAPIError);
  return new Cls(status, code, message, headers, body);
}

/**
 * Errors worth trying again after a pause: no HTTP status, 429, 503, and a 502/504 from a proxy in
 * front of Kiln. Kiln's own upstream outcomes (upstream_timeout, upstream_error: the generator
 * already had its chance) are not retried.
 */
export function isRetryable(err: unknown): boolean {
  if (err instanceof APIConnectionError) return true;
  if (!(err instanceof KilnAPIError)) return false;
  if (err.status === 429 || err.status === 503) return true;
  return (err.status === 502 || err.status === 504) && !err.code.startsWith('upstream_');
}

/** True for codes in Kiln's catalogue (others come from proxies or newer servers). */
export function isKnownCode(code: string): code is ErrorCode {
  return code in ERROR_STATUS;
}
