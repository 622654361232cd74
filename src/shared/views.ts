// The public shapes of stored records. The read model writes them, already serialised, beside each
// record on every transition, so a poll, batch or list answers with stored JSON text instead of
// parsing and re-serialising records on every request. Pure: also used where records are rebuilt
// from Temporal.
import type { ImageTaskRecord } from './image-task.js';
import type { AnyTaskRecord } from './records.js';
import { videoStatus, type VideoTaskRecord } from './video-task.js';

export type TaskView = ReturnType<typeof taskView>;
export type VideoView = ReturnType<typeof videoView>;

/**
 * Extension fields: when the upstream call began (null before), how many attempts it took (across
 * channels), and the channel that served it (or was tried last; null before the first attempt).
 */
function timing(r: AnyTaskRecord): { started_at: number | null; attempts: number; channel: string | null } {
  return { started_at: r.started_at ?? null, attempts: r.attempts ?? 0, channel: r.channel ?? null };
}

export function taskView(r: ImageTaskRecord) {
  const base = {
    id: r.id,
    object: 'image.task' as const,
    model: r.model,
    status: r.status as string,
    created_at: r.created_at,
    finished_at: r.finished_at,
    ...timing(r),
    ...(r.webhook ? { webhook: r.webhook } : {}),
  };
  if (r.status === 'succeeded') {
    return {
      ...base,
      response_id: r.response_id,
      model_version: r.model_version,
      candidates: r.candidates,
      error: null,
    };
  }
  if (r.status === 'uncertain') return { ...base, candidates: null, error: null, uncertain_reason: r.uncertain_reason };
  return { ...base, candidates: null, error: r.error };
}

/** One entry of GET /v1/tasks. */
export function listItem(r: ImageTaskRecord) {
  return {
    id: r.id,
    model: r.model,
    status: r.status,
    created_at: r.created_at,
    finished_at: r.finished_at,
    ...timing(r),
    content_url: `/v1/tasks/${r.id}/content`,
  };
}

export function notFoundItem(id: string) {
  return {
    id,
    object: 'image.task' as const,
    status: 'not_found',
    error: { code: 'not_found', message: `Task ${id} was not found.` },
  };
}

/** An uncertain video's `error`: what happened, and how the caller settles it. */
const uncertainError = (reason: string | undefined) => ({
  code: 'uncertain',
  message:
    `${reason ?? 'The request may have reached the upstream, but its answer was lost.'} Kiln did not resend ` +
    'it: the video may exist upstream. Resubmit with the same Idempotency-Key to see this task again, or ' +
    'with a new key to make another video.',
});

/** The OpenAI video object (an uncertain video: `failed`, error code `uncertain`), plus `video_url`, `uncertain_reason` and (workflow-node) `results`. */
export function videoView(r: VideoTaskRecord) {
  const done = r.status === 'succeeded';
  return {
    id: r.id,
    object: 'video' as const,
    model: r.model,
    status: videoStatus(r.status),
    progress: done ? 100 : r.progress,
    created_at: r.created_at,
    completed_at: r.completed_at,
    ...timing(r),
    expires_at: r.expires_at ?? null,
    prompt: r.prompt,
    remixed_from_video_id: null,
    seconds: r.seconds,
    size: r.size,
    error: r.status === 'failed' ? r.error : r.status === 'uncertain' ? uncertainError(r.uncertain_reason) : null,
    ...(done && r.video_url ? { video_url: r.video_url } : {}),
    ...(done && r.results ? { results: r.results } : {}),
    ...(r.status === 'uncertain' ? { uncertain_reason: r.uncertain_reason } : {}),
    ...(r.webhook ? { webhook: r.webhook } : {}),
  };
}

/**
 * The serialised views stored with a record: `view` answers polls, `item` list pages. A video's
 * list item is its view (GET /v1/videos lists the objects GET /v1/videos/{id} answers).
 */
export function storedViews(r: AnyTaskRecord): { view: string; item: string } {
  if (r.kind === 'video') {
    const view = JSON.stringify(videoView(r));
    return { view, item: view };
  }
  return { view: JSON.stringify(taskView(r)), item: JSON.stringify(listItem(r)) };
}
