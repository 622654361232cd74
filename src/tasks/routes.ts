// The operations of a task collection, the same for image tasks (/v1/tasks) and videos (/v1/videos):
// poll, list and cancel. Each kind gives one `Collection` entry (paths, operation ids and tags are
// derived from it), so their long-poll handling, headers and documentation cannot drift apart.
import { z } from 'zod';
import type { Caller } from '../infra/callers.js';
import type { ViewText } from './poll.js';
import type { WaitAsk } from './waits.js';
import type { CancelAnswer } from './cancel.js';
import { sendJsonText, sendView } from '../http/body.js';
import type { FastList, FastRead } from './fast-reads.js';
import { route, type RouteDef } from '../http/route-table.js';
import { idLink } from '../http/openapi.js';
import {
  PREFERENCE_APPLIED,
  PreferHeader,
  sendWaitApplied,
  WAIT_DESCRIPTION,
  waitAsked,
  WaitQuery,
} from './wait-query.js';

/** What a service answers for a collection's operations. */
export interface CollectionService<Q> {
  get(caller: Caller, id: string, wait?: WaitAsk): Promise<ViewText & { waited?: boolean }>;
  /** `get` without `wait` when memory answers it, with no I/O; undefined: ask `get`. */
  peek?(caller: Caller, id: string): ViewText | undefined;
  /** The page as JSON text or its UTF-8 bytes (stored items joined, never parsed). */
  list(caller: Caller, query: Q): Promise<string | Buffer>;
  cancel(caller: Caller, id: string): Promise<CancelAnswer>;
}

/** One kind of task, as its documentation names it. */
export interface Collection<Q> {
  /** e.g. `/v1/tasks`; the item is `<path>/:id`. */
  path: string;
  /** Operation ids are `list<plural>`, `get<noun>` and `cancel<noun>`. */
  noun: string;
  plural: string;
  tag: string;
  /** The id parameter's schema (documented; the service checks it and answers not_found). */
  id: z.ZodType;
  /** The task's schema, as a poll returns it. */
  item: z.ZodType;
  list: { summary: string; description?: string; query: z.ZodType<Q>; schema: z.ZodType; answer: string };
  poll: {
    summary: string;
    /** Added to the shared description of waits. */
    description?: string;
    answer: string;
    /** What Retry-After says, and for which states it is sent. */
    retryAfter: string;
  };
}

/** The list, poll and cancel operations of one collection. */
export function collectionRoutes<Q>(c: Collection<Q>, service: CollectionService<Q>, pollAfterSeconds: number) {
  const tags = [c.tag];
  const item = { id: c.id, schema: c.item, pollAfterSeconds };
  return [
    listRoute({ ...c.list, route: c.path, operationId: `list${c.plural}`, tags, list: (a, q) => service.list(a, q) }),
    pollRoute({
      ...c.poll,
      ...item,
      route: `${c.path}/:id`,
      operationId: `get${c.noun}`,
      tags,
      get: (caller, id, wait) => service.get(caller, id, wait),
    }),
    cancelRoute({
      ...item,
      route: `${c.path}/:id/cancel`,
      operationId: `cancel${c.noun}`,
      tags,
      pollOperationId: `get${c.noun}`,
      cancel: (caller, id) => service.cancel(caller, id),
    }),
  ];
}

/** A collection's list page as the fast read path serves it (same query schema, same service call). */
export const fastList = <Q>(c: Collection<Q>, service: CollectionService<Q>): FastList => ({
  path: c.path,
  query: c.list.query,
  list: (caller, query: Q) => service.list(caller, query),
});

/** A collection's poll as the fast read path serves it (same route template, same service call). */
export const fastPoll = <Q>(c: Collection<Q>, service: CollectionService<Q>, pollAfterSeconds: number): FastRead => ({
  prefix: `${c.path}/`,
  route: `${c.path}/:id`,
  get: (caller, id) => service.get(caller, id),
  peek: service.peek && ((caller, id) => service.peek!(caller, id)),
  pollAfterSeconds,
});

/**
 * A whole number written in a query string: digits only, so "1e1", " 5" or "5.0" are refused, not
 * coerced. A preprocess (not a string pipe) so the document shows the integer a client sends, with
 * the same bounds this enforces.
 */
export const wholeNumber = (min: number, max: number) =>
  z.preprocess((v, ctx) => {
    if (typeof v !== 'string') ctx.addIssue({ code: 'invalid_type', expected: 'string', input: v });
    else if (!/^\d{1,10}$/.test(v)) ctx.addIssue({ code: 'custom', message: 'must be a whole number', input: v });
    else return Number(v);
    return v;
  }, z.number().int().min(min).max(max));

interface PollRouteSpec {
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

function pollRoute(spec: PollRouteSpec): RouteDef {
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

interface ListRouteSpec<Q> {
  route: string;
  operationId: string;
  tags: string[];
  summary: string;
  description?: string;
  query: z.ZodType<Q>;
  schema: z.ZodType;
  answer: string;
  /** The page as JSON text or its UTF-8 bytes (stored items joined, never parsed). */
  list(caller: Caller, query: Q): Promise<string | Buffer>;
}

function listRoute<Q>(spec: ListRouteSpec<Q>): RouteDef {
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

interface CancelRouteSpec {
  /** The Koa route, e.g. `/v1/tasks/:id/cancel`. */
  route: string;
  operationId: string;
  tags: string[];
  /** The id parameter's schema (documented; the service checks it and answers not_found). */
  id: z.ZodType;
  /** The task's schema, as a poll returns it. */
  schema: z.ZodType;
  /** The poll operation the answer's id feeds. */
  pollOperationId: string;
  pollAfterSeconds: number;
  cancel(caller: Caller, id: string): Promise<CancelAnswer>;
}

function cancelRoute(spec: CancelRouteSpec): RouteDef {
  return route({
    method: 'post',
    route: spec.route,
    operationId: spec.operationId,
    tags: spec.tags,
    summary: 'Cancel an unfinished task',
    description:
      "Cancels the task's workflow (the Temporal Web UI shows the owner as who canceled it) and aborts its " +
      'running upstream call. The task ends `failed` with `error.code: "canceled"`; the message says whether ' +
      'the request may already have reached a non-idempotent upstream (which may still bill for it). The answer ' +
      'waits up to 3 s for that state and otherwise shows the task as it is (poll on). A finished task is ' +
      'answered 200, unchanged; cancelling twice is harmless. Works while every worker is down: the task ends ' +
      'canceled once one runs.',
    request: { params: z.object({ id: spec.id }), checkedByHandler: ['params'] },
    responses: {
      202: {
        description: 'Cancel requested: the task (usually failed / canceled already)',
        schema: spec.schema,
        headers: {
          'Retry-After': {
            description: 'While still unfinished: seconds until the next useful poll.',
            schema: { type: 'integer' },
          },
        },
        links: {
          Poll: idLink(spec.pollOperationId, 'Poll the task'),
        },
      },
      200: { description: 'The task had finished: unchanged', schema: spec.schema },
    },
    errors: ['not_found', 'service_unavailable'],
    handler: async (ctx, { caller }) => {
      const answer = await spec.cancel(caller, String(ctx.params.id));
      ctx.status = answer.code;
      sendView(ctx, answer, spec.pollAfterSeconds);
    },
  });
}
