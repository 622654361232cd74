// Google's error shape for the Gemini batch surface. Kiln's errors keep their catalogue code and
// HTTP status; what changes is the body: `{error: {code: <HTTP status>, message, status: <rpc name>,
// details: [ErrorInfo]}}` as Google APIs answer, and, for a request inside a batch, the
// google.rpc.Status `{code: <rpc number>, message, details}` of its inline response.
import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import { z } from 'zod';
import { errorMiddleware } from '../http/errors.js';
import { ERROR_STATUS, type ErrorCode } from '../shared/errors.js';

/** google.rpc.Code numbers by name. */
const RPC = {
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
export type RpcName = keyof typeof RPC;

/** Kiln's code → the rpc status a Google client expects for it; codes not named here are by HTTP status. */
const BY_CODE: Partial<Record<ErrorCode, RpcName>> = {
  model_not_allowed: 'PERMISSION_DENIED',
  quota_exceeded: 'RESOURCE_EXHAUSTED',
  concurrency_limit_exceeded: 'RESOURCE_EXHAUSTED',
  rate_limited: 'RESOURCE_EXHAUSTED',
  upstream_rate_limited: 'RESOURCE_EXHAUSTED',
  insufficient_balance: 'FAILED_PRECONDITION',
  idempotency_key_reused: 'FAILED_PRECONDITION',
  task_not_ready: 'FAILED_PRECONDITION',
  task_failed: 'FAILED_PRECONDITION',
  not_held: 'FAILED_PRECONDITION',
  // The upstream refused the credential Kiln forwarded: not the caller's Kiln key.
  auth_failed: 'PERMISSION_DENIED',
  upstream_timeout: 'DEADLINE_EXCEEDED',
  upstream_error: 'UNAVAILABLE',
  canceled: 'CANCELLED',
  method_not_allowed: 'UNIMPLEMENTED',
};

const BY_HTTP: Record<number, RpcName> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  409: 'FAILED_PRECONDITION',
  413: 'INVALID_ARGUMENT',
  415: 'INVALID_ARGUMENT',
  422: 'FAILED_PRECONDITION',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  502: 'UNAVAILABLE',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

/** The rpc status name of a Kiln error code (a task's error.code included); UNKNOWN for others. */
export function rpcName(code: string): RpcName {
  const known = code in ERROR_STATUS ? (code as ErrorCode) : undefined;
  if (!known) return 'UNKNOWN';
  return BY_CODE[known] ?? BY_HTTP[ERROR_STATUS[known]] ?? 'UNKNOWN';
}

const ERROR_INFO_TYPE = 'type.googleapis.com/google.rpc.ErrorInfo';

/** Kiln's code as a google.rpc.ErrorInfo reason (UPPER_SNAKE_CASE, domain `kiln`). */
const errorInfo = (code: string) => ({ '@type': ERROR_INFO_TYPE, reason: code.toUpperCase(), domain: 'kiln' });

/** A google.rpc.Status: what a failed request of a batch answers in its inline response. */
export interface RpcStatus {
  code: number;
  message: string;
  details?: { '@type': string; reason: string; domain: string }[];
}

export function rpcStatus(code: string, message: string): RpcStatus {
  return { code: RPC[rpcName(code)], message, details: [errorInfo(code)] };
}

/** An uncertain task: Kiln cannot tell whether the upstream made the image. */
export const uncertainStatus = (message: string): RpcStatus => ({ code: RPC.UNKNOWN, message });

/** Kiln's error body → Google's, with the same HTTP status. */
export function googleBody(httpStatus: number, body: { error: { code: string; message: string } }) {
  const { code, message } = body.error;
  return { error: { code: httpStatus, message, status: rpcName(code), details: [errorInfo(code)] } };
}

const MISSING_KEY = 'Send your API key as "x-goog-api-key: <API_KEY>" (or "Authorization: Bearer <API_KEY>").';

function isKilnBody(b: unknown): b is { error: { code: string; message: string } } {
  const e = (b as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  return typeof e?.code === 'string' && typeof e.message === 'string';
}

/**
 * Answers every failure on the paths it is given in Google's shape: Kiln's own error middleware
 * runs first (so logging, masking of 5xx and Retry-After stay as everywhere), then its body is
 * rewritten. Authentication and unmatched paths under these prefixes are covered too, which a
 * handler alone could not do.
 */
export function googlePathErrors(log: Logger, paths: RegExp): Middleware {
  const kiln = errorMiddleware(log);
  return async (ctx, next) => {
    if (!paths.test(ctx.path)) return next();
    await kiln(ctx, next);
    if (!(ctx.status >= 400 && isKilnBody(ctx.body))) return;
    // Kiln's wording names only the bearer form; a Gemini client sends x-goog-api-key.
    if (ctx.body.error.code === 'missing_api_key') ctx.body.error.message = MISSING_KEY;
    ctx.body = googleBody(ctx.status, ctx.body);
  };
}

/** The documented error body of a Gemini batch operation: the codes of one HTTP status. */
export function googleErrorSchema(codes: ErrorCode[]): z.ZodType {
  const status = ERROR_STATUS[codes[0]!];
  const names = [...new Set(codes.map(rpcName))] as [RpcName, ...RpcName[]];
  const reasons = codes.map((c) => c.toUpperCase()) as [string, ...string[]];
  return z.object({
    error: z.object({
      code: z.literal(status).meta({ description: 'The HTTP status' }),
      message: z.string(),
      status: z.enum(names).meta({ description: 'The google.rpc.Code name' }),
      details: z
        .array(
          z.object({
            '@type': z.literal(ERROR_INFO_TYPE),
            reason: z.enum(reasons).meta({ description: "Kiln's error code, upper case" }),
            domain: z.literal('kiln'),
          }),
        )
        .optional(),
    }),
  });
}
