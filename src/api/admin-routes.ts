// Admin calls for operators, behind the operator token (KILN_OPERATOR_TOKEN; off while it is unset,
// as the codec endpoints): the read-model rebuild (src/tasks/rebuild/), started or resumed by POST
// and followed by GET, the channels' health (src/channels/admin.ts) and the API keys
// (src/keys/routes.ts), usage, owner limits and releases (src/usage/routes.ts). Documented under
// their own tag, apart from the public API.
import { z } from 'zod';
import { channelAdminRoutes } from '../channels/admin.js';
import type { ChannelState } from '../channels/state.js';
import type { Model } from '../config/models.js';
import { keyAdminRoutes } from '../keys/routes.js';
import type { KeyStore } from '../keys/store.js';
import type { ReadModelRebuild } from '../tasks/rebuild/rebuild.js';
import type { TaskStore } from '../tasks/store/task-store.js';
import { usageAdminRoutes } from '../usage/routes.js';
import type { QuotaStore } from '../usage/store.js';
import { jsonBody } from '../http/body.js';
import { requireOperator } from '../http/operator-token.js';
import { parseInput, route, type RouteDef } from '../http/route-table.js';

export interface AdminDeps {
  rebuild: ReadModelRebuild;
  /** The channels' shared state (GET /admin/v1/channels); absent in tests that do not need it. */
  channels?: ChannelState;
  models?: readonly Model[];
  /** The issued keys (/admin/v1/keys), set only with AUTH_MODE=keys. */
  keys?: KeyStore;
  /** Usage, owner limits and releases (/admin/v1/usage, /admin/v1/owners/…, /admin/v1/tasks/…/release). */
  quota?: QuotaStore;
  /** The read model, where a release finds a task's owner. */
  store?: Pick<TaskStore, 'get'>;
  operatorToken?: string;
}

const WHAT = 'The admin endpoints';
const TAGS = ['admin'];

const RebuildRequest = z
  .object({
    page_size: z
      .number()
      .int()
      .min(1)
      .max(1000)
      .optional()
      .meta({ description: 'Workflows per visibility page (default 100); progress is saved after each page.' }),
    restart: z
      .boolean()
      .optional()
      .meta({ description: 'Start over even when the last rebuild did not finish (default: resume it).' }),
  })
  .strict()
  .meta({ id: 'ReadModelRebuildRequest' });

const count = (description: string) => z.number().int().meta({ description });
const RebuildProgress = z
  .object({
    state: z.enum(['none', 'running', 'done']).meta({
      description: '`none`: no rebuild on record; `running` with `active: false`: interrupted, a POST resumes it.',
    }),
    active: z.boolean().meta({ description: 'An API process holds the rebuild lock and is working on it.' }),
    phase: z.enum(['listing', 'settling', 'done']).optional(),
    started_at: z.number().int().optional(),
    updated_at: z.number().int().optional(),
    finished_at: z.number().int().nullable().optional(),
    since: count('Workflows closed before this (epoch s) are past RETENTION_DAYS and not rebuilt.').optional(),
    page_size: z.number().int().optional(),
    runs: count('How many times a process took the rebuild up (more than 1: it was resumed).').optional(),
    pages: z.number().int().optional(),
    workflows: count('Task workflows read from Temporal.').optional(),
    written: count('Records written (Redis had none, or an earlier state).').optional(),
    unchanged: count('Records Redis already had at the same or a later state, left alone.').optional(),
    unfinished: count('Of those written, tasks still running (also given their place in the queue gauge).').optional(),
    webhooks: count('Webhook delivery states written back.').optional(),
    errors: z.number().int().optional(),
    last_error: z.string().nullable().optional(),
    rate_per_second: z.number().nullable().optional(),
  })
  .meta({ id: 'ReadModelRebuild' });

export function adminRoutes({ rebuild, channels, models, keys, quota, store, operatorToken }: AdminDeps): RouteDef[] {
  return [
    route({
      method: 'post',
      route: '/admin/v1/read-model/rebuild',
      operationId: 'rebuildReadModel',
      tags: TAGS,
      auth: 'operator',
      summary: 'Rebuild the Redis read model from Temporal (start, or resume an interrupted rebuild)',
      description:
        'Rewrites every task within the retention from Temporal: records, views, owner lists, the queue gauge ' +
        'and webhook states, never over a newer state. Runs in the background in one API process at a time; ' +
        'answers at once with the progress. A call while one runs changes nothing. See docs/operating.md.',
      request: { body: RebuildRequest, checkedByHandler: ['body'] },
      responses: { 202: { description: 'Started, resumed or already running: its progress', schema: RebuildProgress } },
      errors: ['invalid_request', 'not_found', 'unsupported_media_type'],
      handler: async (ctx) => {
        requireOperator(ctx, operatorToken, WHAT);
        // The body is optional: an empty POST starts with the defaults.
        let body: unknown = {};
        if (ctx.request.length || ctx.get('transfer-encoding')) {
          await jsonBody()(ctx, async () => undefined);
          body = ctx.request.body;
        }
        const { page_size, restart } = parseInput(RebuildRequest, body, 'body');
        ctx.status = 202;
        ctx.set('Cache-Control', 'no-store');
        ctx.body = await rebuild.start({ pageSize: page_size, restart });
      },
    }),
    route({
      method: 'get',
      route: '/admin/v1/read-model/rebuild',
      operationId: 'readModelRebuildProgress',
      tags: TAGS,
      auth: 'operator',
      summary: 'Progress of the read-model rebuild',
      responses: { 200: { description: 'The last rebuild: running, interrupted or done', schema: RebuildProgress } },
      errors: ['not_found'],
      handler: async (ctx) => {
        requireOperator(ctx, operatorToken, WHAT);
        ctx.set('Cache-Control', 'no-store');
        ctx.body = await rebuild.progress();
      },
    }),
    ...(channels && models ? channelAdminRoutes({ channels, models, operatorToken }) : []),
    ...keyAdminRoutes({ keys, models: models ?? [], operatorToken }),
    // Keys mode names owners by the keys' owner name (the key store is there only then).
    ...(quota && store ? usageAdminRoutes({ quota, store, keysMode: keys !== undefined, operatorToken }) : []),
  ];
}
