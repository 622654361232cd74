// A poll of one task (`GET /v1/tasks/{id}`, `GET /v1/videos/{id}`) is the most frequent request a
// gateway like this serves, and a list page (`GET /v1/tasks`, `GET /v1/videos`) the heaviest read.
// Koa's context objects, the middleware chain and the router's matching cost a poll about as much
// CPU as everything else Kiln does for it (BENCHMARKS.md), so these routes are answered here, below
// Koa, by the same service functions, with the same answers, headers, request log line and metric
// series; a list's query is parsed as Koa parses it and checked with the route's own schema.
// Anything unusual goes to Koa untouched: another method, a poll's query string or a Prefer header
// (long-polls), an Origin header, an id with characters outside a task id's, a trailing slash, and
// every request while tracing is on (spans are Koa's). No Koa insides are used: the app's request
// listener tries these first and hands the rest to Koa's own `callback()` (src/api/app.ts).
import { IncomingMessage } from 'node:http';
import type Koa from 'koa';
import type { Logger } from 'pino';
import type { z } from 'zod';
import type { Authenticator, Caller } from '../infra/callers.js';
import type { ViewText } from './poll.js';
import { runWithRequest } from '../ops/request-context.js';
import { UNFINISHED_STATUSES } from '../shared/task.js';
import { errorAnswer, retryAfterHeader } from '../http/errors.js';
import type { ObservedRequest, RequestObserver } from '../http/observe.js';
import { parseInput } from '../http/route-table.js';

/** One task's poll: `<prefix><id>`. */
export interface FastRead {
  /** The path prefix before the id, e.g. `/v1/tasks/`. */
  prefix: string;
  /** Its route template, as Koa's router names it (`/v1/tasks/:id`): logs and metrics. */
  route: string;
  get(caller: Caller, id: string): Promise<ViewText>;
  /** `get`'s answer when memory has it (no I/O), else undefined. */
  peek?(caller: Caller, id: string): ViewText | undefined;
  pollAfterSeconds: number;
}

/** A collection's list page: `<path>` with its query. */
export interface FastList {
  /** The path and route template, e.g. `/v1/tasks`. */
  path: string;
  query: z.ZodType;
  list(caller: Caller, query: never): Promise<string | Buffer>;
}

export interface FastReadDeps {
  auth: Authenticator;
  observer: RequestObserver;
  log: Logger;
  reads: FastRead[];
  lists: FastList[];
}

/**
 * What an answer is written with: node:http's ServerResponse (and HTTP/2's) has both. Checking
 * the response's class instead walks a long prototype chain on every request (`instanceof
 * ServerResponse`); the request's class says which protocol it is.
 */
export interface Reply {
  writeHead(status: number, headers: Record<string, string>): unknown;
  end(body: string | Buffer): unknown;
}

/** Koa's request listener (`app.callback()`): HTTP/1.1 and HTTP/2 requests alike. */
export type KoaListener = ReturnType<Koa['callback']>;
/** What a matched request is answered with: the JSON text, and Retry-After for an unfinished task. */
type Answered = { json: string | Buffer; retryAfter?: number };

/**
 * A request the fast path answers: its route template, and the poll (`read` and `id`) or the
 * list page (`list` and `search`) it asks for. Plain fields, no closures: a poll allocates little.
 */
interface Matched {
  route: string;
  taskId?: string;
  read?: FastRead;
  id?: string;
  list?: FastList;
  search?: string;
}

/** What a task or video id can hold; anything else (e.g. `%`-escapes, `/`) is Koa's to decode. */
const PLAIN_ID = /^[A-Za-z0-9_-]{1,256}$/;
const JSON_TYPE = 'application/json; charset=utf-8';

/** Answers a request if it is one of the reads above (true); leaves any other untouched (false). */
export function fastReads(deps: FastReadDeps): (req: IncomingMessage, res: Reply) => boolean {
  return (req, res) => {
    const h = req.headers;
    const matched =
      req.method === 'GET' && h.prefer === undefined && h.origin === undefined ? match(deps, req.url ?? '') : undefined;
    if (!matched) return false;
    const header = h['x-request-id'];
    const observed = deps.observer.begin(typeof header === 'string' && header ? header : undefined);
    observed.rc.taskId = matched.taskId;
    // Everything the request logs, an unhandled error's line included, names it (as on Koa's routes).
    void runWithRequest(observed.rc, () => answer(deps, matched, observed, req, res));
    return true;
  };
}

/** What the listener returns for a request answered here: Node ignores it, Koa's type wants a promise. */
const ANSWERED = Promise.resolve();

