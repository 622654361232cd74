// The image routes' table: each entry is mounted, validated and documented from one declaration
// (see http/route-table.ts). Handlers stay thin: call one service function, set status and body.
import { z } from 'zod';
import { KilnError, TASK_FAILURE_CODES } from '../shared/errors.js';
import { parseIdempotencyKey, REPLAYED_HEADER } from '../shared/idempotency.js';
import { BODY_ERRORS, jsonBody, redirectTo, sendJsonText, sendSubmitted } from '../http/body.js';
import { IdempotencyKeyHeader, idLink, redirectResponse } from '../http/openapi.js';
import { route, type RouteDef } from '../http/route-table.js';
import { collectionRoutes, wholeNumber, type Collection } from '../tasks/routes.js';
import { BatchWait, PREFERENCE_APPLIED, PreferHeader, sendWaitApplied, waitAsked } from '../tasks/wait-query.js';
import type { ImageTaskService } from './service.js';
import { SubmitBody, validateSubmit } from './validate.js';
import { WebhookQuery } from '../webhooks/openapi.js';
import { validateDirect, type DirectService } from './direct.js';
import { BatchList, ImageTask, RecentList, SubmitResponse, TaskId } from './openapi.js';
import { ADMISSION_ERRORS } from '../usage/admission.js';

export interface ImageRouteDeps {
  tasks: ImageTaskService;
  pollAfterSeconds: number;
  /** Answers generateContent on `form: direct` models. */
  direct?: DirectService;
}

const BatchBody = z.object({
  // Any string: one Kiln cannot have issued (however long) is a not_found item, not a refused batch.
  ids: z.array(z.string()).min(1, 'ids must not be empty').max(100, 'at most 100 ids per request'),
  wait: BatchWait,
});

const ListQuery = z
  .object({
    days: wholeNumber(1, 3).default(3).meta({ description: 'Look-back window in days' }),
    limit: wholeNumber(1, 100).default(20).meta({ description: 'Items returned' }),
    before_created_at: wholeNumber(0, 99_999_999_99)
      .optional()
      .meta({ description: 'Cursor: created_at of the last item of the previous page' }),
    before_id: z
      .string()
      .max(256)
      .optional()
      .meta({ description: 'Cursor: id of that item; only together with before_created_at' }),
  })
  .refine((q) => q.before_id === undefined || q.before_created_at !== undefined, {
    message: 'before_id must be sent together with before_created_at',
    path: ['before_id'],
  });

export const TASKS: Collection<z.output<typeof ListQuery>> = {
  path: '/v1/tasks',
  noun: 'Task',
  plural: 'Tasks',
  tag: 'image tasks',
  id: TaskId,
  item: ImageTask,
  list: {
    summary: 'Recent tasks of the caller, newest first',
    query: ListQuery,
    schema: RecentList,
    answer: 'Recent tasks',
  },
  poll: {
    summary: 'One task',
    answer: 'The task in its state-dependent form',
    retryAfter: 'While unfinished: seconds until the next useful poll.',
  },
};

const REPLAYED = {
  [REPLAYED_HEADER]: {
    description: '`true` when an Idempotency-Key repeated an earlier submit: the answer is that task.',
    schema: { type: 'string' as const },
  },
};

