// The Gemini batch routes (`ai.batches` of @google/genai against the Gemini Developer API), one
// declaration each (see http/route-table.ts), under /v1beta and under /v1: @google/genai 3 sends
// its batch calls to /v1 unless told another apiVersion. app.ts mounts them before the image routes,
// whose `/v1beta/models/:modelAction` would otherwise take `:batchGenerateContent`; every error on
// these paths is answered in Google's shape (http/google-errors.ts).
import type { RouterContext } from '@koa/router';
import { z } from 'zod';
import { BODY_ERRORS, jsonBody } from '../http/body.js';
import { googleErrorSchema } from '../http/google-errors.js';
import { IdempotencyKeyHeader } from '../http/openapi.js';
import { route, type RouteDef } from '../http/route-table.js';
import { KilnError } from '../shared/errors.js';
import { parseIdempotencyKey, REPLAYED_HEADER } from '../shared/idempotency.js';
import { wholeNumber } from '../tasks/routes.js';
import { BatchList, BatchOperation, Empty } from './openapi.js';
import { BATCH_LIMITS, CreateBodyDoc } from './request.js';
import { PAGE_SIZE, type GeminiBatches } from './service.js';

/** The paths whose errors are Google-shaped (app.ts installs googleErrors with it). */
export const GEMINI_BATCH_PATHS = /^\/v1(beta)?\/(batches(\/|$)|models\/[^/]+:batchGenerateContent$)/;

const VERSIONS = ['v1beta', 'v1'] as const;

/** Google's SDKs send the key as x-goog-api-key; a bearer token works as everywhere. */
const credentials = (ctx: RouterContext) =>
  ctx.get('authorization') || (ctx.get('x-goog-api-key') ? `Bearer ${ctx.get('x-goog-api-key')}` : undefined);

const common = { tags: ['gemini batch'], credentials, errorBody: googleErrorSchema };
const BatchId = z.object({
  id: z.string().meta({
    description: 'Batch id, `batch_` and 32 hex digits (the last part of `name`); the whole `name` also works',
    example: 'batch_0123456789abcdef0123456789abcdef',
  }),
});

const ListQuery = z.object({
  pageSize: wholeNumber(0, PAGE_SIZE.max)
    .optional()
    .meta({ description: `Batches per page, at most ${PAGE_SIZE.max}; 0 or absent: ${PAGE_SIZE.default}` }),
  pageToken: z.string().max(512).optional().meta({ description: 'The nextPageToken of the previous page' }),
});

const MB = BATCH_LIMITS.bodyBytes / (1024 * 1024);

export function geminiBatchRoutes(batches: GeminiBatches): RouteDef[] {
  return VERSIONS.flatMap((v) => versionRoutes(batches, v));
}

