// The operator token (KILN_OPERATOR_TOKEN) that unlocks the operator endpoints (the payload codec,
// the admin calls): endpoints that need it answer not_found while it is unset, and missing_api_key
// to a caller without it. Compared as digests in constant time.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { RouterContext } from '@koa/router';
import type { Context } from 'koa';
import { KilnError } from '../shared/errors.js';
import { route, type RouteDef, type RouteInput, type RouteRequest, type RouteSpec } from './route-table.js';

const digest = (s: string) => createHash('sha256').update(s).digest();

/**
 * Throws unless the request carries the operator token (`Authorization: Bearer <token>`, or
 * `given`, e.g. from the path). `what` names the endpoints in the answers.
 */
export function requireOperator(ctx: Context, operatorToken: string | undefined, what: string, given?: string): void {
  if (!operatorToken) throw new KilnError('not_found', `${what} are off: set KILN_OPERATOR_TOKEN to enable them.`);
  const token = given ?? /^Bearer (\S+)$/.exec(ctx.get('authorization'))?.[1];
  if (!token || !timingSafeEqual(digest(token), digest(operatorToken)))
    throw new KilnError('missing_api_key', `${what} need the operator token.`);
}

/**
 * An admin operation (/admin/v1/…): tagged `admin`, documented as taking the operator token, and its
 * handler runs only once the request carries that token. Its answers are never cached.
 */
export function adminRoute<R extends RouteRequest = Record<never, never>>(
  operatorToken: string | undefined,
  def: Omit<RouteSpec, 'request' | 'auth' | 'tags'> & {
    request?: R;
    handler(ctx: RouterContext, input: RouteInput<R, 'operator'>): unknown;
  },
): RouteDef {
  return route({
    ...def,
    tags: ['admin'],
    auth: 'operator',
    handler: async (ctx, input) => {
      requireOperator(ctx, operatorToken, 'The admin endpoints');
      ctx.set('Cache-Control', 'no-store');
      await def.handler(ctx, input);
    },
  });
}
