// The outermost middleware: request id, one log line per request, metrics, an HTTP span, and the
// drain flag during shutdown. Routes are named by their template (`/v1/tasks/:id`), never by the
// raw path: paths carry task ids (unbounded metric labels) and, for the codec, a token.
// `requestObserver` is the part without Koa: the fast read path (fast-reads.ts) records its
// requests through the same one, so their log lines and metric series are the same.
import { context, SpanKind, SpanStatusCode, trace, type Tracer } from '@opentelemetry/api';
import type { Context, Middleware } from 'koa';
import type { Logger } from 'pino';
import { requestLineWriter, type RequestLine } from '../ops/log.js';
import { routeOf } from './route-table.js';
import type { ApiMetrics } from '../ops/metrics.js';
import { requestIdFrom, runWithRequest, type RequestContext } from '../ops/request-context.js';

export interface ObserveDeps {
  log: Logger;
  metrics?: ApiMetrics;
  tracer?: Tracer;
  stopping?: () => boolean;
}

/** A request being served: its context (what its log lines carry) and when it started. */
export interface ObservedRequest {
  rc: RequestContext;
  start: number;
}

/** What a finished request is recorded by. */
export interface Outcome {
  method: string;
  /** The route template, or `(unmatched)`. */
  route: string;
  status: number;
  /** The answer's body when it is an object (a submit's 202 counts by its model). */
  body?: unknown;
}

export interface RequestObserver {
  begin(requestIdHeader: string | undefined): ObservedRequest;
  /** Metrics and the request's log line; returns the seconds it took. */
  end(req: ObservedRequest, outcome: Outcome): number;
  /** Whether the process is draining (answers then close keep-alive connections). */
  stopping(): boolean;
}

function taskIdOf(ctx: Context): string | undefined {
  const p = (ctx as Context & { params?: Record<string, string> }).params;
  if (p?.id?.startsWith('task_')) return p.id;
  const body = ctx.body as { id?: unknown } | null;
  return body && typeof body === 'object' && typeof body.id === 'string' && body.id.startsWith('task_')
    ? body.id
    : undefined;
}

/** Where a 429 comes from an owner's or key's limit (src/usage/), not the poll limiter. */
const SUBMIT_ROUTES = new Set(['/v1beta/models/:modelAction', '/v1/models/:modelAction', '/v1/videos']);
const LIMIT_CODES = new Set(['quota_exceeded', 'concurrency_limit_exceeded', 'rate_limited']);

export function requestObserver({ log, metrics, stopping }: Omit<ObserveDeps, 'tracer'>): RequestObserver {
  // The request line holds only the fields chosen below (never a header, query or body), so it
  // skips the redaction pass every other line gets (a large share of a line's cost on a poll).
  const requestLog = log.child({}, { redact: { paths: [] } });
  // Cheaper still: the same line written without pino's per-line work (src/ops/log.ts).
  const writeLine = requestLineWriter(log);
  return {
    begin: (header) => ({ rc: { requestId: requestIdFrom(header) }, start: performance.now() }),
    stopping: () => stopping?.() ?? false,
    end({ rc, start }, { method, route, status, body }) {
      const seconds = (performance.now() - start) / 1000;
      if (metrics) {
        metrics.http.entry(method, route, status).record(seconds);
        const b = body as
          { id?: unknown; model?: unknown; object?: unknown; error?: { code?: unknown } } | null | undefined;
        if (status === 429) {
          metrics.rateLimited.inc({ route });
          const code = b?.error?.code;
          if (typeof code === 'string' && LIMIT_CODES.has(code) && SUBMIT_ROUTES.has(route))
            metrics.refused.inc({ route, code });
        }
        if (status === 202 && b && typeof b.model === 'string' && typeof b.id === 'string') {
          const kind = typeof b.object === 'string' ? b.object.split('.')[0] : 'task';
          metrics.submitted.inc({ model: b.model, kind });
        }
      }
      // Route template only: queries and headers may carry keys.
      // Probes and scrapes arrive every few seconds: their lines only at debug.
      const quiet = route === '/healthz' || route === '/readyz' || route === '/metrics';
      const line: RequestLine = {
        reqId: rc.requestId,
        method,
        route,
        status,
        ms: Math.round(seconds * 1000),
        // pino leaves out undefined fields, as the writer does.
        taskId: rc.taskId || undefined,
        owner: rc.owner || undefined,
      };
      if (quiet) requestLog.debug(line, 'request');
      else if (writeLine && requestLog.isLevelEnabled('info')) writeLine(line);
      else requestLog.info(line, 'request');
      return seconds;
    },
  };
}

export function observe(observer: RequestObserver, tracer?: Tracer): Middleware {
  return async (ctx, next) => {
    const req = observer.begin(ctx.get('x-request-id') || undefined);
    const { rc } = req;
    ctx.set('X-Request-Id', rc.requestId);
    // While draining, answer what is in flight but tell keep-alive clients to go elsewhere.
    if (observer.stopping()) ctx.set('Connection', 'close');
    const span = tracer?.startSpan(`${ctx.method} request`, {
      kind: SpanKind.SERVER,
      // No raw path: the route template is added once routing has matched.
      attributes: { 'http.request.method': ctx.method, 'kiln.request_id': rc.requestId },
    });
    try {
      await runWithRequest(rc, () => (span ? context.with(trace.setSpan(context.active(), span), next) : next()));
    } finally {
      const route = routeOf(ctx);
      const status = ctx.status;
      rc.taskId ??= taskIdOf(ctx);
      if (span) {
        span.updateName(`${ctx.method} ${route}`);
        span.setAttributes({
          'http.route': route,
          'http.response.status_code': status,
          ...(rc.taskId ? { 'kiln.task_id': rc.taskId } : {}),
        });
        if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
      }
      observer.end(req, { method: ctx.method, route, status, body: ctx.body });
    }
  };
}
