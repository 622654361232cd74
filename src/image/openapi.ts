// Schemas of the image routes' answers, for the OpenAPI document (routes.ts declares the
// operations). They describe the views the service answers with; nothing validates an answer
// against them.
import { z } from 'zod';
import { TASK_FAILURE_CODES } from '../shared/errors.js';
import { TASK_STATUSES } from '../shared/task.js';
import { Timing, UncertainReason, WebhookStatus } from '../tasks/openapi.js';

export const TaskId = z
  .string()
  .meta({ description: 'Task id, `task_` and 32 hex digits.', example: 'task_0123456789abcdef0123456789abcdef' });
const Part = z
  .object({
    text: z.string().optional(),
    inlineData: z
      .object({
        mimeType: z.string().optional(),
        data: z.string().meta({ description: 'Image URL (task results) or reference image URL (requests).' }),
      })
      .optional(),
  })
  .meta({ id: 'Part' });
const Candidate = z
  .object({
    content: z.object({ role: z.string().optional(), parts: z.array(Part) }),
    finishReason: z.string().optional(),
    index: z.number().int().optional(),
  })
  .meta({ id: 'Candidate' });
const TaskError = z
  .object({
    code: z.enum([...TASK_FAILURE_CODES, 'not_found']),
    message: z.string(),
  })
  .meta({ id: 'TaskError' });

/** What a task and a submit's answer both start with. */
const ImageTaskHead = { id: TaskId, object: z.literal('image.task'), model: z.string() };

export const ImageTask = z
  .object({
    ...ImageTaskHead,
    status: z.enum([...TASK_STATUSES]),
    created_at: z.number().int().meta({ description: 'Unix seconds' }),
    finished_at: z.number().int().nullable().meta({ description: 'Unix seconds; null while unfinished' }),
    ...Timing,
    webhook: WebhookStatus.optional(),
    response_id: z.string().optional().meta({ description: 'Present on success' }),
    model_version: z.string().optional().meta({ description: 'Present on success' }),
    candidates: z.array(Candidate).nullable(),
    error: TaskError.nullable().meta({
      description: 'Failed only. `canceled`: stopped by its owner (POST /v1/tasks/{id}/cancel)',
    }),
    uncertain_reason: UncertainReason,
  })
  .meta({ id: 'ImageTask' });

const NotFoundItem = z
  .object({
    id: z.string(),
    object: z.literal('image.task'),
    status: z.literal('not_found'),
    error: z.object({ code: z.literal('not_found'), message: z.string() }),
  })
  .meta({ id: 'NotFoundItem' });

export const SubmitResponse = z
  .object({
    ...ImageTaskHead,
    status: z.enum([...TASK_STATUSES]).meta({
      description: '`accepted` for a new task; an Idempotency-Key replay shows the earlier task as it is now.',
    }),
    created_at: z.number().int(),
    polling_url: z.string(),
    content_url: z.string(),
  })
  .meta({ id: 'SubmitResponse' });

export const BatchList = z
  .object({
    object: z.literal('batch.task.list'),
    items: z.array(z.union([ImageTask, NotFoundItem])),
    next_poll_after_ms: z.number().int(),
  })
  .meta({ id: 'BatchTaskList' });

export const RecentList = z
  .object({
    object: z.literal('list'),
    days: z.number().int(),
    items: z.array(
      z.object({
        id: TaskId,
        model: z.string(),
        status: z.enum([...TASK_STATUSES]),
        created_at: z.number().int(),
        finished_at: z.number().int().nullable(),
        ...Timing,
        content_url: z.string(),
      }),
    ),
  })
  .meta({ id: 'RecentTaskList' });

// GET /v1/models: the catalogue and its schema live with the models (src/infra/models.ts).
export { ModelList } from '../infra/models.js';