function versionRoutes(batches: GeminiBatches, v: (typeof VERSIONS)[number]): RouteDef[] {
  // The /v1 operations are the same; their ids end in V1.
  const id = (name: string) => (v === 'v1beta' ? name : `${name}V1`);
  return [
    route({
      ...common,
      method: 'post',
      route: `/${v}/models/:model\\:batchGenerateContent`,
      path: `/${v}/models/{model}:batchGenerateContent`,
      operationId: id('createGeminiBatch'),
      summary: 'Create a batch of image requests (Gemini batch mode, inline requests)',
      description:
        `1-${BATCH_LIMITS.requests} inline GenerateContent requests; body at most ${MB} MB after decompression ` +
        '(413 past it). Each request becomes one image task (listed in /v1/tasks); a request Kiln refuses ' +
        "(invalid, over a quota) is that request's failed inline response, not a failure of the batch. " +
        `Answers the Operation; poll GET /${v}/batches/{id}. Optional \`Idempotency-Key\`: the same key ` +
        'and body answer the same batch (header `Idempotent-Replayed: true`).',
      request: {
        params: z.object({ model: z.string().meta({ description: 'Image model id (GET /v1/models)' }) }),
        headers: IdempotencyKeyHeader,
        body: CreateBodyDoc,
        // Its own size limit, and each request's refusal is an inline response, not a 400.
        checkedByHandler: ['body'],
      },
      responses: {
        200: {
          description: 'The batch (PENDING, or already done when every request was refused)',
          schema: BatchOperation,
          headers: {
            [REPLAYED_HEADER]: {
              description: '`true` when an Idempotency-Key repeated an earlier create: the answer is that batch.',
              schema: { type: 'string' },
            },
          },
          // The path parameter takes the whole name (batches/{id}) as well as the id.
          links: Object.fromEntries(
            (['get', 'cancel', 'delete'] as const).map((op) => {
              const operationId = id(`${op}GeminiBatch`);
              return [operationId, { operationId, parameters: { id: '$response.body#/name' } }];
            }),
          ),
        },
      },
      errors: ['invalid_request', 'model_not_found', 'idempotency_key_reused', ...BODY_ERRORS, 'service_unavailable'],
      handler: async (ctx, { caller, params }) => {
        const key = parseIdempotencyKey(ctx.headers['idempotency-key']);
        // The model first: an unknown one is 404 whatever the body.
        batches.checkModel(params.model, caller);
        try {
          await jsonBody({ limitBytes: BATCH_LIMITS.bodyBytes })(ctx, async () => undefined);
        } catch (err) {
          if ((err as { status?: number }).status === 413)
            throw new KilnError('request_too_large', `The batch body is larger than ${MB} MB after decompression.`);
          throw err;
        }
        const { operation, replayed } = await batches.create(caller, params.model, ctx.request.body, key);
        if (replayed) ctx.set(REPLAYED_HEADER, 'true');
        ctx.body = operation;
      },
    }),

    route({
      ...common,
      method: 'get',
      route: `/${v}/batches`,
      operationId: id('listGeminiBatches'),
      summary: "The caller's batches, newest first (without their results)",
      request: { query: ListQuery },
      responses: { 200: { description: 'A page of batches', schema: BatchList } },
      errors: ['invalid_request', 'service_unavailable'],
      handler: async (ctx, { caller, query }) => {
        ctx.body = await batches.list(caller, query);
      },
    }),

    route({
      ...common,
      method: 'get',
      route: `/${v}/batches/:id`,
      operationId: id('getGeminiBatch'),
      summary: 'One batch: state, stats, and once done its inline responses in request order',
      request: { params: BatchId },
      responses: { 200: { description: 'The batch', schema: BatchOperation } },
      errors: ['not_found', 'service_unavailable'],
      handler: async (ctx, { caller, params }) => {
        ctx.body = await batches.get(caller, params.id);
      },
    }),

    route({
      ...common,
      method: 'post',
      route: `/${v}/batches/:id\\:cancel`,
      path: `/${v}/batches/{id}:cancel`,
      operationId: id('cancelGeminiBatch'),
      summary: "Cancel a batch's unfinished tasks",
      description:
        'Each unfinished task is canceled as POST /v1/tasks/{id}/cancel would; the batch turns CANCELLED ' +
        'once they have stopped. A finished batch is left unchanged.',
      request: { params: BatchId },
      responses: { 200: { description: 'Empty', schema: Empty } },
      errors: ['not_found', 'service_unavailable'],
      handler: async (ctx, { caller, params }) => {
        await batches.cancel(caller, params.id);
        ctx.body = {};
      },
    }),

    route({
      ...common,
      method: 'delete',
      route: `/${v}/batches/:id`,
      operationId: id('deleteGeminiBatch'),
      summary: 'Delete the batch record (its tasks are not canceled and stay in /v1/tasks)',
      request: { params: BatchId },
      responses: { 200: { description: 'Empty', schema: Empty } },
      errors: ['not_found', 'service_unavailable'],
      handler: async (ctx, { caller, params }) => {
        await batches.delete(caller, params.id);
        ctx.body = {};
      },
    }),
  ];
}
