// Schemas of the Gemini batch answers, for the OpenAPI document (routes.ts declares the operations):
// Google's Operation around a GenerateContentBatch, as view.ts builds it.
import { z } from 'zod';
import { ErrorInfo } from '../http/google-errors.js';
import { TaskId } from '../image/openapi.js';
import { BATCH_STATES, BATCH_TYPE } from './view.js';

const RpcStatus = z
  .object({
    code: z
      .number()
      .int()
      .meta({ description: 'google.rpc.Code: 1 CANCELLED, 3 INVALID_ARGUMENT, 8 RESOURCE_EXHAUSTED …' }),
    message: z.string(),
    details: z
      .array(ErrorInfo)
      .optional()
      .meta({ description: "google.rpc.ErrorInfo with Kiln's error code (upper case) as reason" }),
  })
  .meta({ id: 'GoogleRpcStatus' });

const Part = z.object({
  text: z.string().optional(),
  inlineData: z
    .object({ mimeType: z.string().optional(), data: z.string().meta({ description: 'The image, base64' }) })
    .optional(),
});

const GenerateContentResponse = z
  .object({
    candidates: z.array(
      z.object({
        content: z.object({ role: z.string().optional(), parts: z.array(Part) }),
        finishReason: z.string().optional(),
        index: z.number().int().optional(),
      }),
    ),
    modelVersion: z.string().optional(),
    responseId: z.string().optional(),
  })
  .meta({ id: 'GeminiBatchResponse' });

const InlinedResponse = z
  .object({
    response: GenerateContentResponse.optional().meta({ description: 'A request that succeeded' }),
    error: RpcStatus.optional().meta({ description: 'A request that was refused or failed' }),
    metadata: z.record(z.string(), z.unknown()).optional().meta({ description: "The request's metadata" }),
  })
  .meta({ id: 'GeminiBatchInlinedResponse' });

const count = z.string().meta({ description: 'int64 as a decimal string' });

export const BatchOperation = z
  .object({
    name: z.string().meta({ description: '`batches/{id}`', example: 'batches/batch_0123456789abcdef0123456789abcdef' }),
    metadata: z.object({
      '@type': z.literal(BATCH_TYPE),
      model: z.string().meta({ description: '`models/{model}`' }),
      name: z.string(),
      displayName: z.string().optional(),
      createTime: z.string().meta({ description: 'RFC 3339' }),
      updateTime: z.string(),
      endTime: z.string().optional().meta({ description: 'Once done' }),
      state: z.enum(BATCH_STATES as [string, ...string[]]),
      batchStats: z.object({
        requestCount: count,
        successfulRequestCount: count,
        failedRequestCount: count,
        pendingRequestCount: count,
      }),
      taskIds: z
        .array(TaskId.nullable())
        .meta({ description: "Kiln extension: each request's image task (null: refused at submit), in request order" }),
      output: z
        .object({ inlinedResponses: z.object({ inlinedResponses: z.array(InlinedResponse) }) })
        .optional()
        .meta({ description: 'Once done (create and get; list leaves it out): one response per request, in order' }),
    }),
    done: z.boolean(),
    error: RpcStatus.optional().meta({ description: 'Done and CANCELLED (code 1) or FAILED (code 2)' }),
  })
  .meta({ id: 'GeminiBatchOperation' });

export const BatchList = z
  .object({
    operations: z.array(BatchOperation),
    nextPageToken: z.string().optional().meta({ description: 'Present when there are more; pass it as pageToken' }),
  })
  .meta({ id: 'GeminiBatchList' });

export const Empty = z.object({}).meta({ id: 'GoogleEmpty' });
