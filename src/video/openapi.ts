// OpenAPI operations of the video routes in video-routes.ts: the request schema is the one the
// handler validates with; the response describes videoView in services/videos.ts.
import { z } from 'zod';
import { TASK_FAILURE_CODES } from '../shared/errors.js';
import { VideoBody } from './validate.js';
import { registerOperation } from '../http/openapi.js';

const VideoId = z.object({ id: z.string().meta({ description: 'Video id, `video_` and 32 hex digits.', example: 'video_0123456789abcdef0123456789abcdef' }) });

const Video = z.object({
  id: z.string(),
  object: z.literal('video'),
  model: z.string(),
  status: z.enum(['queued', 'in_progress', 'completed', 'failed', 'uncertain']),
  progress: z.number().int().min(0).max(100),
  created_at: z.number().int().meta({ description: 'Unix seconds' }),
  completed_at: z.number().int().nullable().meta({ description: 'Unix seconds; null until the task ends' }),
  expires_at: z.null(),
  prompt: z.string(),
  remixed_from_video_id: z.null(),
  seconds: z.string(),
  size: z.string(),
  error: z.object({ code: z.enum([...TASK_FAILURE_CODES]), message: z.string() }).nullable(),
  video_url: z.string().optional().meta({ description: 'Completed only: absolute URL of Kiln\'s copy of the video' }),
  results: z.array(z.object({ url: z.string(), file_type: z.string(), node_id: z.string().optional() })).optional()
    .meta({ description: 'Completed workflow-node tasks only: every output file' }),
  uncertain_reason: z.string().optional().meta({ description: 'Status uncertain only: why the outcome cannot be confirmed' }),
}).meta({ id: 'Video' });

const RETRY_AFTER = { 'Retry-After': { description: 'While queued or in_progress: seconds until the next useful poll.', schema: { type: 'integer' as const } } };

registerOperation({
  method: 'post', route: '/v1/videos', operationId: 'createVideo', tags: ['videos'],
  summary: 'Create a video task',
  description: 'JSON, or multipart/form-data text fields as the OpenAI SDK sends them. `seconds` and `size` must be among the model\'s allowed values (the pro model: 10/15/25 and 1792x1024/1024x1792); refused values never reach the upstream.',
  request: { body: VideoBody },
  responses: { 200: { description: 'The task, queued', schema: Video, links: {
    GetVideo: { operationId: 'getVideo', parameters: { id: '$response.body#/id' }, description: 'Poll the task' },
    GetVideoContent: { operationId: 'getVideoContent', parameters: { id: '$response.body#/id' }, description: 'The video, once completed' },
  } } },
  errors: ['invalid_request', 'prompt_too_long', 'invalid_reference_image_url', 'invalid_reference_image_scheme', 'request_too_large',
    'unsupported_content_encoding', 'unsupported_media_type', 'model_not_found', 'queue_full', 'service_unavailable'],
});

registerOperation({
  method: 'get', route: '/v1/videos/:id', operationId: 'getVideo', tags: ['videos'],
  summary: 'Poll a video task', request: { params: VideoId },
  responses: { 200: { description: 'The task', schema: Video, headers: RETRY_AFTER } },
  errors: ['not_found', 'rate_limited'],
});

registerOperation({
  method: 'get', route: '/v1/videos/:id/content', operationId: 'getVideoContent', tags: ['videos'],
  summary: 'Redirect to the finished video',
  request: { params: VideoId, query: z.object({ variant: z.literal('video').optional() }) },
  responses: { 302: { description: 'Location: the video URL', headers: { Location: { description: 'The video URL', schema: { type: 'string' } } } } },
  errors: ['not_found', 'invalid_request', 'task_not_ready', 'task_failed'],
});
