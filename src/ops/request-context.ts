// Per-request context (request id, owner hash, task id) carried through async calls, so log lines
// of services deep below a handler can name the request and task without threading ctx around.
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';

export interface RequestContext {
  requestId: string;
  owner?: string;
  taskId?: string;
}

const storage = new AsyncLocalStorage<RequestContext>();

export const runWithRequest = <T>(ctx: RequestContext, fn: () => T): T => storage.run(ctx, fn);
export const currentRequest = (): RequestContext | undefined => storage.getStore();

// Printable, short and free of separators a log or header parser could trip on.
const SANE_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

/** The caller's X-Request-Id when it is sane, else a fresh one. */
export function requestIdFrom(header: string | undefined): string {
  return header && SANE_ID.test(header) ? header : randomUUID();
}
