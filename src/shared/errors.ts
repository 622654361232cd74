// The one catalogue of error codes, shared by the API, the workflows and (later) the client.
// Pure module: safe to value-import from workflow code.

export const ERROR_STATUS = {
  missing_api_key: 401,
  invalid_api_key: 401,
  output_must_be_url: 400,
  invalid_reference_image_url: 400,
  invalid_reference_image_scheme: 400,
  too_many_reference_images: 400,
  prompt_too_long: 400,
  invalid_request: 400,
  request_too_large: 413,
  unsupported_content_encoding: 415,
  unsupported_media_type: 415,
  queue_full: 503,
  rate_limited: 429,
  // Limits of an owner or key (src/usage/): refused before any workflow starts.
  quota_exceeded: 429,
  concurrency_limit_exceeded: 429,
  // An operator's release of a task's units (POST /admin/v1/tasks/{id}/release) that holds none.
  not_held: 409,
  task_not_ready: 409,
  task_failed: 409,
  idempotency_key_reused: 422,
  invalid_webhook_url: 400,
  not_found: 404,
  model_not_found: 404,
  // Keys mode: the caller's key is restricted to other models (its allow-list).
  model_not_allowed: 403,
  method_not_allowed: 405,
  service_unavailable: 503,
  internal_error: 500,
  // Chat request checks.
  invalid_image_url: 400,
  too_many_images: 400,
  image_too_large: 413,
  // Upstream outcomes: they end a task (error.code of a failed task) and are the HTTP answer of a
  // synchronous call (chat), where the status tells an OpenAI-style client what happened.
  upstream_timeout: 504,
  auth_failed: 401,
  insufficient_balance: 402,
  upstream_rate_limited: 429,
  upstream_error: 502,
  // A task stopped by its owner (POST …/cancel): only ever a failed task's error.code.
  canceled: 409,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** Codes a task can end with (`error.code` of a failed task). */
export const TASK_FAILURE_CODES = [
  'invalid_request',
  'upstream_timeout',
  'auth_failed',
  'insufficient_balance',
  'upstream_rate_limited',
  'upstream_error',
  'canceled',
] as const satisfies readonly ErrorCode[];
export type TaskFailureCode = (typeof TASK_FAILURE_CODES)[number];

/** ApplicationFailure type used when an attempt may have reached a non-idempotent upstream. */
export const UNCERTAIN_FAILURE_TYPE = 'uncertain';

/**
 * ApplicationFailure type of an inline model's call that found all of its model's slots on this
 * worker taken: nothing was written or sent, and the workflow queues the call as an activity.
 */
export const INLINE_BUSY_FAILURE_TYPE = 'inline_busy';

/**
 * ApplicationFailure type of an upstream call for a task the read model shows ended (an operator
 * reset a finished task's workflow): nothing is sent, and the stored record (the failure's first
 * detail) stays the task's outcome.
 */
export const ALREADY_ENDED_FAILURE_TYPE = 'already_ended';

export interface ErrorBody {
  code: string;
  message: string;
}

export class KilnError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = 'KilnError';
    this.status = ERROR_STATUS[code];
  }
  toBody(): { error: ErrorBody } {
    return { error: { code: this.code, message: this.message } };
  }
}
