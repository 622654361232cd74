// The read operations of a task collection, poll (GET /v1/tasks/{id}, GET /v1/videos/{id}) and list
// (GET /v1/tasks, GET /v1/videos): one declaration shape for both kinds, so their long-poll
// handling, headers and documentation cannot drift apart.
import { z } from 'zod';
import type { Caller } from '../infra/auth.js';
import type { ViewText } from '../infra/poll.js';
import type { WaitAsk } from '../infra/waits.js';
import { sendJsonText, sendView } from './body.js';
import { route, type RouteDef } from './route-table.js';
import { PREFERENCE_APPLIED, PreferHeader, sendWaitApplied, WAIT_DESCRIPTION, waitAsked, WaitQuery } from './wait.js';

export interface PollRouteSpec {
  /** The Koa route, e.g. `/v1/tasks/:id`. */
  route: string;
  operationId: string;
  tags: string[];
  summary: string;
  /** Added to the shared description of waits. */
  description?: string;
  /** The id parameter's schema. */
  id: z.ZodType;
  /** The task's schema and what the 200 answer is called. */
  schema: z.ZodType;
  answer: string;
  /** What Retry-After says, and for which states it is sent. */
  retryAfter: string;
  pollAfterSeconds: number;
  get(caller: Caller, id: string, wait?: WaitAsk): Promise<ViewText & { waited?: boolean }>;
}

/** What every GET operation of a collection declares the same way. */
const getOperation = (spec: { route: string; operationId: string; tags: string[]; summary: string }) => ({
  method: 'get' as const,
  route: spec.route,
  operationId: spec.operationId,
  tags: spec.tags,
  summary: spec.summary,
});

export function pollRoute(spec: PollRouteSpec): RouteDef {
  const retryAfter = { 'Retry-After': { description: spec.retryAfter, schema: { type: 'integer' as const } } };
  return route({
    ...getOperation(spec),
    description: spec.description ? `${WAIT_DESCRIPTION} ${spec.description}` : WAIT_DESCRIPTION,
    request: {
      params: z.object({ id: spec.id }),
      query: WaitQuery,
      headers: PreferHeader,
      checkedByHandler: ['query'],
    },
    responses: {
      200: { description: spec.answer, schema: spec.schema, headers: { ...retryAfter, ...PREFERENCE_APPLIED } },
    },
    errors: ['not_found', 'rate_limited', 'invalid_request'],
    handler: async (ctx, { caller, params }) => {
      const wait = waitAsked(ctx, ctx.query.wait, 'query');
      const view = await spec.get(caller, String((params as { id: string }).id), wait);
      sendWaitApplied(ctx, wait, view.waited === true);
      sendView(ctx, view, spec.pollAfterSeconds);
    },
  });
}

export interface ListRouteSpec<Q> {
  route: string;
  operationId: string;
  tags: string[];
  summary: string;
  description?: string;
  query: z.ZodType<Q>;
  schema: z.ZodType;
  answer: string;
  /** The page as JSON text (stored items joined, never parsed). */
  list(caller: Caller, query: Q): Promise<string>;
}

export function listRoute<Q>(spec: ListRouteSpec<Q>): RouteDef {
  return route({
    ...getOperation(spec),
    ...(spec.description ? { description: spec.description } : {}),
    request: { query: spec.query },
    responses: { 200: { description: spec.answer, schema: spec.schema } },
    errors: ['invalid_request', 'service_unavailable'],
    handler: async (ctx, { caller, query }) => {
      sendJsonText(ctx, await spec.list(caller, query as Q));
    },
  });
}
