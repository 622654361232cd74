// The Gemini Developer API's long-running video operations (Veo's API shape) in front of Kiln's
// video tasks: predictLongRunning starts one video task, operations/{id} is that task seen as an
// Operation, files/{id}:download its video. Each is served under /v1beta (the API's Veo version)
// and /v1 (the version @google/genai 3 calls by default), and answers errors in Google's shape.
import type { Context } from 'koa';
import { z } from 'zod';
import { BODY_ERRORS, jsonBody } from '../http/body.js';
import { googleErrorSchema } from '../http/google-errors.js';
import { parseInput, route, type RouteDef } from '../http/route-table.js';
import type { Blobs } from '../blobs/stores.js';
import { EXT_BY_TYPE, type FsBlobStore } from '../blobs/local.js';
import { KilnError } from '../shared/errors.js';
import type { VideoView } from '../shared/views.js';
import { VIDEO_ID, type VideoTaskService } from '../video/service.js';
import { ADMISSION_ERRORS } from '../usage/admission.js';
import { fileId, Operation, operationName, toOperation, VIDEO_HEX } from './operation.js';
import { decodeImage, PREDICT_BODY_BYTES, PredictBody, toVideoRequest } from './validate.js';

export interface GeminiVideoDeps {
  /** The configured blob store: reference images go in, finished videos are read back (S3). */
  blobs: Blobs;
  /** The filesystem store behind /v1/files: its videos are streamed rather than read whole. */
  files: FsBlobStore;
  publicBaseUrl: string;
}

const VERSIONS = ['v1beta', 'v1'] as const;
const PREDICT = (v: string) => `/${v}/models/:model\\:predictLongRunning`;
const OPERATION = (v: string) => `/${v}/models/:model/operations/:id`;
const DOWNLOAD = (v: string) => `/${v}/files/:file\\:download`;

/**
 * The paths these routes serve, malformed ones included (an empty model or file id falls to a
 * neighbouring route): their errors are answered in Google's shape (http/google-errors.ts).
 */
export const GEMINI_VIDEO_PATHS =
  /^\/v1(?:beta)?\/(?:models\/[^/]*(?::predictLongRunning|\/operations\/[^/]*)|files\/[^/]*:download)$/;

// What Gemini clients send: x-goog-api-key; a bearer token works as everywhere else.
const credentials = (ctx: Context) =>
  ctx.get('authorization') || (ctx.get('x-goog-api-key') ? `Bearer ${ctx.get('x-goog-api-key')}` : undefined);

const ModelParam = z.string().min(1).max(200).meta({ description: 'A video model (GET /v1/models)' });

async function readBody(ctx: Context): Promise<PredictBody> {
  try {
    await jsonBody({ limitBytes: PREDICT_BODY_BYTES })(ctx, async () => undefined);
  } catch (err) {
    // The shared answer names Kiln's usual 2 MB; this body has its own limit.
    if ((err as { status?: number }).status === 413)
      throw new KilnError('request_too_large', 'The request body is larger than 10 MiB after decompression.');
    throw err;
  }
  return parseInput(PredictBody, ctx.request.body, 'body');
}

async function storeImage(blobs: Blobs, image: { data: Buffer; mimeType: string }): Promise<string> {
  try {
    return await blobs.put(image.data, image.mimeType);
  } catch {
    throw new KilnError('service_unavailable', 'The reference image could not be stored; retry shortly.', 1);
  }
}

/** Sends the stored video: streamed from the filesystem store, else read whole from the blob store (S3). */
async function sendVideo(ctx: Context, deps: GeminiVideoDeps, url: string): Promise<void> {
  const local = `${deps.publicBaseUrl}/v1/files/`;
  const file = url.startsWith(local) ? await deps.files.open(url.slice(local.length)) : null;
  if (file) {
    ctx.type = file.type;
    ctx.length = file.size;
    ctx.body = file.stream;
  } else {
    const blob = await deps.blobs.read(url).catch(() => null);
    if (!blob) throw new KilnError('not_found', 'The video is no longer stored.');
    ctx.type = blob.mimeType;
    ctx.body = blob.data;
  }
  // Behind the caller's key: a shared cache must not keep it.
  ctx.set('Cache-Control', 'private, max-age=86400');
}

