// Usage and limits over HTTP. The caller's own usage (GET /v1/usage), and for operators, behind the
// operator token like the other admin calls (src/api/admin-routes.ts): every owner's usage, as
// JSON or CSV (GET /admin/v1/usage), an owner's limits (GET, PATCH /admin/v1/owners/{owner}/limits)
// and the release of the units an uncertain task holds (POST /admin/v1/tasks/{id}/release).
//
// Operators name owners as keys mode shows them: the keys' owner name (`acme`, internally
// `key:acme`); in passthrough mode the owner id itself (64 hex digits, the HMAC of the key). The
// owner is in no metric label: requests are counted by their route template.
import type { RouterContext } from '@koa/router';
import { z } from 'zod';
import { BODY_ERRORS, jsonBody } from '../http/body.js';
import { adminRoute } from '../http/operator-token.js';
import { parseInput, route, type RouteDef } from '../http/route-table.js';
import { OWNER_NAME } from '../infra/callers.js';
import { KilnError } from '../shared/errors.js';
import { TERMINAL_STATUSES } from '../shared/task.js';
import type { TaskStore } from '../tasks/store/task-store.js';
import { LIMIT_NAMES, type LimitName, type LimitsPatch } from '../config/limits.js';
import {
  AdminUsage,
  AdminUsageQuery,
  OwnerLimits,
  OperatorOwner,
  OwnerLimitsPatch,
  TaskRelease,
  Usage,
  UsageCsv,
  UsageQuery,
} from './openapi.js';
import { usageCsv, usageRange, usageRows, type GroupBy, type Ledger } from './report.js';
import type { QuotaStore } from './store.js';

/** Owners whose ledgers an admin report reads at once. */
const OWNER_READS = 16;

/** Keys mode names owners `key:<name>`; operators use the name. */
const KEY_OWNER = 'key:';
const OWNER_ID = /^[a-f0-9]{64}$/;

export interface UsageAdminDeps {
  quota: QuotaStore;
  /** The read model: a task's owner and status, for a release. */
  store: Pick<TaskStore, 'get'>;
  /** AUTH_MODE=keys: owners are named by the keys' owner name. */
  keysMode: boolean;
  operatorToken?: string;
}

/** The owner id behind an owner as an operator names it; invalid_request naming `where` otherwise. */
export function ownerId(name: string, keysMode: boolean, where: string): string {
  if (keysMode) {
    if (!OWNER_NAME.test(name))
      throw new KilnError(
        'invalid_request',
        `${where}: must be an owner name of API keys: 1-64 characters: letters, digits, ".", "_" or "-".`,
      );
    return `${KEY_OWNER}${name}`;
  }
  if (!OWNER_ID.test(name))
    throw new KilnError(
      'invalid_request',
      `${where}: must be an owner id, 64 lowercase hex digits (AUTH_MODE=passthrough: owners are ids, as ` +
        'GET /admin/v1/usage shows them).',
    );
  return name;
}

/** An owner as operators see it: `key:` left out in keys mode. */
export const ownerName = (owner: string, keysMode: boolean): string =>
  keysMode && owner.startsWith(KEY_OWNER) ? owner.slice(KEY_OWNER.length) : owner;

async function report(
  quota: QuotaStore,
  owners: readonly { id: string; name?: string }[],
  days: string[],
  groupBy: GroupBy,
) {
  const ledgers: { owner?: string; ledger: Ledger }[] = [];
  for (let i = 0; i < owners.length; i += OWNER_READS) {
    const batch = owners.slice(i, i + OWNER_READS);
    const read = await Promise.all(batch.map((o) => quota.usage(o.id, days)));
    read.forEach((ledger, j) => ledgers.push({ owner: batch[j].name, ledger }));
  }
  return usageRows(ledgers, groupBy);
}

const unavailable = (err: unknown): never => {
  if (err instanceof KilnError) throw err;
  throw new KilnError('service_unavailable', 'The usage ledger (Redis) cannot be read right now; retry shortly.', 1);
};

