// The /v1/videos table (create, poll, list, cancel, content, delete), mounted and documented from one declaration each
// (see http/route-table.ts). The body is JSON or, as the official OpenAI SDK sends it,
// multipart/form-data (text fields only).
import type { Context } from 'koa';
import { z } from 'zod';
import { HTTP_URL_PATTERN, parseVideoBody, PROMPT_RULES, validateVideo, VideoBody } from './validate.js';
import { WebhookQuery } from '../webhooks/openapi.js';
import type { VideoTaskService } from './service.js';
import { KilnError } from '../shared/errors.js';
import { parseIdempotencyKey, REPLAYED_HEADER } from '../shared/idempotency.js';
import { BODY_ERRORS, jsonBody, rawBody, redirectTo, sendSubmitted } from '../http/body.js';
import { IdempotencyKeyHeader, idLink, redirectResponse } from '../http/openapi.js';
import { route, type RouteDef } from '../http/route-table.js';
import { collectionRoutes, wholeNumber, type Collection } from '../tasks/routes.js';
import { Video, VideoDeleted, VideoList } from './openapi.js';
import { VARIANTS } from './files.js';
import { VIDEO_ID } from './service.js';
import { ADMISSION_ERRORS } from '../usage/admission.js';

export interface VideoRouteDeps {
  videos: VideoTaskService;
  pollAfterSeconds: number;
}

/** Form fields that carry JSON (the SDK writes nested objects as `input_reference[image_url]`). */
async function formBody(ctx: Context): Promise<Record<string, unknown>> {
  const raw = await rawBody(ctx);
  let form: FormData;
  try {
    form = await new Response(new Uint8Array(raw), { headers: { 'content-type': ctx.get('content-type') } }).formData();
  } catch {
    throw new KilnError('invalid_request', 'The multipart/form-data body is malformed.');
  }
  const out: Record<string, unknown> = {};
  for (const [name, value] of form) {
    if (typeof value !== 'string') {
      throw new KilnError(
        'invalid_request',
        `File uploads are not accepted (field "${name}"); pass the reference image as an http(s) URL in "image".`,
      );
    }
    if (name === 'input_reference[image_url]') out.input_reference = { image_url: value };
    else if (name === 'nodeInfoList') {
      try {
        out.nodeInfoList = JSON.parse(value);
      } catch {
        throw new KilnError('invalid_request', 'nodeInfoList must be a JSON array.');
      }
    } else out[name] = value;
  }
  return out;
}

async function readBody(ctx: Context): Promise<unknown> {
  if (ctx.is('multipart/form-data')) return formBody(ctx);
  await jsonBody()(ctx, async () => undefined);
  return ctx.request.body;
}

const VideoId = z.object({
  // The service answers 404 for an id off this pattern; the pattern tells clients the form.
  id: z.string().meta({
    description: 'Video id, `video_` and 32 hex digits.',
    pattern: VIDEO_ID.source,
    example: 'video_0123456789abcdef0123456789abcdef',
  }),
});
const VideoListQuery = z.object({
  limit: wholeNumber(1, 100).default(20).meta({ description: 'Videos returned, 1-100' }),
  after: z
    .string()
    .regex(VIDEO_ID, 'must be a video id (video_ and 32 hex digits)')
    .optional()
    .meta({ description: 'Cursor: the `last_id` of the previous page (one of your videos); the page starts after it' }),
  order: z
    .enum(['desc', 'asc'])
    .default('desc')
    .meta({ description: '`desc` (newest first, the default) or `asc`, by created_at, then id' }),
});

