// Builds the Koa app from its dependencies; listening and shutdown belong to server.ts.
import Koa from 'koa';
import type { Logger } from 'pino';
import { errorMiddleware } from './http/errors.js';
import { chatRoutes } from './chat/routes.js';
import type { ChatService } from './chat/service.js';
import { videoRoutes } from './video/routes.js';
import type { VideoService } from './video/service.js';
import { buildRoutes, type RouteDeps } from './image/routes.js';
import './image/openapi.js';
import { codecCors, codecRoutes, type CodecDeps } from './http/codec-routes.js';
import { observe } from './http/observe.js';
import { opsRoutes, type OpsDeps } from './http/ops-routes.js';
import { currentRequest } from './ops/request-context.js';
import type { Authenticator } from './infra/auth.js';

export interface AppDeps extends RouteDeps {
  log: Logger;
  /** Operator endpoints, metrics and tracing (src/runtime.ts wires them). */
  ops?: OpsDeps & { codec: CodecDeps; tracer?: import('@opentelemetry/api').Tracer };
  chat: ChatService;
  videos: VideoService;
}

export function buildApp(deps: AppDeps): Koa {
  const app = new Koa({ proxy: true });
  app.silent = true;
  app.use(observe({ log: deps.log, metrics: deps.ops?.metrics, tracer: deps.ops?.tracer, stopping: deps.ops?.stopping }));
  app.use(errorMiddleware(deps.log));
  // The caller's owner hash goes on the request's log line.
  const inner = deps.auth;
  const auth: Authenticator = { authenticate: async (h) => { const c = await inner.authenticate(h); const rc = currentRequest(); if (rc) rc.owner = c.owner; return c; } };
  deps = { ...deps, auth };
  if (deps.ops) {
    app.use(codecCors(deps.ops.codec.corsOrigins));
    for (const r of [opsRoutes(deps.ops), codecRoutes(deps.ops.codec)]) app.use(r.routes()).use(r.allowedMethods());
  }
  app.use(chatRoutes(deps));
  app.use(videoRoutes(deps));
  const router = buildRoutes(deps);
  app.use(router.routes());
  // Not thrown: the router then sets the Allow header, and the error middleware writes the JSON body.
  app.use(router.allowedMethods());
  return app;
}