/** GET /v1/usage: the caller's own usage. */
export function usageRoutes(quota: QuotaStore): RouteDef[] {
  return [
    route({
      method: 'get',
      route: '/v1/usage',
      operationId: 'getUsage',
      tags: ['usage'],
      summary: "The caller's usage per UTC day and/or model",
      description:
        "Counted from the owner's usage ledger: tasks by the UTC day they were submitted, how they ended, the " +
        'units charged and the upstream time. Every key of one owner sees the same usage. ' +
        'The ledger keeps 400 days. See docs/usage.md.',
      request: { query: UsageQuery },
      responses: { 200: { description: 'The usage report', schema: Usage } },
      errors: ['invalid_request', 'service_unavailable'],
      handler: async (ctx, { caller, query }) => {
        const range = usageRange(query);
        const { data, total } = await report(quota, [{ id: caller.owner }], range.days, query.group_by).catch(
          unavailable,
        );
        ctx.set('Cache-Control', 'no-store');
        ctx.body = { object: 'usage', from: range.from, to: range.to, group_by: query.group_by, data, total };
      },
    }),
  ];
}

const OwnerParam = z.object({
  owner: OperatorOwner.meta({
    description: "In keys mode the keys' owner name (`acme`); otherwise the owner id (64 hex digits).",
  }),
});
const TaskParam = z.object({
  id: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,100}$/, 'must be a task id (task_… or video_…)')
    .meta({ description: 'The task id (`task_…` or `video_…`).' }),
});
const ReleaseQuery = z.object({
  owner: OperatorOwner.optional().meta({
    description:
      "The task's owner (as in the other admin calls), needed only once the task's record has expired from the " +
      'read model.',
  }),
});

/** Why a task that is known holds no units. */
function notHeldWhy(status: string | undefined, reservation: 'not_held' | 'not_found'): string {
  if (reservation === 'not_held' || (status && !TERMINAL_STATUSES.includes(status as never)))
    return `it has not finished (${status ?? 'unfinished'}): its units stay reserved until it ends`;
  if (status === 'uncertain') return 'its units were released already (or it was submitted before quotas were kept)';
  if (status === 'succeeded') return 'it succeeded: its units are charged, not held';
  return `it ended ${status}: its units were released (or charged) when it ended`;
}