export function imageRoutes({ tasks, pollAfterSeconds, direct }: ImageRouteDeps): RouteDef[] {
  return [
    // @google/genai 3 sends generateContent to /v1 unless told another apiVersion: the same
    // operation answers there too.
    ...(['v1beta', 'v1'] as const).map((version) =>
      route({
        method: 'post',
        route: `/${version}/models/:modelAction`,
        path: `/${version}/models/{model}:generateContent`,
        operationId: version === 'v1beta' ? 'submitImageTask' : 'submitImageTaskV1',
        tags: ['image tasks'],
        summary:
          version === 'v1beta'
            ? 'Submit an image task (generateContent form)'
            : 'Submit an image task (generateContent form, under /v1 as @google/genai 3 sends it)',
        description:
          'Answers 202 at once; poll `polling_url`. The request must resolve ' +
          'to `output=url` (query or `generationConfig.imageConfig.output`). ' +
          'Body at most 2 MB after decompression; `Content-Encoding` gzip or br. ' +
          'Optional `Idempotency-Key` header (1-255 characters 0x21-0x7E, scoped to ' +
          'the caller): a repeat with the same key and request returns the same task ' +
          '(202, header `Idempotent-Replayed: true`, the task as it is ' +
          'now); with another request, 422 `idempotency_key_reused`.',
        request: {
          params: z.object({ model: z.string().meta({ description: 'Image model id (GET /v1/models)' }) }),
          query: z.object({ output: z.literal('url').optional(), ...WebhookQuery }),
          headers: IdempotencyKeyHeader,
          body: SubmitBody,
          // Koa cannot split `{model}:generateContent`, direct-form models also take output=base64,
          // and validateSubmit answers with the contract's own error codes.
          checkedByHandler: ['params', 'query', 'body'],
        },
        // Gemini clients (the @google/genai SDK) send their key as x-goog-api-key, not as a bearer token.
        credentials: (ctx) =>
          ctx.get('authorization') || (ctx.get('x-goog-api-key') ? `Bearer ${ctx.get('x-goog-api-key')}` : undefined),
        responses: {
          202: {
            description: 'Accepted (or, for a repeated Idempotency-Key, the earlier task)',
            schema: SubmitResponse,
            headers: REPLAYED,
            links: {
              GetTask: idLink('getTask', 'Poll the task'),
              GetTaskContent: idLink('getTaskContent', 'Its first image, once succeeded'),
              BatchGetTasks: {
                operationId: 'batchGetTasks',
                requestBody: { ids: ['$response.body#/id'] },
                description: 'Poll it in a batch',
              },
              CancelTask: idLink('cancelTask', 'Cancel it'),
            },
          },
        },
        errors: [
          'invalid_request',
          'output_must_be_url',
          'prompt_too_long',
          'too_many_reference_images',
          'invalid_reference_image_url',
          'invalid_reference_image_scheme',
          'model_not_found',
          'not_found',
          'idempotency_key_reused',
          // Direct form: how the task ended while the request waited (canceled, or the upstream's failure).
          ...TASK_FAILURE_CODES,
          'invalid_webhook_url',
          ...BODY_ERRORS,
          'queue_full',
          ...ADMISSION_ERRORS,
        ],
        handler: async (ctx, { caller }) => {
          const { modelAction } = ctx.params;
          const cut = modelAction.lastIndexOf(':');
          if (cut < 0 || modelAction.slice(cut + 1) !== 'generateContent')
            throw new KilnError('not_found', 'Use POST /v1beta/models/{model}:generateContent.');
          const model = tasks.model(modelAction.slice(0, cut), caller);
          const idempotencyKey = parseIdempotencyKey(ctx.headers['idempotency-key']);
          const webhook = tasks.webhookTarget(ctx.query.webhook, ctx.query.webhook_events);
          await jsonBody()(ctx, async () => undefined);
          const output =
            typeof ctx.query.output === 'string' ? ctx.query.output : Array.isArray(ctx.query.output) ? '' : undefined;
          if (model.form === 'direct' && direct) {
            const asked = validateDirect(ctx.request.body, output, model);
            const { taskId, body, replayed } = await direct.generate(
              caller,
              model,
              asked.request,
              asked.output,
              idempotencyKey,
              webhook,
            );
            ctx.set('X-Kiln-Task-Id', taskId);
            sendSubmitted(ctx, 200, body, replayed);
            return;
          }
          const request = validateSubmit(ctx.request.body, output, model);
          const { response, replayed } = await tasks.submit(caller, model, request, { idempotencyKey, webhook });
          sendSubmitted(ctx, 202, response, replayed);
        },
      }),
    ),

    route({
      method: 'post',
      route: '/v1/tasks/batch-get',
      operationId: 'batchGetTasks',
      tags: ['image tasks'],
      summary: 'Poll 1 to 100 tasks at once',
      description:
        'With `"wait": N` or `Prefer: wait=N` (1-60 s) a long-poll that answers when any listed task ' +
        'changes status, or after N s (at once when a listed task is finished or not found).',
      request: { body: BatchBody, headers: PreferHeader },
      responses: {
        200: {
          description: 'One item per distinct id, in first-occurrence order',
          schema: BatchList,
          headers: PREFERENCE_APPLIED,
        },
      },
      errors: ['invalid_request', 'rate_limited', ...BODY_ERRORS],
      handler: async (ctx, { caller, body }) => {
        const wait = waitAsked(ctx, body.wait, 'body');
        const { json, waited } = await tasks.batchGet(caller, body.ids, wait);
        sendWaitApplied(ctx, wait, waited);
        sendJsonText(ctx, json);
      },
    }),

    ...collectionRoutes(TASKS, tasks, pollAfterSeconds),

    route({
      method: 'get',
      route: '/v1/tasks/:id/content',
      operationId: 'getTaskContent',
      tags: ['image tasks'],
      summary: 'Redirect to the first image of a finished task',
      request: { params: z.object({ id: TaskId }) },
      responses: {
        302: redirectResponse('the first image URL', 'Image URL'),
      },
      errors: ['not_found', 'task_not_ready', 'task_failed'],
      handler: async (ctx, { caller, params }) => {
        const url = await tasks.contentUrl(caller, params.id);
        redirectTo(ctx, url);
      },
    }),
  ];
}
