// OpenAPI operations of the image task routes in routes.ts: request schemas are the ones the
// handlers validate with; response schemas describe the views in services/views.ts.
import { z } from 'zod';
import { TASK_FAILURE_CODES } from '../shared/errors.js';
import { TASK_STATUSES } from '../shared/task.js';
import { EXT_BY_TYPE } from '../infra/blobs.js';
import { SubmitBody } from './validate.js';
import { registerOperation } from '../http/openapi.js';
import { BatchBody } from './routes.js';

const TaskId = z.string().meta({ description: 'Task id, `task_` and 32 hex digits.', example: 'task_0123456789abcdef0123456789abcdef' });
const Part = z.object({
  text: z.string().optional(),
  inlineData: z.object({ mimeType: z.string().optional(), data: z.string().meta({ description: 'Image URL (task results) or reference image URL (requests).' }) }).optional(),
}).meta({ id: 'Part' });
const Candidate = z.object({
  content: z.object({ role: z.string().optional(), parts: z.array(Part) }),
  finishReason: z.string().optional(),
  index: z.number().int().optional(),
}).meta({ id: 'Candidate' });
const TaskError = z.object({
  code: z.enum([...TASK_FAILURE_CODES, 'not_found']),
  message: z.string(),
}).meta({ id: 'TaskError' });

const ImageTask = z.object({
  id: TaskId,
  object: z.literal('image.task'),
  model: z.string(),
  status: z.enum([...TASK_STATUSES]),
  created_at: z.number().int().meta({ description: 'Unix seconds' }),
  finished_at: z.number().int().nullable().meta({ description: 'Unix seconds; null while unfinished' }),
  response_id: z.string().optional().meta({ description: 'Present on success' }),
  model_version: z.string().optional().meta({ description: 'Present on success' }),
  candidates: z.array(Candidate).nullable(),
  error: TaskError.nullable(),
  uncertain_reason: z.string().optional().meta({ description: 'Status uncertain only: why the outcome cannot be confirmed' }),
}).meta({ id: 'ImageTask' });

const NotFoundItem = z.object({
  id: z.string(), object: z.literal('image.task'), status: z.literal('not_found'),
  error: z.object({ code: z.literal('not_found'), message: z.string() }),
}).meta({ id: 'NotFoundItem' });

const SubmitResponse = z.object({
  id: TaskId, object: z.literal('image.task'), model: z.string(), status: z.literal('accepted'),
  created_at: z.number().int(), polling_url: z.string(), content_url: z.string(),
}).meta({ id: 'SubmitResponse' });

const BatchList = z.object({
  object: z.literal('batch.task.list'),
  items: z.array(z.union([ImageTask, NotFoundItem])),
  next_poll_after_ms: z.number().int(),
}).meta({ id: 'BatchTaskList' });

const RecentList = z.object({
  object: z.literal('list'),
  days: z.number().int(),
  items: z.array(z.object({
    id: TaskId, model: z.string(), status: z.enum([...TASK_STATUSES]), created_at: z.number().int(),
    finished_at: z.number().int().nullable(), content_url: z.string(),
  })),
}).meta({ id: 'RecentTaskList' });

const ModelList = z.object({
  object: z.literal('list'),
  data: z.array(z.object({
    id: z.string(), object: z.literal('model'), created: z.number().int(), owned_by: z.string(),
    kind: z.enum(['image', 'chat', 'video']), form: z.string().optional(), description: z.string().nullable(),
  })),
}).meta({ id: 'ModelList' });

// ListQuery (routes.ts) as a client writes it: it parses query strings, so its own schema would
// document strings with a pattern; the values it accepts are these whole numbers.
const ListQueryDoc = z.object({
  days: z.number().int().min(1).max(3).default(3).meta({ description: 'Look-back window in days' }),
  limit: z.number().int().min(1).max(100).default(20).meta({ description: 'Items returned' }),
  before_created_at: z.number().int().min(0).max(99_999_999_99).optional().meta({ description: 'Cursor: created_at of the last item of the previous page' }),
  before_id: z.string().max(256).optional().meta({ description: 'Cursor: id of that item; only together with before_created_at' }),
});

const RETRY_AFTER = { 'Retry-After': { description: 'While unfinished: seconds until the next useful poll.', schema: { type: 'integer' as const } } };

