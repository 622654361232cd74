// A Kiln video task seen as a Gemini long-running operation: its name, whether it is done, and its
// response (the video's download URI) or its error (a google.rpc.Status), plus the schemas that
// document them. The task's record stays the only state: an operation is a view of it.
import { z } from 'zod';
import type { VideoView } from '../shared/views.js';
import { ErrorInfo, RPC_CODES, rpcName, rpcStatus, type RpcStatus } from '../http/google-errors.js';
import { TASK_FAILURE_CODES } from '../shared/errors.js';

export const RESPONSE_TYPE = 'type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse';
export const METADATA_TYPE = 'type.googleapis.com/kiln.v1.VideoOperationMetadata';

/** The operation id is the video task id; its file id (for files/{id}:download) the id's hex part. */
export const VIDEO_HEX = /^[a-f0-9]{32}$/;
export const operationName = (model: string, videoId: string) => `models/${model}/operations/${videoId}`;
export const fileId = (videoId: string) => videoId.slice('video_'.length);

/**
 * The video's `uri`. The SDK's files.download finds the file id in an https URI (after `files/`)
 * but would put any other absolute URI whole into its request path, so an http deployment (dev,
 * tests) answers the relative `files/<id>`, which the SDK also takes.
 */
export function videoUri(publicBaseUrl: string, videoId: string): string {
  const id = fileId(videoId);
  return publicBaseUrl.startsWith('https://')
    ? `${publicBaseUrl}/v1beta/files/${id}:download?alt=media`
    : `files/${id}`;
}

/** What a caller can do about a task that ended `uncertain`. */
function uncertainMessage(view: VideoView): string {
  return (
    `The outcome of video ${view.id} is uncertain: ${view.uncertain_reason ?? 'the upstream answer was lost'}. ` +
    'Kiln does not resend the request, since the upstream may have made (and billed) the video, and it cannot ' +
    'tell whether one exists. To try again, start a new operation; once the upstream is known not to have ' +
    `billed this one, an operator can release its held units (POST /admin/v1/tasks/${view.id}/release).`
  );
}

function rpcError(view: VideoView): RpcStatus {
  // An uncertain video is `failed` with code `uncertain` on /v1/videos (src/shared/views.ts): not a
  // catalogue code, so UNKNOWN (rpcName), with a message saying what the caller can do.
  if (view.error?.code === 'uncertain') return rpcStatus('uncertain', uncertainMessage(view));
  return rpcStatus(view.error?.code ?? 'upstream_error', view.error?.message ?? 'The video failed.');
}

/** The operation of a video task as GET .../operations/{id} answers it. */
export function toOperation(view: VideoView, publicBaseUrl: string) {
  const done = view.status === 'completed' || view.status === 'failed';
  const url = view.video_url ?? view.results?.[0]?.url;
  return {
    name: operationName(view.model, view.id),
    metadata: { '@type': METADATA_TYPE, videoId: view.id, status: view.status, progress: view.progress },
    done,
    ...(view.status === 'completed'
      ? {
          response: {
            '@type': RESPONSE_TYPE,
            generateVideoResponse: {
              generatedSamples: url ? [{ video: { uri: videoUri(publicBaseUrl, view.id) } }] : [],
            },
          },
        }
      : {}),
    ...(view.status === 'failed' ? { error: rpcError(view) } : {}),
  };
}

export const Operation = z
  .object({
    name: z.string().meta({
      description: '`models/{model}/operations/{id}`; GET `/v1beta/{name}` polls it. `id` is the Kiln video id',
      example: 'models/kiln-video-1/operations/video_0123456789abcdef0123456789abcdef',
    }),
    metadata: z.object({
      '@type': z.literal(METADATA_TYPE),
      videoId: z.string().meta({ description: 'The video task (also under GET /v1/videos/{id})' }),
      status: z.enum(['queued', 'in_progress', 'completed', 'failed']),
      progress: z.number().int().min(0).max(100),
    }),
    done: z.boolean(),
    response: z
      .object({
        '@type': z.literal(RESPONSE_TYPE),
        generateVideoResponse: z.object({
          generatedSamples: z.array(
            z.object({
              video: z.object({
                uri: z.string().meta({
                  description:
                    'GET with the API key: `<base>/v1beta/files/{id}:download?alt=media` (an http base: `files/{id}`)',
                }),
              }),
            }),
          ),
        }),
      })
      .optional()
      .meta({ description: 'Done and completed only' }),
    error: z
      .object({
        code: z
          .number()
          .int()
          .meta({
            description:
              `google.rpc.Code: ${TASK_FAILURE_CODES.map((c) => `${c} ${RPC_CODES[rpcName(c)]}`).join(', ')}; ` +
              'uncertain and any other 2 (UNKNOWN)',
          }),
        message: z.string(),
        details: z.array(ErrorInfo).meta({ description: "reason: the task's Kiln error code (or UNCERTAIN)" }),
      })
      .optional()
      .meta({ description: 'Done and failed or uncertain only' }),
  })
  .meta({ id: 'GeminiVideoOperation' });
