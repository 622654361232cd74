// Builds the Koa app from its dependencies; listening and shutdown belong to server.ts.
import Koa from 'koa';
import type { Logger } from 'pino';
import { errorMiddleware } from './http/errors.js';
import { buildRoutes, type RouteDeps } from './http/routes.js';

export interface AppDeps extends RouteDeps {
  log: Logger;
}

export function buildApp(deps: AppDeps): Koa {
  const app = new Koa({ proxy: true });
  app.silent = true;
  app.use(async (ctx, next) => {
    const start = performance.now();
    try {
      await next();
    } finally {
      // Path only: queries and headers may carry keys.
      deps.log.debug({ method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round(performance.now() - start) }, 'request');
    }
  });
  app.use(errorMiddleware(deps.log));
  const router = buildRoutes(deps);
  app.use(router.routes());
  // Not thrown: the router then sets the Allow header, and the error middleware writes the JSON body.
  app.use(router.allowedMethods());
  return app;
}