registerOperation({
  method: 'get', route: '/healthz', operationId: 'healthz', tags: ['operations'], auth: false,
  summary: 'Liveness: the process is up', responses: { 200: { description: 'Alive', schema: z.object({ status: z.literal('ok') }) } },
});

registerOperation({
  method: 'get', route: '/v1/models', operationId: 'listModels', tags: ['models'],
  summary: 'Configured models and their kinds', responses: { 200: { description: 'Models', schema: ModelList } },
});

registerOperation({
  method: 'post', route: '/v1beta/models/:modelAction', path: '/v1beta/models/{model}:generateContent',
  operationId: 'submitImageTask', tags: ['image tasks'],
  summary: 'Submit an image task (generateContent form)',
  description: 'Answers 202 at once; poll `polling_url`. The request must resolve to `output=url` (query or `generationConfig.imageConfig.output`). '
    + 'Body at most 2 MB after decompression; `Content-Encoding` gzip or br.',
  request: {
    params: z.object({ model: z.string().meta({ description: 'Image model id (GET /v1/models)' }) }),
    query: z.object({ output: z.literal('url').optional() }),
    body: SubmitBody,
  },
  responses: { 202: { description: 'Accepted', schema: SubmitResponse, links: {
    GetTask: { operationId: 'getTask', parameters: { id: '$response.body#/id' }, description: 'Poll the task' },
    GetTaskContent: { operationId: 'getTaskContent', parameters: { id: '$response.body#/id' }, description: 'Its first image, once succeeded' },
    BatchGetTasks: { operationId: 'batchGetTasks', requestBody: { ids: ['$response.body#/id'] }, description: 'Poll it in a batch' },
  } } },
  errors: ['invalid_request', 'output_must_be_url', 'prompt_too_long', 'too_many_reference_images', 'invalid_reference_image_url',
    'invalid_reference_image_scheme', 'model_not_found', 'not_found', 'request_too_large', 'unsupported_content_encoding',
    'unsupported_media_type', 'queue_full', 'service_unavailable'],
});

registerOperation({
  method: 'get', route: '/v1/tasks', operationId: 'listTasks', tags: ['image tasks'],
  summary: 'Recent tasks of the caller, newest first',
  request: { query: ListQueryDoc },
  responses: { 200: { description: 'Recent tasks', schema: RecentList } },
  errors: ['invalid_request', 'service_unavailable'],
});

registerOperation({
  method: 'post', route: '/v1/tasks/batch-get', operationId: 'batchGetTasks', tags: ['image tasks'],
  summary: 'Poll 1 to 100 tasks at once',
  request: { body: BatchBody },
  responses: { 200: { description: 'One item per distinct id, in first-occurrence order', schema: BatchList } },
  errors: ['invalid_request', 'rate_limited', 'request_too_large', 'unsupported_content_encoding', 'unsupported_media_type'],
});

registerOperation({
  method: 'get', route: '/v1/tasks/:id', operationId: 'getTask', tags: ['image tasks'],
  summary: 'One task',
  request: { params: z.object({ id: TaskId }) },
  responses: { 200: { description: 'The task in its state-dependent form', schema: ImageTask, headers: RETRY_AFTER } },
  errors: ['not_found', 'rate_limited'],
});

registerOperation({
  method: 'get', route: '/v1/tasks/:id/content', operationId: 'getTaskContent', tags: ['image tasks'],
  summary: 'Redirect to the first image of a finished task',
  request: { params: z.object({ id: TaskId }) },
  responses: { 302: { description: 'Location: the first image URL', headers: { Location: { description: 'Image URL', schema: { type: 'string' } } } } },
  errors: ['not_found', 'task_not_ready', 'task_failed'],
});

registerOperation({
  method: 'get', route: '/v1/files/:name', operationId: 'getFile', tags: ['files'], auth: false,
  summary: 'A generated file (unguessable name, immutable)',
  request: { params: z.object({ name: z.string() }) },
  responses: { 200: { description: 'The file', contentType: [...Object.keys(EXT_BY_TYPE), 'application/octet-stream'], schema: z.string().meta({ format: 'binary' }) } },
  errors: ['not_found'],
});