/**
 * Koa's request listener with the reads above answered first. Kiln listens with node:http; an
 * HTTP/2 request (never seen) would go to Koa whole.
 */
export function withFastReads(deps: FastReadDeps, koa: KoaListener): KoaListener {
  const fast = fastReads(deps);
  return (req, res) => (req instanceof IncomingMessage && fast(req, res) ? ANSWERED : koa(req, res));
}

function match({ reads, lists }: FastReadDeps, url: string): Matched | undefined {
  for (const read of reads) {
    if (!url.startsWith(read.prefix)) continue;
    const id = url.slice(read.prefix.length);
    if (!PLAIN_ID.test(id)) return undefined;
    return { route: read.route, taskId: id.startsWith('task_') ? id : undefined, read, id };
  }
  for (const list of lists) {
    if (url !== list.path && !url.startsWith(`${list.path}?`)) continue;
    return { route: list.path, list, search: url.slice(list.path.length + 1) };
  }
  return undefined;
}

/** An unfinished task's answer says when to poll again. */
const retryAfterOf = (read: FastRead, view: ViewText): number | undefined =>
  UNFINISHED_STATUSES.includes(view.status) ? read.pollAfterSeconds : undefined;

async function serve({ read, id, list, search }: Matched, caller: Caller): Promise<Answered> {
  if (read) {
    const view = await read.get(caller, id!);
    return { json: view.json, retryAfter: retryAfterOf(read, view) };
  }
  return { json: await list!.list(caller, parseInput(list!.query, parseQuery(search!), 'query') as never) };
}

/**
 * A query string as Koa's `ctx.query` has it (koa/lib/search-params.js): WHATWG form decoding, a
 * repeated key as an array, every key an own property (`__proto__` included).
 */
export function parseQuery(search: string): Record<string, string | string[]> {
  const params = new URLSearchParams(search);
  const out: Record<string, string | string[]> = {};
  for (const key of new Set(params.keys())) {
    const values = params.getAll(key);
    Object.defineProperty(out, key, {
      value: values.length <= 1 ? values[0] : values,
      writable: true,
      enumerable: true,
      configurable: true,
    });
  }
  return out;
}

/**
 * A known key polling a finished task is answered synchronously, from memory: no promise, no
 * microtask, no async-hook bookkeeping (a visible share of such a poll's CPU). The
 * answer is the one `serve` would give: `peek` holds only what `get` would return as is.
 */
function answer(
  deps: FastReadDeps,
  matched: Matched,
  observed: ObservedRequest,
  req: IncomingMessage,
  res: Reply,
): Promise<void> | undefined {
  const { read } = matched;
  const caller = read?.peek && deps.auth.known?.(req.headers.authorization || undefined);
  const view = caller && read!.peek!(caller, matched.id!);
  if (!view) return answerLater(deps, matched, observed, req, res);
  observed.rc.owner = caller.owner;
  send(deps, matched.route, observed, res, 200, view.json, retryAfterOf(read!, view)?.toString());
}

async function answerLater(
  deps: FastReadDeps,
  matched: Matched,
  observed: ObservedRequest,
  req: IncomingMessage,
  res: Reply,
): Promise<void> {
  let status = 200;
  let body: string | Buffer;
  let retryAfter: string | undefined;
  try {
    // Authentication first, as on Koa's routes: an unauthenticated caller learns nothing of input rules.
    const caller = await deps.auth.authenticate(req.headers.authorization || undefined);
    observed.rc.owner = caller.owner;
    const answer = await serve(matched, caller);
    retryAfter = answer.retryAfter?.toString();
    body = answer.json;
  } catch (err) {
    const e = errorAnswer(err, deps.log, 'GET', matched.route);
    status = e.status;
    body = JSON.stringify(e.toBody());
    retryAfter = retryAfterHeader(e);
  }
  send(deps, matched.route, observed, res, status, body, retryAfter);
}

function send(
  { observer }: FastReadDeps,
  route: string,
  observed: ObservedRequest,
  res: Reply,
  status: number,
  body: string | Buffer,
  retryAfter: string | undefined,
): void {
  const headers: Record<string, string> = { 'X-Request-Id': observed.rc.requestId, 'Content-Type': JSON_TYPE };
  // While draining, answer what is in flight but tell keep-alive clients to go elsewhere.
  if (observer.stopping()) headers.Connection = 'close';
  if (retryAfter !== undefined) headers['Retry-After'] = retryAfter;
  headers['Content-Length'] = String(typeof body === 'string' ? Buffer.byteLength(body) : body.length);
  res.writeHead(status, headers);
  res.end(body);
  observer.end(observed, { method: 'GET', route, status });
}
