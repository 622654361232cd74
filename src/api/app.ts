// Builds the Koa app from its dependencies; listening and shutdown belong to server.ts. Every
// route comes from a feature's route table, mounted on one router; /openapi.json documents the
// same list.
import Koa from 'koa';
import Router from '@koa/router';
import type { Logger } from 'pino';
import { errorMiddleware } from '../http/errors.js';
import { googleErrors } from '../http/google-errors.js';
import { GEMINI_VIDEO_PATHS, geminiVideoRoutes, type GeminiVideoDeps } from '../gemini-operations/routes.js';
import { chatRoutes } from '../chat/routes.js';
import type { ChatService } from '../chat/service.js';
import { VIDEOS, videoRoutes } from '../video/routes.js';
import type { VideoTaskService } from '../video/service.js';
import { imageRoutes, TASKS, type ImageRouteDeps } from '../image/routes.js';
import { commonRoutes, type CommonRouteDeps } from './common-routes.js';
import { adminRoutes, type AdminDeps } from './admin-routes.js';
import { codecCors, codecRoutes, type CodecDeps } from './codec-routes.js';
import { consoleStatic, type ConsoleOptions } from './console.js';
import { withFastReads, type FastReadDeps, type KoaListener } from '../tasks/fast-reads.js';
import { fastList, fastPoll } from '../tasks/routes.js';
import { observe, requestObserver } from '../http/observe.js';
import { opsRoutes, type OpsDeps } from './ops-routes.js';
import { mountRoutes, type RouteDef } from '../http/route-table.js';
import { currentRequest } from '../ops/request-context.js';
import type { Authenticator } from '../infra/callers.js';
import { usageRoutes } from '../usage/routes.js';
import type { QuotaStore } from '../usage/store.js';
import { webhookRoutes } from '../webhooks/routes.js';
import { GEMINI_BATCH_PATHS, geminiBatchRoutes } from '../gemini-batch/routes.js';
import type { GeminiBatches } from '../gemini-batch/service.js';
import { openaiImageRoutes } from '../openai-images/routes.js';
import type { OpenAIImagesService } from '../openai-images/service.js';
import type { WebhookSecrets } from '../webhooks/service.js';

export interface AppDeps extends ImageRouteDeps, CommonRouteDeps {
  auth: Authenticator;
  log: Logger;
  /** Operator endpoints, metrics and tracing (src/api/runtime.ts wires them). */
  ops?: OpsDeps & { codec: CodecDeps; tracer?: import('@opentelemetry/api').Tracer };
  chat: ChatService;
  videos: VideoTaskService;
  /** The webhook signing secret endpoints. */
  webhooks?: WebhookSecrets;
  /** The usage ledger: the caller's own usage (GET /v1/usage). */
  quota?: QuotaStore;
  /** Operator-token admin calls (the read-model rebuild). */
  admin?: AdminDeps;
  /** POST /v1/images/generations and /v1/images/edits (OpenAI Images form). */
  openaiImages?: OpenAIImagesService;
  /** The Gemini video operations (predictLongRunning): the blob store and public base URL they need. */
  geminiVideos?: GeminiVideoDeps;
  /** Gemini batch mode (`ai.batches`): /v1beta/models/{model}:batchGenerateContent, /v1beta/batches. */
  geminiBatches?: GeminiBatches;
  /** The built console (default console/dist). */
  consoleDir?: string;
  /** The console's CSP media origins (S3) and its /console/config.json. */
  console?: ConsoleOptions;
}

export type KilnApp = Koa & {
  /** The one router all route tables are mounted on: what the app serves. */
  readonly router: Router;
  /** The mounted operations, as /openapi.json documents them. */
  readonly operations: readonly RouteDef[];
};

/**
 * Koa whose request listener answers polls and list pages first, below Koa (src/tasks/fast-reads.ts),
 * and hands every other request to Koa's own. `listen` serves with it too (it calls `callback()`).
 */