export function usageAdminRoutes({ quota, store, keysMode, operatorToken }: UsageAdminDeps): RouteDef[] {
  const limitsOf = async (owner: string, name: string) => {
    const { limits, own } = await quota.ownerLimits(owner);
    return { object: 'owner.limits', owner: name, limits, own, defaults: quota.defaults };
  };
  const ownerParam = (ctx: RouterContext) => {
    const { owner } = parseInput(OwnerParam, ctx.params, 'params');
    return { id: ownerId(owner, keysMode, 'params.owner'), name: owner };
  };

  return [
    adminRoute(operatorToken, {
      method: 'get',
      route: '/admin/v1/usage',
      operationId: 'getOwnersUsage',
      summary: "Every owner's usage (or one's) per UTC day and/or model, as JSON or CSV",
      description:
        'Rows per owner (and day and/or model) of the owners that submitted since `from`, or of the one asked ' +
        'for. CSV with `Accept: text/csv` or `format=csv`: the same rows. See docs/usage.md.',
      request: { query: AdminUsageQuery, checkedByHandler: ['query'] },
      responses: {
        200: {
          description: 'The usage report',
          schema: AdminUsage,
          alternatives: { 'text/csv': UsageCsv },
        },
      },
      errors: ['invalid_request', 'not_found', 'service_unavailable'],
      handler: async (ctx) => {
        const q = parseInput(AdminUsageQuery, ctx.query, 'query');
        const range = usageRange(q);
        const one = q.owner === undefined ? undefined : ownerId(q.owner, keysMode, 'query.owner');
        const ids = one !== undefined ? [one] : await quota.owners(range.fromMs).catch(unavailable);
        const owners = ids.map((id) => ({ id, name: ownerName(id, keysMode) }));
        const { data, total } = await report(quota, owners, range.days, q.group_by).catch(unavailable);
        const csv =
          q.format === 'csv' || (q.format === undefined && ctx.accepts('application/json', 'text/csv') === 'text/csv');
        ctx.vary('Accept');
        if (csv) {
          ctx.type = 'text/csv; charset=utf-8';
          ctx.body = usageCsv(data, q.group_by);
          return;
        }
        ctx.body = {
          object: 'usage',
          from: range.from,
          to: range.to,
          group_by: q.group_by,
          owner: q.owner ?? null,
          data,
          total,
        };
      },
    }),
    adminRoute(operatorToken, {
      method: 'get',
      route: '/admin/v1/owners/:owner/limits',
      operationId: 'getOwnerLimits',
      summary: "An owner's limits: those that apply, its own, and the deployment's defaults",
      request: { params: OwnerParam, checkedByHandler: ['params'] },
      responses: { 200: { description: "The owner's limits", schema: OwnerLimits } },
      errors: ['invalid_request', 'not_found', 'service_unavailable'],
      handler: async (ctx) => {
        const owner = ownerParam(ctx);
        ctx.body = await limitsOf(owner.id, owner.name).catch(unavailable);
      },
    }),
    adminRoute(operatorToken, {
      method: 'patch',
      route: '/admin/v1/owners/:owner/limits',
      operationId: 'updateOwnerLimits',
      summary: "Change an owner's own limits",
      description:
        "Each field: a number (the owner's own limit), null (no limit for this owner, whatever the default) or " +
        '"default" (the deployment\'s default again). The next submit is checked against them, in every API process.',
      request: { params: OwnerParam, body: OwnerLimitsPatch, checkedByHandler: ['params', 'body'] },
      responses: { 200: { description: "The owner's limits after the change", schema: OwnerLimits } },
      errors: ['invalid_request', 'not_found', ...BODY_ERRORS, 'service_unavailable'],
      handler: async (ctx) => {
        const owner = ownerParam(ctx);
        await jsonBody()(ctx, async () => undefined);
        const body = parseInput(OwnerLimitsPatch, ctx.request.body, 'body');
        const patch: LimitsPatch = {};
        const reset: LimitName[] = [];
        for (const n of LIMIT_NAMES) {
          const v = body[n];
          if (v === 'default') reset.push(n);
          else if (v !== undefined) patch[n] = v;
        }
        await quota.setOwnerLimits(owner.id, patch, reset).catch(unavailable);
        ctx.body = await limitsOf(owner.id, owner.name).catch(unavailable);
      },
    }),
    adminRoute(operatorToken, {
      method: 'post',
      route: '/admin/v1/tasks/:id/release',
      operationId: 'releaseTaskUnits',
      summary: 'Release the units an uncertain task holds',
      description:
        "An `uncertain` task's units stay charged (held) until an operator, having checked the upstream, " +
        "releases them: they go back to the owner's daily and monthly quota and leave the usage ledger's units " +
        "(its `released` counts one). The owner comes from the task's record; once that expired, name it with " +
        '`owner`. 404 `not_found`: no such task (no reservation); 409 `not_held`: the task holds no units (it ' +
        'is not uncertain, or they were released already).',
      request: {
        params: TaskParam,
        // The owner rule of this deployment's mode (ownerId checks it), so generated clients send a valid one.
        query: ReleaseQuery.extend({
          owner: ReleaseQuery.shape.owner.meta({
            ...ReleaseQuery.shape.owner.meta(),
            pattern: (keysMode ? OWNER_NAME : OWNER_ID).source,
          }),
        }),
        checkedByHandler: ['params', 'query'],
      },
      responses: { 200: { description: 'Released', schema: TaskRelease } },
      errors: ['invalid_request', 'not_found', 'not_held', 'service_unavailable'],
      handler: async (ctx) => {
        const { id } = parseInput(TaskParam, ctx.params, 'params');
        const q = parseInput(ReleaseQuery, ctx.query, 'query');
        const named = q.owner === undefined ? undefined : ownerId(q.owner, keysMode, 'query.owner');
        const record = await store.get(id).catch(unavailable);
        if (record && named !== undefined && named !== record.owner)
          throw new KilnError(
            'invalid_request',
            `query.owner: task ${id} belongs to "${ownerName(record.owner, keysMode)}", not "${q.owner}".`,
          );
        const owner = record?.owner ?? named;
        if (owner === undefined)
          throw new KilnError(
            'not_found',
            `No task ${id} in the read model (its record may have expired): name its owner with ?owner=.`,
          );
        const outcome = await quota.release(owner, id).catch(unavailable);
        if (outcome === 'released') {
          ctx.body = { id, object: 'task.release', released: true };
          return;
        }
        if (outcome === 'not_found' && !record)
          throw new KilnError('not_found', `No reservation for task ${id} of owner "${q.owner}": nothing to release.`);
        throw new KilnError(
          'not_held',
          `Task ${id} holds no units to release: ${notHeldWhy(record?.status, outcome)}. ` +
            "Only an uncertain task's units are held.",
        );
      },
    }),
  ];
}
