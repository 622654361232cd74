// The outermost middleware: request id, one log line per request, metrics, an HTTP span, and the
// drain flag during shutdown. Routes are named by their template (`/v1/tasks/:id`), never by the
// raw path: paths carry task ids (unbounded metric labels) and, for the codec, a token.
import { context, SpanKind, SpanStatusCode, trace, type Tracer } from '@opentelemetry/api';
import type { Context, Middleware } from 'koa';
import type { Logger } from 'pino';
import type { ApiMetrics } from '../ops/metrics.js';
import { requestIdFrom, runWithRequest, type RequestContext } from '../ops/request-context.js';

export interface ObserveDeps {
  log: Logger;
  metrics?: ApiMetrics;
  tracer?: Tracer;
  stopping?: () => boolean;
}

const routeOf = (ctx: Context): string => (ctx as Context & { _matchedRoute?: string })._matchedRoute ?? '(unmatched)';

function taskIdOf(ctx: Context): string | undefined {
  const p = (ctx as Context & { params?: Record<string, string> }).params;
  if (p?.id?.startsWith('task_')) return p.id;
  const body = ctx.body as { id?: unknown } | null;
  return body && typeof body === 'object' && typeof body.id === 'string' && body.id.startsWith('task_')
    ? body.id
    : undefined;
}

/** The per-route metric series, bound once: prom-client hashes a label object on every call. */
function boundSeries(metrics: ApiMetrics) {
  const bound = new Map<string, { count: () => void; time: (seconds: number) => void }>();
  return (method: string, route: string, status: number) => {
    const key = `${method} ${route} ${status}`;
    let series = bound.get(key);
    if (!series) {
      const labels = { method, route, status: String(status) };
      const requests = metrics.requests.labels(labels);
      const duration = metrics.duration.labels(labels);
      series = { count: () => requests.inc(), time: (seconds) => duration.observe(seconds) };
      bound.set(key, series);
    }
    return series;
  };
}

export function observe({ log, metrics, tracer, stopping }: ObserveDeps): Middleware {
  // The request line holds only the fields chosen below (never a header, query or body), so it
  // skips the redaction pass every other line gets (about half of a line's cost on a poll).
  const requestLog = log.child({}, { redact: { paths: [] } });
  const series = metrics && boundSeries(metrics);
  return async (ctx, next) => {
    const rc: RequestContext = { requestId: requestIdFrom(ctx.get('x-request-id') || undefined) };
    ctx.set('X-Request-Id', rc.requestId);
    // While draining, answer what is in flight but tell keep-alive clients to go elsewhere.
    if (stopping?.()) ctx.set('Connection', 'close');
    const start = performance.now();
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
      const seconds = (performance.now() - start) / 1000;
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
      if (metrics && series) {
        const bound = series(ctx.method, route, status);
        bound.count();
        bound.time(seconds);
        if (status === 429) metrics.rateLimited.inc({ route });
        const body = ctx.body as { id?: unknown; model?: unknown; object?: unknown } | null;
        if (status === 202 && body && typeof body.model === 'string' && typeof body.id === 'string') {
          const kind = typeof body.object === 'string' ? body.object.split('.')[0] : 'task';
          metrics.submitted.inc({ model: body.model, kind });
        }
      }
      // Route template only: queries and headers may carry keys.
      // Probes and scrapes arrive every few seconds: their lines only at debug.
      const quiet = route === '/healthz' || route === '/readyz' || route === '/metrics';
      requestLog[quiet ? 'debug' : 'info'](
        {
          reqId: rc.requestId,
          method: ctx.method,
          route,
          status,
          ms: Math.round(seconds * 1000),
          ...(rc.taskId ? { taskId: rc.taskId } : {}),
          ...(rc.owner ? { owner: rc.owner } : {}),
        },
        'request',
      );
    }
  };
}
