// Schemas of the video routes' answers, for the OpenAPI document (routes.ts declares the
// operations). They describe videoView in service.ts; nothing validates an answer against them.
import { z } from 'zod';
import { TASK_FAILURE_CODES } from '../shared/errors.js';
import { Timing, UncertainReason, WebhookStatus } from '../tasks/openapi.js';

export const Video = z
  .object({
    id: z.string(),
    object: z.literal('video'),
    model: z.string(),
    status: z.enum(['queued', 'in_progress', 'completed', 'failed']).meta({
      description:
        "OpenAI's statuses. A video whose create request may have reached a non-idempotent upstream but " +
        'whose answer was lost is `failed` with `error.code: "uncertain"` and `uncertain_reason`: Kiln did ' +
        'not resend it; resolve it with your Idempotency-Key.',
    }),
    progress: z.number().int().min(0).max(100),
    created_at: z.number().int().meta({ description: 'Unix seconds' }),
    completed_at: z.number().int().nullable().meta({ description: 'Unix seconds; null until the task ends' }),
    ...Timing,
    expires_at: z.number().int().nullable().meta({
      description: 'Unix seconds after which Kiln no longer serves the finished video; null until it ends',
    }),
    prompt: z.string(),
    remixed_from_video_id: z.null(),
    seconds: z.string(),
    size: z.string(),
    error: z
      .object({ code: z.enum([...TASK_FAILURE_CODES, 'uncertain']), message: z.string() })
      .nullable()
      .meta({
        description:
          'Failed only. `canceled`: stopped by its owner (POST /v1/videos/{id}/cancel); `uncertain`: see `status`',
      }),
    video_url: z.string().optional().meta({ description: "Completed only: absolute URL of Kiln's copy of the video" }),
    results: z
      .array(z.object({ url: z.string(), file_type: z.string(), node_id: z.string().optional() }))
      .optional()
      .meta({ description: 'Completed workflow-node tasks only: every output file' }),
    uncertain_reason: UncertainReason,
    webhook: WebhookStatus.optional(),
  })
  .meta({ id: 'Video' });

export const VideoList = z
  .object({
    object: z.literal('list'),
    data: z.array(Video),
    first_id: z.string().nullable().meta({ description: 'The first video of the page; null when it is empty' }),
    last_id: z.string().nullable().meta({ description: 'The last video of the page: `after` for the next one' }),
    has_more: z.boolean(),
  })
  .meta({ id: 'VideoList' });

export const VideoDeleted = z
  .object({
    id: z.string(),
    object: z.literal('video.deleted'),
    deleted: z.literal(true),
  })
  .meta({ id: 'VideoDeleted' });