export const VIDEOS: Collection<z.output<typeof VideoListQuery>> = {
  path: '/v1/videos',
  noun: 'Video',
  plural: 'Videos',
  tag: 'videos',
  id: VideoId.shape.id,
  item: Video,
  list: {
    summary: "The caller's video tasks of the last 3 days",
    description:
      'OpenAI-videos list shape: `data` holds video objects exactly as `GET /v1/videos/{id}` answers them, ' +
      'ordered by created_at, then id (newest first unless `order=asc`), so pages never repeat or skip ' +
      'ties. The next page: `after` = `last_id`, while `has_more`. An `after` that is not one of your videos ' +
      'of the window is refused (400). Image tasks are listed by `GET /v1/tasks`.',
    query: VideoListQuery,
    schema: VideoList,
    answer: 'A page of videos',
  },
  poll: {
    summary: 'Poll a video task',
    description: 'A video wakes when its OpenAI status changes.',
    answer: 'The task',
    retryAfter: 'While queued or in_progress: seconds until the next useful poll.',
  },
};

/**
 * VideoBody as the document shows it: the same schema, with the rules validateVideo checks after it
 * that a schema can state (the values of the configured models, the prompt's, the URL's scheme).
 */
function documentedVideoBody({ seconds, sizes }: { seconds: string[]; sizes: string[] }) {
  const s = VideoBody.shape;
  const meta = <T extends z.ZodType>(t: T, m: Record<string, unknown>) => t.meta({ ...t.meta(), ...m });
  return VideoBody.extend({
    prompt: meta(s.prompt, PROMPT_RULES),
    image: meta(s.image, { pattern: HTTP_URL_PATTERN }),
    input_reference: z
      .object({ image_url: meta(s.input_reference.unwrap().shape.image_url, { pattern: HTTP_URL_PATTERN }) })
      .optional(),
    ...(seconds.length
      ? {
          seconds: z
            .union([z.enum(seconds), z.int().meta({ enum: seconds.map(Number) })])
            .optional()
            .meta({ description: "One of the model's `seconds` (GET /v1/models); default: its first" }),
        }
      : {}),
    ...(sizes.length
      ? {
          size: z
            .enum(sizes)
            .optional()
            .meta({ description: "One of the model's `sizes` (GET /v1/models); default: its first" }),
        }
      : {}),
    webhook: WebhookQuery.webhook,
    webhook_events: meta(WebhookQuery.webhook_events, { description: s.webhook_events.meta()?.description }),
  });
}

