// The operator token (KILN_OPERATOR_TOKEN) that unlocks the operator endpoints (the payload codec,
// the admin calls): endpoints that need it answer not_found while it is unset, and missing_api_key
// to a caller without it. Compared as digests in constant time.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context } from 'koa';
import { KilnError } from '../shared/errors.js';

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
