// Google's error shapes for the Gemini surfaces (video operations, batch mode), which the
// @google/genai SDK parses: an HTTP error is `{error: {code: <HTTP status>, message, status: <rpc
// name>, details: [ErrorInfo]}}`, and a failed task's Operation error or a batch request's inline
// response is a google.rpc.Status `{code: <rpc number>, message, details}`. The HTTP status stays
// the one the error catalogue gives each Kiln code, so the OpenAPI document and every other surface
// agree on it; only the body changes, and its ErrorInfo names the Kiln code so nothing is lost.
import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import { z } from 'zod';
import { ERROR_STATUS, KilnError, type ErrorCode } from '../shared/errors.js';
import { errorAnswer, retryAfterHeader } from './errors.js';
import { routeOf } from './route-table.js';

/** google.rpc.Code: the number a google.rpc.Status carries, by name. */
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
export type RpcName = keyof typeof RPC_CODES;

/**
 * The google.rpc code of each Kiln code, for HTTP errors and for a failed task or batch request.
 * A Record over the whole catalogue, so a new Kiln code cannot ship without one; by code rather
 * than by HTTP status, since one status can mean different things to a Google client (409 is
 * FAILED_PRECONDITION, but `canceled` is CANCELLED; the upstream's 401, `auth_failed`, is
 * PERMISSION_DENIED).
 */
export const RPC_NAME: Record<ErrorCode, RpcName> = {
  missing_api_key: 'UNAUTHENTICATED',
  invalid_api_key: 'UNAUTHENTICATED',
  output_must_be_url: 'INVALID_ARGUMENT',
  invalid_reference_image_url: 'INVALID_ARGUMENT',
  invalid_reference_image_scheme: 'INVALID_ARGUMENT',
  too_many_reference_images: 'INVALID_ARGUMENT',
  prompt_too_long: 'INVALID_ARGUMENT',
  invalid_request: 'INVALID_ARGUMENT',
  // 413 and 415 have no rpc code of their own: the request, as sent, is not acceptable.
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
  // An upstream 5xx, an unusable answer or a transport failure: a new request may well succeed.
  upstream_error: 'UNAVAILABLE',
  canceled: 'CANCELLED',
};

/**
 * The rpc code name of any code a task or error may carry. One outside the catalogue is UNKNOWN,
 * google.rpc's code for an error from an error space this one does not know: `uncertain` (Kiln
 * cannot tell whether the upstream did the work) and a code a newer release may write during a
 * rolling deploy. Not INTERNAL: no invariant of this process is known to be broken.
 */
export function rpcName(code: string): RpcName {
  return Object.hasOwn(RPC_NAME, code) ? RPC_NAME[code as ErrorCode] : 'UNKNOWN';
}

const ERROR_INFO_TYPE = 'type.googleapis.com/google.rpc.ErrorInfo';

/** google.rpc.ErrorInfo naming the Kiln code (`PROMPT_TOO_LONG`), so nothing of Kiln's answer is lost. */
export const errorInfo = (code: string) => ({ '@type': ERROR_INFO_TYPE, reason: code.toUpperCase(), domain: 'kiln' });
export type ErrorInfo = ReturnType<typeof errorInfo>;

/** The ErrorInfo schema; `reasons` narrows its reason to the Kiln codes one answer can carry. */
export function errorInfoSchema(reasons?: readonly [string, ...string[]]) {
  return z.object({
    '@type': z.literal(ERROR_INFO_TYPE),
    reason: (reasons ? z.enum(reasons) : z.string()).meta({
      description: "Kiln's error code, upper case (`PROMPT_TOO_LONG`)",
    }),
    domain: z.literal('kiln'),
  });
}
export const ErrorInfo = errorInfoSchema();

/** A google.rpc.Status: a failed task's Operation error, a batch request's inline error. */
export interface RpcStatus {
  code: number;
  message: string;
  /** Absent only where no Kiln code applies (a whole batch canceled or failed). */
  details?: ErrorInfo[];
}

export function rpcStatus(code: string, message: string): RpcStatus {
  return { code: RPC_CODES[rpcName(code)], message, details: [errorInfo(code)] };
}

/** The body of an HTTP error on the Google-shaped paths. */
export function googleErrorBody(e: KilnError) {
  return { error: { code: e.status, message: e.message, status: rpcName(e.code), details: [errorInfo(e.code)] } };
}

/** The documented error body of one HTTP status (the codes the catalogue answers with it). */
export function googleErrorSchema(codes: ErrorCode[]): z.ZodType {
  const names = [...new Set(codes.map(rpcName))] as [RpcName, ...RpcName[]];
  const reasons = codes.map((c) => c.toUpperCase()) as [string, ...string[]];
  return z.object({
    error: z.object({
      code: z.literal(ERROR_STATUS[codes[0]!]).meta({ description: 'The HTTP status' }),
      message: z.string(),
      status: z.enum(names).meta({ description: 'The google.rpc.Code name' }),
      // Always sent (googleErrorBody), so documented as required.
      details: z.array(errorInfoSchema(reasons)).meta({ description: 'One google.rpc.ErrorInfo naming the Kiln code' }),
    }),
  });
}

const MISSING_KEY = 'Send your API key as "x-goog-api-key: <API_KEY>" (or "Authorization: Bearer <API_KEY>").';

/**
 * Answers failures on the given paths in Google's shape; every other path keeps Kiln's. Mounted
 * inside the app's error middleware, so it sees errors raised while authenticating and reading the
 * body too (and a neighbouring route's refusal of a malformed path of these), and masks and logs
 * internal ones exactly as that middleware does. The router's 405, set rather than thrown, is left
 * to that middleware: Kiln's shared 405, as on every path.
 */
export function googleErrors(paths: readonly RegExp[], log: Logger): Middleware {
  return async (ctx, next) => {
    if (!paths.some((p) => p.test(ctx.path))) return next();
    try {
      await next();
      // No route took the path (an empty model, an unknown path under /v1beta/batches): the app's 404.
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
