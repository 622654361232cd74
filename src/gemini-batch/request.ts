// The batchGenerateContent body, as @google/genai sends it for inline requests:
// `{batch: {displayName?, inputConfig: {requests: {requests: [{request, metadata?}]}}}}`.
// Problems of the batch as a whole are 400s; a request of it that Kiln refuses becomes that
// request's failed inline response, so its checks answer a status instead of throwing.
import { z } from 'zod';
import type { ImageModel } from '../config/models.js';
import type { ImageRequest } from '../shared/image-task.js';
import { KilnError } from '../shared/errors.js';
import { SubmitBody, validateSubmit } from '../image/validate.js';
import { rpcStatus, type RpcStatus } from '../http/google-errors.js';

export const BATCH_LIMITS = {
  /** Inline requests per batch. */
  requests: 100,
  /** The body after decompression: room for 100 requests of ordinary size. */
  bodyBytes: 4 * 1024 * 1024,
  displayNameChars: 512,
  /** A request's `metadata`, as compact JSON: it is kept with the batch and echoed in its response. */
  metadataBytes: 2048,
  metadataDepth: 8,
} as const;

/** Each item is checked on its own (below), so one bad request does not refuse its batch. */
const CreateBody = z.object({
  batch: z.object({
    displayName: z.string().max(BATCH_LIMITS.displayNameChars).optional(),
    model: z.string().max(512).optional(),
    inputConfig: z.object({
      fileName: z.unknown().optional(),
      requests: z
        .object({
          requests: z
            .array(z.unknown())
            .min(1, 'a batch needs at least one request')
            .max(BATCH_LIMITS.requests, `at most ${BATCH_LIMITS.requests} requests per batch`),
        })
        .optional(),
    }),
    webhookConfig: z.unknown().optional(),
    priority: z.union([z.string().max(32), z.number()]).optional(),
  }),
});

/** The body as the OpenAPI document describes it (the handler checks it with the rules above). */
export const CreateBodyDoc = z
  .object({
    batch: z.object({
      displayName: z.string().max(BATCH_LIMITS.displayNameChars).optional(),
      model: z.string().optional().meta({ description: 'When given, `models/{model}` of the path' }),
      inputConfig: z.object({
        requests: z.object({
          requests: z
            .array(
              z.object({
                request: SubmitBody.extend({
                  model: z.string().optional().meta({ description: 'When given, the batch model' }),
                }),
                metadata: z
                  .record(z.string(), z.unknown())
                  .optional()
                  .meta({
                    description: `Echoed in the request's response; at most ${BATCH_LIMITS.metadataBytes} bytes`,
                  }),
              }),
            )
            .min(1)
            .max(BATCH_LIMITS.requests),
        }),
      }),
      priority: z.string().optional().meta({ description: 'Accepted and ignored' }),
    }),
  })
  .meta({ id: 'GeminiBatchCreate' });

/** One inline request, checked: what to submit, or why it was refused. */
export type CheckedItem =
  | { request: ImageRequest; metadata?: Record<string, unknown> }
  | { refused: RpcStatus; metadata?: Record<string, unknown> };

export interface CheckedBatch {
  displayName?: string;
  items: CheckedItem[];
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function deeperThan(v: unknown, max: number): boolean {
  if (v === null || typeof v !== 'object') return false;
  if (max === 0) return true;
  return Object.values(v).some((x) => deeperThan(x, max - 1));
}

const invalid = (message: string) => new KilnError('invalid_request', message);

/** `models/x` or `x`, as the SDK names a model in a path or a request. */
const modelId = (name: string) => (name.startsWith('models/') ? name.slice('models/'.length) : name);

/** Checks the batch as a whole (400 otherwise), then each request against the model's rules. */
export function checkBatch(raw: unknown, model: ImageModel): CheckedBatch {
  const parsed = CreateBody.safeParse(raw);
  if (!parsed.success) {
    const i = parsed.error.issues[0]!;
    throw invalid(`body.${i.path.join('.') || '(root)'}: ${i.message}`);
  }
  const { batch } = parsed.data;
  if (batch.inputConfig.fileName !== undefined)
    throw invalid(
      'File input (batch.inputConfig.fileName) is not supported by Kiln: send the requests inline ' +
        '(batch.inputConfig.requests.requests, at most 100).',
    );
  if (!batch.inputConfig.requests)
    throw invalid('body.batch.inputConfig.requests: send the requests inline (requests.requests[]).');
  if (batch.webhookConfig !== undefined)
    throw invalid('batch.webhookConfig is not supported by Kiln: poll GET /v1beta/batches/{id} instead.');
  if (batch.model !== undefined && modelId(batch.model) !== model.id)
    throw invalid(`batch.model names ${batch.model}, not the model of the path (models/${model.id}).`);
  const items = batch.inputConfig.requests.requests.map((item, i) => checkItem(item, i, model));
  return { ...(batch.displayName !== undefined ? { displayName: batch.displayName } : {}), items };
}

function checkItem(item: unknown, i: number, model: ImageModel): CheckedItem {
  const at = `requests[${i}]`;
  if (!isObject(item)) return { refused: rpcStatus('invalid_request', `${at} must be an object {request, metadata}.`) };
  const meta = item.metadata;
  let metadata: Record<string, unknown> | undefined;
  if (meta !== undefined) {
    if (!isObject(meta)) return { refused: rpcStatus('invalid_request', `${at}.metadata must be an object.`) };
    if (deeperThan(meta, BATCH_LIMITS.metadataDepth))
      return {
        refused: rpcStatus('invalid_request', `${at}.metadata nests more than ${BATCH_LIMITS.metadataDepth} levels.`),
      };
    const bytes = Buffer.byteLength(JSON.stringify(meta));
    if (bytes > BATCH_LIMITS.metadataBytes)
      return {
        refused: rpcStatus(
          'invalid_request',
          `${at}.metadata takes ${bytes} bytes as JSON; at most ${BATCH_LIMITS.metadataBytes} are allowed.`,
        ),
      };
    metadata = meta;
  }
  const refuse = (code: string, message: string): CheckedItem => ({
    refused: rpcStatus(code, `${at}: ${message}`),
    ...(metadata ? { metadata } : {}),
  });
  const { request } = item;
  if (!isObject(request)) return refuse('invalid_request', 'request must be a GenerateContentRequest object.');
  const { model: named, ...body } = request;
  if (named !== undefined && (typeof named !== 'string' || modelId(named) !== model.id))
    return refuse('invalid_request', `request.model must be the batch's model (models/${model.id}).`);
  try {
    // Results come back inline, so each request resolves to output=url as a task submit does.
    return { request: validateSubmit(body, 'url', model), ...(metadata ? { metadata } : {}) };
  } catch (err) {
    if (err instanceof KilnError) return refuse(err.code, err.message);
    throw err;
  }
}
