// A poll of one task (`GET /v1/tasks/{id}`, `GET /v1/videos/{id}`) is the most frequent request a
// gateway like this serves. Koa's context objects, the middleware chain and the router's matching
// cost a poll about as much CPU as everything else Kiln does for it (BENCHMARKS.md), so these two
// routes are answered here, below Koa, by the same service functions, with the same answers,
// headers, request log line and metric series. Anything unusual goes to Koa untouched: another
// method, a query string or Prefer header (long-polls), an Origin header, an id with characters
// outside a task id's, a trailing slash, and every request while tracing is on (spans are Koa's).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Authenticator, Caller } from '../infra/auth.js';
import type { ViewText } from '../infra/poll.js';
import { runWithRequest } from '../ops/request-context.js';
import { UNFINISHED_STATUSES } from '../shared/task.js';
import { errorAnswer, retryAfterHeader } from './errors.js';
import type { ObservedRequest, RequestObserver } from './observe.js';

export interface FastRead {
  /** The path prefix before the id, e.g. `/v1/tasks/`. */
  prefix: string;
  /** Its route template, as Koa's router names it (`/v1/tasks/:id`): logs and metrics. */
  route: string;
  get(caller: Caller, id: string): Promise<ViewText>;
  pollAfterSeconds: number;
}

export interface FastReadDeps {
  auth: Authenticator;
  observer: RequestObserver;
  log: Logger;
  reads: FastRead[];
}

type Listener = (req: IncomingMessage, res: ServerResponse) => unknown;

/** What a task or video id can hold; anything else (e.g. `%`-escapes, `/`) is Koa's to decode. */
const PLAIN_ID = /^[A-Za-z0-9_-]{1,256}$/;
const JSON_TYPE = 'application/json; charset=utf-8';

/** Wraps Koa's request listener: the polls above are answered here, everything else by `slow`. */
export function withFastReads(deps: FastReadDeps, slow: Listener): Listener {
  const { reads } = deps;
  return (req, res) => {
    const read = req.method === 'GET' ? match(reads, req) : undefined;
    if (!read) return slow(req, res);
    void answer(deps, read, req, res);
  };
}

function match(reads: FastRead[], req: IncomingMessage): { read: FastRead; id: string } | undefined {
  const url = req.url ?? '';
  const h = req.headers;
  if (h.prefer !== undefined || h.origin !== undefined) return undefined;
  for (const read of reads) {
    if (!url.startsWith(read.prefix)) continue;
    const id = url.slice(read.prefix.length);
    return PLAIN_ID.test(id) ? { read, id } : undefined;
  }
  return undefined;
}

async function answer(
  { auth, observer, log }: FastReadDeps,
  { read, id }: { read: FastRead; id: string },
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const header = req.headers['x-request-id'];
  const observed: ObservedRequest = observer.begin(typeof header === 'string' && header ? header : undefined);
  const { rc } = observed;
  if (id.startsWith('task_')) rc.taskId = id;
  const headers: Record<string, string> = { 'X-Request-Id': rc.requestId, 'Content-Type': JSON_TYPE };
  // While draining, answer what is in flight but tell keep-alive clients to go elsewhere.
  if (observer.stopping()) headers.Connection = 'close';
  let status = 200;
  let body: string;
  try {
    const view = await runWithRequest(rc, async () => {
      const caller = await auth.authenticate(req.headers.authorization || undefined);
      rc.owner = caller.owner;
      return read.get(caller, id);
    });
    if (UNFINISHED_STATUSES.includes(view.status)) headers['Retry-After'] = String(read.pollAfterSeconds);
    body = view.json;
  } catch (err) {
    const e = errorAnswer(err, log, 'GET', read.route);
    status = e.status;
    body = JSON.stringify(e.toBody());
    const retryAfter = retryAfterHeader(e);
    if (retryAfter !== undefined) headers['Retry-After'] = retryAfter;
  }
  headers['Content-Length'] = String(Buffer.byteLength(body));
  res.writeHead(status, headers);
  res.end(body);
  observer.end(observed, { method: 'GET', route: read.route, status });
}