class FastReadsKoa extends Koa {
  /** Set once the routes are built; unset (tracing on), every request is Koa's. */
  fastReads?: FastReadDeps;

  override callback(): KoaListener {
    const koa = super.callback();
    return this.fastReads ? withFastReads(this.fastReads, koa) : koa;
  }
}

export function buildApp(deps: AppDeps): KilnApp {
  const app = new FastReadsKoa({ proxy: true });
  app.silent = true;
  const observer = requestObserver({ log: deps.log, metrics: deps.ops?.metrics, stopping: deps.ops?.stopping });
  const tracer = deps.ops?.tracer;
  app.use(observe(observer, tracer));
  app.use(errorMiddleware(deps.log));
  // The Gemini endpoints (video operations, batch mode) answer their errors in Google's shape, auth
  // and body errors and unmatched paths under them included; only those that are mounted, so a
  // disabled surface's paths keep Kiln's 404.
  const googlePaths = [
    ...(deps.geminiVideos ? [GEMINI_VIDEO_PATHS] : []),
    ...(deps.geminiBatches ? [GEMINI_BATCH_PATHS] : []),
  ];
  if (googlePaths.length > 0) app.use(googleErrors(googlePaths, deps.log));
  // The caller's owner hash goes on the request's log line.
  const inner = deps.auth;
  const auth: Authenticator = {
    authenticate: async (h) => {
      const c = await inner.authenticate(h);
      const rc = currentRequest();
      if (rc) rc.owner = c.owner;
      return c;
    },
  };
  const operations: RouteDef[] = [
    ...(deps.ops ? [...opsRoutes(deps.ops, () => operations), ...codecRoutes(deps.ops.codec)] : []),
    // Before the generic /v1beta/models/:modelAction (image) and /v1/files/:name (common) routes,
    // which would otherwise take `{model}:predictLongRunning` and `{file}:download`.
    ...(deps.geminiVideos ? geminiVideoRoutes(deps.videos, deps.pollAfterSeconds, deps.geminiVideos) : []),
    ...commonRoutes(deps),
    ...chatRoutes(deps),
    ...videoRoutes(deps),
    // Before the image routes, whose /v1beta/models/:modelAction would take `:batchGenerateContent`.
    ...(deps.geminiBatches ? geminiBatchRoutes(deps.geminiBatches) : []),
    ...imageRoutes(deps),
    ...(deps.openaiImages ? openaiImageRoutes(deps.openaiImages) : []),
    ...(deps.webhooks ? webhookRoutes(deps.webhooks) : []),
    ...(deps.quota ? usageRoutes(deps.quota) : []),
    ...(deps.admin ? adminRoutes(deps.admin) : []),
  ];
  if (deps.ops) app.use(codecCors(deps.ops.codec.corsOrigins));
  // The Kiln Console's static files at /console (and `GET /` redirects there): not API operations,
  // so outside the route tables and /openapi.json.
  app.use(consoleStatic({ ...deps.console, ...(deps.consoleDir ? { dir: deps.consoleDir } : {}) }));
  const router = new Router();
  mountRoutes(router, operations, auth);
  app.use(router.routes());
  // Not thrown: the router then sets the Allow header, and the error middleware writes the JSON body.
  app.use(router.allowedMethods());
  // Polls and list pages below Koa (src/tasks/fast-reads.ts); with tracing on, every request is Koa's.
  if (!tracer) {
    const reads = [
      fastPoll(TASKS, deps.tasks, deps.pollAfterSeconds),
      fastPoll(VIDEOS, deps.videos, deps.pollAfterSeconds),
    ];
    const lists = [fastList(TASKS, deps.tasks), fastList(VIDEOS, deps.videos)];
    app.fastReads = { auth: inner, observer, log: deps.log, reads, lists };
  }
  return Object.assign(app, { router, operations });
}