export function geminiVideoRoutes(
  videos: VideoTaskService,
  pollAfterSeconds: number,
  deps: GeminiVideoDeps,
): RouteDef[] {
  const opNotFound = (model: string, id: string) =>
    new KilnError('not_found', `Operation ${operationName(model, id)} was not found.`);

  /** The caller's video behind an operation id; another owner's, unknown or another model's: not found. */
  async function videoOf(caller: Parameters<VideoTaskService['get']>[0], model: string, id: string) {
    if (!VIDEO_ID.test(id)) throw opNotFound(model, id);
    const view = await videos.get(caller, id).catch((err: unknown) => {
      throw err instanceof KilnError && err.code === 'not_found' ? opNotFound(model, id) : err;
    });
    const video = JSON.parse(view.json) as VideoView;
    if (video.model !== model) throw opNotFound(model, id);
    return video;
  }

  return VERSIONS.flatMap((v): RouteDef[] => {
    const suffix = v === 'v1beta' ? '' : 'V1';
    const tags = ['gemini videos'];
    return [
      route({
        method: 'post',
        route: PREDICT(v),
        path: `/${v}/models/{model}:predictLongRunning`,
        operationId: `predictLongRunningVideo${suffix}`,
        tags,
        summary: `Start a video (Gemini Veo request shape)${v === 'v1' ? ', /v1 form' : ''}`,
        description:
          "Starts one Kiln video task (the model's workflow, quotas and owner scope, listed under " +
          '`/v1/videos` too) and answers its operation; poll it with GET `/v1beta/{name}`. ' +
          "`durationSeconds`, `aspectRatio` and `resolution` must match the model's `seconds` and " +
          '`sizes`; unsupported parameters are refused, never dropped. Body at most 10 MiB after ' +
          "decompression. Errors in Google's shape `{error: {code, message, status, details}}`.",
        credentials,
        request: {
          params: z.object({ model: ModelParam }),
          body: PredictBody,
          // Read with this endpoint's own size limit (an inline image), then checked with PredictBody.
          checkedByHandler: ['body'],
        },
        responses: {
          200: {
            description: 'The operation, not done yet',
            schema: Operation,
            links: {
              GetOperation: {
                operationId: `getVideoOperation${suffix}`,
                parameters: { model: '$request.path.model', id: '$response.body#/metadata/videoId' },
                description: 'Poll the operation',
              },
            },
          },
        },
        errorBody: googleErrorSchema,
        errors: [
          'invalid_request',
          'prompt_too_long',
          'model_not_found',
          // A malformed path (an empty model) is the neighbouring image route's 404.
          'not_found',
          ...BODY_ERRORS,
          'queue_full',
          ...ADMISSION_ERRORS,
        ],
        handler: async (ctx, { caller, params }) => {
          const model = videos.model(params.model, caller);
          const body = await readBody(ctx);
          const request = toVideoRequest(body, model);
          const image = body.instances[0]!.image;
          // Stored once everything else passed; the upstream fetches it by URL like any reference image.
          if (image) request.image = await storeImage(deps.blobs, decodeImage(image));
          const { video } = await videos.submit(caller, model, request);
          ctx.body = toOperation(video, deps.publicBaseUrl);
        },
      }),

      route({
        method: 'get',
        route: OPERATION(v),
        operationId: `getVideoOperation${suffix}`,
        tags,
        summary: `Poll a video operation${v === 'v1' ? ', /v1 form' : ''}`,
        description:
          '`done` once the video task ended: `response.generateVideoResponse.generatedSamples[0].video.uri` ' +
          'when it completed, `error` (a google.rpc.Status) when it failed or its outcome is uncertain. ' +
          "Another owner's operation, an unknown one or one of another model is 404 NOT_FOUND.",
        credentials,
        request: {
          params: z.object({
            model: ModelParam,
            id: z.string().max(256).meta({ description: 'The video id, `video_` and 32 hex digits' }),
          }),
        },
        responses: {
          200: {
            description: 'The operation',
            schema: Operation,
            headers: {
              'Retry-After': {
                description: 'While not done: seconds until the next useful poll',
                schema: { type: 'integer' },
              },
            },
          },
        },
        errorBody: googleErrorSchema,
        errors: ['not_found', 'invalid_request', 'rate_limited'],
        handler: async (ctx, { caller, params }) => {
          const op = toOperation(await videoOf(caller, params.model, params.id), deps.publicBaseUrl);
          if (!op.done) ctx.set('Retry-After', String(pollAfterSeconds));
          ctx.body = op;
        },
      }),

      route({
        method: 'get',
        route: DOWNLOAD(v),
        path: `/${v}/files/{file}:download`,
        operationId: `downloadVideoFile${suffix}`,
        tags,
        summary: `Download a finished operation's video${v === 'v1' ? ', /v1 form' : ''}`,
        description:
          "The bytes of the video a completed operation's `uri` names (what `ai.files.download` fetches), " +
          'with the same API key. 409 FAILED_PRECONDITION while it runs or when it has no video.',
        credentials,
        request: {
          params: z.object({
            file: z.string().max(256).meta({ description: "The uri's file id: the video id's 32 hex digits" }),
          }),
          query: z.object({ alt: z.literal('media').optional().meta({ description: 'What the SDK sends' }) }),
        },
        responses: {
          200: {
            description: 'The video',
            contentType: [...Object.keys(EXT_BY_TYPE), 'application/octet-stream'],
            schema: z.string().meta({ format: 'binary' }),
          },
        },
        errorBody: googleErrorSchema,
        errors: ['not_found', 'invalid_request', 'task_not_ready', 'task_failed', 'service_unavailable'],
        handler: async (ctx, { caller, params }) => {
          if (!VIDEO_HEX.test(params.file)) throw new KilnError('not_found', `File ${params.file} was not found.`);
          const id = `video_${params.file}`;
          const url = await videos.contentUrl(caller, id, 'video').catch((err: unknown) => {
            if (err instanceof KilnError && err.code === 'not_found')
              throw new KilnError('not_found', `File ${fileId(id)} was not found.`);
            throw err;
          });
          await sendVideo(ctx, deps, url);
        },
      }),
    ];
  });
}
