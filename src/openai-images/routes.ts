// POST /v1/images/generations and /v1/images/edits as the official OpenAI SDK sends them, on
// Kiln's image models. Synchronous by default (the images, like the direct form); with
// `Prefer: respond-async`, 202 and the image tasks to poll.
import type { Context } from 'koa';
import type { Caller } from '../infra/callers.js';
import { z } from 'zod';
import { BODY_ERRORS, jsonBody, sendSubmitted } from '../http/body.js';
import { IdempotencyKeyHeader } from '../http/openapi.js';
import { route, type RouteDef } from '../http/route-table.js';
import { KilnError, type ErrorCode } from '../shared/errors.js';
import { parseIdempotencyKey, REPLAYED_HEADER } from '../shared/idempotency.js';
import { WebhookQuery } from '../webhooks/openapi.js';
import { ADMISSION_ERRORS } from '../usage/admission.js';
import { EDIT_LIMITS, readEditForm } from './multipart.js';
import { ImageEditBody, ImageGenerateBody, ImagesResponse, ImageTaskList, PreferAsyncHeader } from './openapi.js';
import { MAX_N, parseAsk } from './params.js';
import type { ImagesCall, OpenAIImagesService } from './service.js';

/** The SDK waits out a Retry-After of at most 60 s; a longer refusal is not worth its retries. */
const SDK_RETRY_WAIT_S = 60;

const REPLAYED = {
  [REPLAYED_HEADER]: {
    description: '`true` when an Idempotency-Key repeated an earlier request: the answer is about its tasks.',
    schema: { type: 'string' as const },
  },
};
const TASK_IDS = {
  'X-Kiln-Task-Id': {
    description: 'The image tasks, comma-separated, in the order of `data` (each readable under /v1/tasks/{id}).',
    schema: { type: 'string' as const },
  },
};

const ERRORS: ErrorCode[] = [
  'invalid_request',
  'prompt_too_long',
  'model_not_found',
  'idempotency_key_reused',
  'invalid_webhook_url',
  ...BODY_ERRORS,
  'queue_full',
  ...ADMISSION_ERRORS,
  // Synchronous answers: how a task ended (canceled by its owner while the request waited).
  'canceled',
  'auth_failed',
  'insufficient_balance',
  'upstream_rate_limited',
  'upstream_error',
  'upstream_timeout',
];

/** `respond-async` among the Prefer header's preferences (RFC 7240; others are ignored). */
export function prefersAsync(header: string | string[] | undefined): boolean {
  if (header === undefined) return false;
  return [header]
    .flat()
    .join(',')
    .split(',')
    .some((p) => p.split(';')[0]!.trim().toLowerCase() === 'respond-async');
}

async function answer(
  ctx: Context,
  images: OpenAIImagesService,
  caller: Caller,
  call: Omit<ImagesCall, 'idempotencyKey' | 'webhook'>,
): Promise<void> {
  try {
    const full: ImagesCall = {
      ...call,
      idempotencyKey: parseIdempotencyKey(ctx.headers['idempotency-key']),
      webhook: images.webhookTarget(ctx.query.webhook, ctx.query.webhook_events),
    };
    const started = await images.start(caller, full);
    ctx.set('X-Kiln-Task-Id', started.tasks.map((t) => t.response.id).join(','));
    if (prefersAsync(ctx.req.headers.prefer)) {
      ctx.set('Preference-Applied', 'respond-async');
      sendSubmitted(ctx, 202, images.listed(started), started.replayed);
      return;
    }
    sendSubmitted(ctx, 200, await images.answer(caller, started, call.ask.responseFormat), started.replayed);
  } catch (err) {
    // The SDK retries 409 and 429 by itself: not when waiting cannot help.
    if (err instanceof KilnError && (err.code === 'canceled' || (err.retryAfterSeconds ?? 0) > SDK_RETRY_WAIT_S))
      ctx.set('x-should-retry', 'false');
    throw err;
  }
}

