// The cancel operation of a task collection (POST /v1/tasks/{id}/cancel, POST /v1/videos/{id}/cancel):
// one declaration shape for both kinds, so their answers and documentation cannot drift apart.
import { z } from 'zod';
import type { Caller } from '../infra/auth.js';
import type { CancelAnswer } from '../temporal/cancel.js';
import { sendView } from './body.js';
import { route, type RouteDef } from './route-table.js';

export interface CancelRouteSpec {
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

export function cancelRoute(spec: CancelRouteSpec): RouteDef {
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
          Poll: {
            operationId: spec.pollOperationId,
            parameters: { id: '$response.body#/id' },
            description: 'Poll the task',
          },
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
