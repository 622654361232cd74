// The one error middleware: every failure becomes {error: {code, message}} with the right status.
// 5xx bodies never carry internal details.
import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import { KilnError } from '../shared/errors.js';
import { routeOf } from './route-table.js';

interface HttpishError {
  status?: number;
  statusCode?: number;
  type?: string;
  expose?: boolean;
  message?: string;
}

export function toKilnError(err: unknown): KilnError | null {
  if (err instanceof KilnError) return err;
  const e = err as HttpishError;
  const status = e?.status ?? e?.statusCode;
  if (typeof status !== 'number' || status >= 500) return null;
  // Errors raised by the body parser (raw-body, inflation, co-body) and the router.
  if (status === 413 || e.type === 'entity.too.large') {
    return new KilnError('request_too_large', 'The request body is larger than 2 MB after decompression.');
  }
  if (status === 415)
    return new KilnError('unsupported_content_encoding', 'Content-Encoding must be gzip, br or absent.');
  if (status === 404) return new KilnError('not_found', 'No such endpoint.');
  if (status === 405) return new KilnError('method_not_allowed', 'Method not allowed on this endpoint.');
  if (e.type === 'request.aborted')
    return new KilnError('invalid_request', 'The request body was not received completely.');
  if (e.type === 'encoding.unsupported' || e.type === 'charset.unsupported') {
    return new KilnError('unsupported_media_type', 'The request body must be UTF-8 JSON.');
  }
  // Valid JSON, refused by the parser's prototype-poisoning guard: say so, not "not valid JSON".
  if (e.message?.includes('forbidden prototype property')) {
    return new KilnError('invalid_request', 'The request body must not contain the key "__proto__".');
  }
  return new KilnError('invalid_request', 'The request body is not valid JSON.');
}

/**
 * What a failure is answered with. Anything not known to be the client's doing is logged and
 * masked as internal_error. `route` is the template, not the path: a codec path carries the
 * operator token.
 */
export function errorAnswer(err: unknown, log: Logger, method: string, route: string): KilnError {
  const known = toKilnError(err);
  if (!known) log.error({ err, method, route }, 'unhandled error');
  return known ?? new KilnError('internal_error', 'Internal error; it has been logged.');
}

/** Retry-After for an error that names one: whole seconds, at least 1. */
export const retryAfterHeader = (e: KilnError): string | undefined =>
  e.retryAfterSeconds === undefined ? undefined : String(Math.max(1, Math.ceil(e.retryAfterSeconds)));

export function errorMiddleware(log: Logger): Middleware {
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) throw new KilnError('not_found', 'No such endpoint.');
      // 405 from the router, and 501 for a method it does not implement at all: a client error either way.
      if ((ctx.status === 405 || ctx.status === 501) && ctx.body === undefined) {
        const allow = ctx.response.get('Allow');
        if (!allow) throw new KilnError('not_found', 'No such endpoint.');
        throw new KilnError('method_not_allowed', `${ctx.method} is not allowed here; allowed: ${allow}.`);
      }
    } catch (err) {
      const route = routeOf(ctx);
      const e = errorAnswer(err, log, ctx.method, route);
      ctx.status = e.status;
      ctx.body = e.toBody();
      const retryAfter = retryAfterHeader(e);
      if (retryAfter !== undefined) ctx.set('Retry-After', retryAfter);
    }
  };
}