const DESCRIPTION =
  'Each image is one image task (its own workflow, listed in `GET /v1/tasks`, admitted against the ' +
  "caller's limits like any submit). Without `Prefer: respond-async` the answer waits for every task " +
  'and carries the images (200); with it, 202 and the tasks to poll. A refusal of the k-th task ' +
  '(quota, queue) cancels the tasks already started and answers the refusal; a failed task answers ' +
  "with its error code and cancels the others. `Idempotency-Key`: each task's key is derived from it, " +
  'so a resent request answers the same tasks (`Idempotent-Replayed: true`); another request with ' +
  'the key, 422 `idempotency_key_reused`. `?webhook=` as on generateContent, for each task. ' +
  'Refusals carry `error.param` naming the field.';

export function openaiImageRoutes(images: OpenAIImagesService): RouteDef[] {
  const common = {
    tags: ['openai images'],
    headers: IdempotencyKeyHeader.extend(PreferAsyncHeader),
    query: z.object(WebhookQuery),
    responses: {
      200: {
        description: 'The images, in the order asked',
        schema: ImagesResponse,
        headers: { ...TASK_IDS, ...REPLAYED },
      },
      202: {
        description: '`Prefer: respond-async`: the image tasks, as generateContent answers a submit',
        schema: ImageTaskList,
        headers: {
          ...TASK_IDS,
          ...REPLAYED,
          'Preference-Applied': { description: '`respond-async`', schema: { type: 'string' as const } },
        },
        links: {
          GetFirstTask: {
            operationId: 'getTask',
            parameters: { id: '$response.body#/data/0/id' },
            description: 'Poll the first image task (the others likewise)',
          },
        },
      },
      // Node's HTTP parser answers it before Kiln sees the request: a webhook URL of 2048 characters
      // outside ASCII, percent-encoded, passes the 16 KiB the request line and headers may take.
      431: { description: 'The request line and headers over 16 KiB (answered by Node.js, no body)' },
    },
  };
  return [
    route({
      method: 'post',
      route: '/v1/images/generations',
      operationId: 'createImage',
      tags: common.tags,
      summary: 'Generate images (OpenAI Images form)',
      description: `${DESCRIPTION} JSON body at most 2 MB after decompression.`,
      // parseAsk answers with the field's name (error.param) and the model's allowed values.
      request: {
        body: ImageGenerateBody,
        headers: common.headers,
        query: common.query,
        checkedByHandler: ['body', 'query'],
      },
      responses: common.responses,
      errors: ERRORS,
      handler: async (ctx, { caller }) => {
        await jsonBody()(ctx, async () => undefined);
        const body: unknown = ctx.request.body;
        if (typeof body !== 'object' || body === null || Array.isArray(body))
          throw new KilnError('invalid_request', 'The request body must be a JSON object.');
        await answer(ctx, images, caller, {
          endpoint: 'generations',
          ask: parseAsk(body as Record<string, unknown>, false),
        });
      },
    }),
    route({
      method: 'post',
      route: '/v1/images/edits',
      operationId: 'createImageEdit',
      tags: common.tags,
      summary: 'Edit or compose images from reference images (OpenAI Images form)',
      description:
        `${DESCRIPTION} multipart/form-data: 1 to ${EDIT_LIMITS.images} image files (\`image\`, or \`image[]\`), ` +
        `PNG, JPEG, WebP or GIF by their bytes, each at most ${EDIT_LIMITS.fileBytes} bytes; the body at most ` +
        `${EDIT_LIMITS.bodyBytes} bytes after decompression (413 \`request_too_large\`; one file over its limit: ` +
        `413 \`image_too_large\`) and ${EDIT_LIMITS.parts} parts. Each file becomes an inline reference image ` +
        `(base64 \`inlineData\`) after the prompt. \`mask\` is refused: the models take no masks. n 1-${MAX_N}.`,
      request: {
        body: ImageEditBody,
        bodyContentType: 'multipart/form-data',
        headers: common.headers,
        query: common.query,
        checkedByHandler: ['body', 'query'],
      },
      responses: common.responses,
      errors: [...ERRORS, 'too_many_reference_images', 'image_too_large'],
      handler: async (ctx, { caller }) => {
        const form = await readEditForm(ctx);
        await answer(ctx, images, caller, { endpoint: 'edits', ask: parseAsk(form.fields, true), images: form.images });
      },
    }),
  ];
}
