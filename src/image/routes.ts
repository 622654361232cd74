// Thin handlers: parse with zod, call one service function, set status and body.
import Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import type { Model } from '../config.js';
import { KilnError } from '../shared/errors.js';
import type { Authenticator, Caller } from '../infra/auth.js';
import type { FsBlobStore } from '../infra/blobs.js';
import type { TaskService } from './service.js';
import { validateSubmit } from './validate.js';
import { validateDirect, type DirectService } from './direct.js';
import { UNFINISHED_STATUSES, type TaskStatus } from '../shared/task.js';
import { jsonBody } from '../http/body.js';

export interface RouteDeps {
  auth: Authenticator;
  models: Model[];
  tasks: TaskService;
  blobs: FsBlobStore;
  pollAfterSeconds: number;
  /** Answers generateContent on `form: direct` models. */
  direct?: DirectService;
}

export const BatchBody = z.object({ ids: z.array(z.string().max(256)).min(1, 'ids must not be empty').max(100, 'at most 100 ids per request') });
const intParam = (min: number, max: number) => z.string().regex(/^\d{1,10}$/, 'must be a whole number').transform(Number).pipe(z.number().int().min(min).max(max));
export const ListQuery = z.object({
  days: intParam(1, 3).default(3),
  limit: intParam(1, 100).default(20),
  before_created_at: intParam(0, 99_999_999_99).optional(),
  before_id: z.string().max(256).optional(),
}).refine((q) => q.before_id === undefined || q.before_created_at !== undefined, { message: 'before_id must be sent together with before_created_at', path: ['before_id'] });

function parse<T>(schema: z.ZodType<T>, value: unknown, where: string): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const i = r.error.issues[0];
  const path = i.path.length ? `${where}.${i.path.join('.')}` : where;
  throw new KilnError('invalid_request', `${path}: ${i.message}`);
}

export function buildRoutes({ auth, models, tasks, blobs, pollAfterSeconds, direct }: RouteDeps): Router {
  const router = new Router();
  const caller = (ctx: Context): Promise<Caller> => auth.authenticate(ctx.get('authorization') || undefined);

  router.get('/healthz', (ctx) => { ctx.body = { status: 'ok' }; });

  router.get('/v1/models', async (ctx) => {
    await caller(ctx);
    ctx.body = {
      object: 'list',
      data: models.map((m) => ({ id: m.id, object: 'model', created: 0, owned_by: 'kiln', kind: m.kind, ...('form' in m ? { form: m.form } : {}), description: m.description ?? null })),
    };
  });

  router.post('/v1beta/models/:modelAction', async (ctx) => {
    // Gemini clients (the @google/genai SDK) send their key as x-goog-api-key, not as a bearer token.
    const googKey = ctx.get('x-goog-api-key');
    const who = ctx.get('authorization') || !googKey ? await caller(ctx) : await auth.authenticate(`Bearer ${googKey}`);
    const { modelAction } = ctx.params;
    const cut = modelAction.lastIndexOf(':');
    if (cut < 0 || modelAction.slice(cut + 1) !== 'generateContent') throw new KilnError('not_found', 'Use POST /v1beta/models/{model}:generateContent.');
    const model = tasks.model(modelAction.slice(0, cut));
    await jsonBody()(ctx, async () => undefined);
    const output = typeof ctx.query.output === 'string' ? ctx.query.output : Array.isArray(ctx.query.output) ? '' : undefined;
    if (model.form === 'direct' && direct) {
      const asked = validateDirect(ctx.request.body, output, model);
      const { taskId, body } = await direct.generate(who, model, asked.request, asked.output);
      ctx.set('X-Kiln-Task-Id', taskId);
      ctx.body = body;
      return;
    }
    const request = validateSubmit(ctx.request.body, output, model);
    ctx.status = 202;
    ctx.body = await tasks.submit(who, model, request);
  });

  router.get('/v1/tasks', async (ctx) => {
    const who = await caller(ctx);
    ctx.body = await tasks.list(who, parse(ListQuery, ctx.query, 'query'));
  });

  router.post('/v1/tasks/batch-get', async (ctx) => {
    const who = await caller(ctx);
    await jsonBody()(ctx, async () => undefined);
    const { ids } = parse(BatchBody, ctx.request.body, 'body');
    ctx.body = await tasks.batchGet(who, ids);
  });

  router.get('/v1/tasks/:id', async (ctx) => {
    const task = await tasks.get(await caller(ctx), ctx.params.id);
    if (UNFINISHED_STATUSES.includes(task.status as TaskStatus)) ctx.set('Retry-After', String(pollAfterSeconds));
    ctx.body = task;
  });

  router.get('/v1/tasks/:id/content', async (ctx) => {
    const url = await tasks.contentUrl(await caller(ctx), ctx.params.id);
    ctx.status = 302;
    ctx.redirect(url);
  });

  router.get('/v1/files/:name', async (ctx) => {
    const file = await blobs.open(ctx.params.name);
    if (!file) throw new KilnError('not_found', 'No such file.');
    ctx.type = file.type;
    ctx.length = file.size;
    // Names are random and content never changes under a name.
    ctx.set('Cache-Control', 'public, max-age=31536000, immutable');
    ctx.body = file.stream;
  });

  return router;
}
