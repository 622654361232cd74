// Google's error shape for the Gemini video endpoints: `{error: {code, message, status, details}}`,
// what the @google/genai SDK parses into its ApiError. The HTTP status stays the one the error
// catalogue gives each Kiln code, so the OpenAPI document and every other surface agree on it;
// `status` is the google.rpc code name closest to that Kiln code, and `details` names the Kiln code.
import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import { z } from 'zod';
import { errorAnswer, retryAfterHeader } from '../http/errors.js';
import { routeOf } from '../http/route-table.js';
import { ERROR_STATUS, KilnError, type ErrorCode } from '../shared/errors.js';

/** google.rpc.Code: the number an Operation's error carries, by name. */
export const RPC_CODES = {
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;
export type RpcStatus = keyof typeof RPC_CODES;

/** The google.rpc status of each Kiln code, for HTTP errors and for a failed task's operation error. */
export const RPC_STATUS: Record<ErrorCode, RpcStatus> = {
  missing_api_key: 'UNAUTHENTICATED',
  invalid_api_key: 'UNAUTHENTICATED',
  output_must_be_url: 'INVALID_ARGUMENT',
  invalid_reference_image_url: 'INVALID_ARGUMENT',
  invalid_reference_image_scheme: 'INVALID_ARGUMENT',
  too_many_reference_images: 'INVALID_ARGUMENT',
  prompt_too_long: 'INVALID_ARGUMENT',
  invalid_request: 'INVALID_ARGUMENT',
  request_too_large: 'INVALID_ARGUMENT',
  unsupported_content_encoding: 'INVALID_ARGUMENT',
  unsupported_media_type: 'INVALID_ARGUMENT',
  queue_full: 'UNAVAILABLE',
  rate_limited: 'RESOURCE_EXHAUSTED',
  quota_exceeded: 'RESOURCE_EXHAUSTED',
  concurrency_limit_exceeded: 'RESOURCE_EXHAUSTED',
  not_held: 'FAILED_PRECONDITION',
  task_not_ready: 'FAILED_PRECONDITION',
  task_failed: 'FAILED_PRECONDITION',
  idempotency_key_reused: 'FAILED_PRECONDITION',
  invalid_webhook_url: 'INVALID_ARGUMENT',
  not_found: 'NOT_FOUND',
  model_not_found: 'NOT_FOUND',
  model_not_allowed: 'PERMISSION_DENIED',
  method_not_allowed: 'UNIMPLEMENTED',
  service_unavailable: 'UNAVAILABLE',
  internal_error: 'INTERNAL',
  invalid_image_url: 'INVALID_ARGUMENT',
  too_many_images: 'INVALID_ARGUMENT',
  image_too_large: 'INVALID_ARGUMENT',
  // A task's own outcomes. The upstream refused Kiln's (or the passthrough) credential: the caller
  // is authenticated to Kiln, the work was not permitted upstream.
  upstream_timeout: 'DEADLINE_EXCEEDED',
  auth_failed: 'PERMISSION_DENIED',
  // The upstream account must be topped up before a retry can succeed.
  insufficient_balance: 'FAILED_PRECONDITION',
  upstream_rate_limited: 'RESOURCE_EXHAUSTED',
  // An upstream 5xx, an unusable answer or a transport failure: a new operation may well succeed.
  upstream_error: 'UNAVAILABLE',
  canceled: 'CANCELLED',
};

/** google.rpc.ErrorInfo naming the Kiln code (`PROMPT_TOO_LONG`), so nothing of Kiln's answer is lost. */
export const errorInfo = (code: string) => ({
  '@type': 'type.googleapis.com/google.rpc.ErrorInfo' as const,
  reason: code.toUpperCase(),
  domain: 'kiln',
});

export const ErrorInfo = z.object({
  '@type': z.literal('type.googleapis.com/google.rpc.ErrorInfo'),
  reason: z.string().meta({ description: "Kiln's error code, upper case (`PROMPT_TOO_LONG`)" }),
  domain: z.literal('kiln'),
});

/** The body of an HTTP error of these endpoints. */
export function googleErrorBody(e: KilnError) {
  return { error: { code: e.status, message: e.message, status: RPC_STATUS[e.code], details: [errorInfo(e.code)] } };
}

/** The documented error body of one HTTP status (the codes the catalogue answers with it). */
export function googleErrorSchema(codes: ErrorCode[]): z.ZodType {
  const statuses = [...new Set(codes.map((c) => RPC_STATUS[c]))] as [RpcStatus, ...RpcStatus[]];
  return z.object({
    error: z.object({
      code: z.literal(ERROR_STATUS[codes[0]!]).meta({ description: 'The HTTP status' }),
      message: z.string(),
      status: z.enum(statuses).meta({ description: 'The google.rpc code name' }),
      details: z.array(ErrorInfo).meta({
        description: `One google.rpc.ErrorInfo; its reason is one of ${codes.map((c) => c.toUpperCase()).join(', ')}`,
      }),
    }),
  });
}

const MISSING_KEY = 'Send your API key as "x-goog-api-key: <API_KEY>" (or "Authorization: Bearer <API_KEY>").';

/**
 * Answers failures on the given paths in Google's shape; every other path keeps Kiln's. Mounted
 * inside the app's error middleware, so it sees errors raised while authenticating and reading the
 * body too (and a neighbouring route's refusal of a malformed path of these), and masks and logs
 * internal ones exactly as that middleware does. The router's 405, set rather than thrown, stays Kiln's.
 */
export function googleErrors(paths: RegExp, log: Logger): Middleware {
  return async (ctx, next) => {
    if (!paths.test(ctx.path)) return next();
    try {
      await next();
      // No route took the path (an empty model under /v1): the app's 404, in this shape.
      if (ctx.status === 404 && ctx.body === undefined) throw new KilnError('not_found', 'No such endpoint.');
    } catch (err) {
      let e = errorAnswer(err, log, ctx.method, routeOf(ctx));
      // Kiln's wording names only the bearer form; a Gemini client sends x-goog-api-key.
      if (e.code === 'missing_api_key') e = new KilnError('missing_api_key', MISSING_KEY);
      ctx.status = e.status;
      ctx.body = googleErrorBody(e);
      const retryAfter = retryAfterHeader(e);
      if (retryAfter !== undefined) ctx.set('Retry-After', retryAfter);
    }
  };
}