export function videoRoutes({ videos, pollAfterSeconds }: VideoRouteDeps): RouteDef[] {
  return [
    route({
      method: 'post',
      route: '/v1/videos',
      operationId: 'createVideo',
      tags: ['videos'],
      summary: 'Create a video task',
      description:
        'JSON, or multipart/form-data text fields as the OpenAI ' +
        'SDK sends them. `seconds` and `size` must be among the ' +
        "model's allowed values (the pro model: 10/15/25 and " +
        '1792x1024/1024x1792); refused values never reach the upstream. ' +
        'Optional `Idempotency-Key` header (1-255 characters 0x21-0x7E, scoped to ' +
        'the caller): a repeat with the same key and request returns the same task ' +
        '(200, header `Idempotent-Replayed: true`, the task as it is ' +
        'now); with another request, 422 `idempotency_key_reused`.',
      // Read as JSON or multipart by readBody; parseVideoBody validates with VideoBody.
      request: {
        body: documentedVideoBody(videos.offered()),
        headers: IdempotencyKeyHeader,
        checkedByHandler: ['body'],
      },
      responses: {
        200: {
          description: 'The task, queued (or, for a repeated Idempotency-Key, the earlier task as it is now)',
          schema: Video,
          headers: {
            [REPLAYED_HEADER]: {
              description: '`true` when an Idempotency-Key repeated an earlier create: the answer is that task.',
              schema: { type: 'string' },
            },
          },
          links: {
            GetVideo: idLink('getVideo', 'Poll the task'),
            GetVideoContent: idLink('getVideoContent', 'The video, once completed'),
            CancelVideo: idLink('cancelVideo', 'Cancel it'),
          },
        },
      },
      errors: [
        'invalid_request',
        'prompt_too_long',
        'invalid_reference_image_url',
        'invalid_reference_image_scheme',
        ...BODY_ERRORS,
        'model_not_found',
        'idempotency_key_reused',
        'invalid_webhook_url',
        'queue_full',
        ...ADMISSION_ERRORS,
      ],
      handler: async (ctx, { caller }) => {
        const idempotencyKey = parseIdempotencyKey(ctx.headers['idempotency-key']);
        const body = parseVideoBody(await readBody(ctx));
        const model = videos.model(body.model, caller);
        const request = validateVideo(body, model);
        const webhook = videos.webhookTarget(body.webhook, body.webhook_events);
        const { video, replayed } = await videos.submit(caller, model, request, { idempotencyKey, webhook });
        sendSubmitted(ctx, 200, video, replayed);
      },
    }),

    ...collectionRoutes(VIDEOS, videos, pollAfterSeconds),

    route({
      method: 'get',
      route: '/v1/videos/:id/content',
      operationId: 'getVideoContent',
      tags: ['videos'],
      summary: 'Redirect to the finished video, or a still of it',
      description:
        '`variant=video` (the default): the video. `thumbnail`: a JPEG of the frame at 1 s (the first ' +
        'frame of a shorter video). `spritesheet`: a JPEG grid of 4x4 frames spread over the video, ' +
        '160 px wide each. A still is made on its first request (ffmpeg, up to 20 s) and stored beside ' +
        'the video; later requests redirect at once. While this API process makes another still, a ' +
        'request waits up to 5 s, then gets 503 with Retry-After; so does one whose still cannot be ' +
        'made (no ffmpeg, a video over 256 MiB).',
      // The service refuses another variant with a message that lists the allowed ones.
      request: {
        params: VideoId,
        query: z.object({
          variant: z.enum(VARIANTS).optional().meta({ description: '`video` (default), `thumbnail` or `spritesheet`' }),
        }),
        checkedByHandler: ['query'],
      },
      responses: {
        302: redirectResponse('the video URL', 'The URL of the video or still'),
      },
      errors: ['not_found', 'invalid_request', 'task_not_ready', 'task_failed', 'service_unavailable'],
      handler: async (ctx, { caller, params }) => {
        const variant =
          typeof ctx.query.variant === 'string' ? ctx.query.variant : ctx.query.variant === undefined ? 'video' : '';
        const url = await videos.contentUrl(caller, params.id, variant);
        redirectTo(ctx, url);
      },
    }),

    route({
      method: 'post',
      route: '/v1/videos/:id/remix',
      operationId: 'remixVideo',
      tags: ['videos'],
      summary: 'Remix a video (not supported)',
      description:
        "OpenAI's remix of an existing video. No upstream Kiln speaks offers it: the caller's video is " +
        "answered 400 `invalid_request` saying so; an unknown id or another owner's video, 404.",
      request: { params: VideoId, checkedByHandler: ['params'] },
      responses: {},
      // The id is read as a poll reads it, behind the poll limiter.
      errors: ['invalid_request', 'not_found', 'rate_limited', 'service_unavailable'],
      handler: async (_ctx, { caller }) => videos.remix(caller, String(_ctx.params.id)),
    }),

    route({
      method: 'delete',
      route: '/v1/videos/:id',
      operationId: 'deleteVideo',
      tags: ['videos'],
      summary: 'Delete a finished video',
      description:
        'Deletes the video file, its stills and results, the workflow history and the record of a ' +
        'finished video (completed, failed or uncertain). It is then unknown everywhere: 404 to a poll, ' +
        'its content and a second delete, and gone from the list. An unfinished video is refused with ' +
        '409 `task_not_ready`: cancel it first (`POST /v1/videos/{id}/cancel`) or wait for it to end. ' +
        'A delete that failed part way (503) completes when repeated.',
      request: { params: VideoId, checkedByHandler: ['params'] },
      responses: { 200: { description: 'The video was deleted', schema: VideoDeleted } },
      errors: ['not_found', 'task_not_ready', 'service_unavailable'],
      handler: async (ctx, { caller }) => {
        const id = String(ctx.params.id);
        await videos.delete(caller, id);
        ctx.body = { id, object: 'video.deleted', deleted: true };
      },
    }),
  ];
}
