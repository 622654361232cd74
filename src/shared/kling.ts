// How a Kiln video request reads as a Kling (Kuaishou) task: text-to-video or image-to-video, with
// `duration`, `aspect_ratio` and `mode` from the request's `seconds` and `size`, and which of
// Kling's business codes ends a task with which Kiln code. The models file is refused at start-up
// when a kling model offers a `seconds` or `size` this table cannot express (src/config/models.ts).
// Pure module: no I/O.
import type { TaskFailureCode } from './errors.js';
import type { VideoRequest } from './video-task.js';

/** Kling's `duration` values: its video models render 5 or 10 seconds. */
export const KLING_SECONDS = ['5', '10'] as const;

/** A kling model's `seconds` when the models file names none. */
export const KLING_DEFAULT_SECONDS = KLING_SECONDS;

export interface KlingShape {
  aspectRatio: '16:9' | '9:16' | '1:1';
  /** `std` renders 720p, `pro` 1080p (Kling's "Standard" and "Professional" modes). */
  mode: 'std' | 'pro';
}

/**
 * Kiln's `size` → Kling's frame and mode. The strict (pro) contract's two sizes are Kling's 16:9
 * and 9:16 in `pro` mode: the nearest frames Kling has (7:4 against 16:9), rendered at 1080p.
 */
export const KLING_SIZES: Readonly<Record<string, KlingShape>> = {
  '1280x720': { aspectRatio: '16:9', mode: 'std' },
  '720x1280': { aspectRatio: '9:16', mode: 'std' },
  '720x720': { aspectRatio: '1:1', mode: 'std' },
  '1920x1080': { aspectRatio: '16:9', mode: 'pro' },
  '1080x1920': { aspectRatio: '9:16', mode: 'pro' },
  '1080x1080': { aspectRatio: '1:1', mode: 'pro' },
  '1792x1024': { aspectRatio: '16:9', mode: 'pro' },
  '1024x1792': { aspectRatio: '9:16', mode: 'pro' },
};

export type KlingPath = 'text2video' | 'image2video';

export interface KlingTask {
  /** Under {baseUrl}/v1/videos/. */
  path: KlingPath;
  body: Record<string, string>;
}

export interface KlingRefusal {
  field: string;
  got: string;
  allowed: readonly string[];
}

/** Text-to-video without an image, image-to-video with one: Kling's models take both. */
export const klingPath = (request: Pick<VideoRequest, 'image'>): KlingPath =>
  request.image ? 'image2video' : 'text2video';

/**
 * The task for `upstreamModel`, or the first option it cannot express. `strict` (the pro model)
 * always asks for Kling's `pro` mode: the contract's pro tier is Kling's Professional mode.
 * `externalTaskId` is Kiln's id for the request (kilnJobId), which a lost answer is looked up by.
 */
export function klingVideoTask(
  request: VideoRequest,
  upstreamModel: string,
  opts: { strict: boolean; externalTaskId: string },
): { task: KlingTask } | { refusal: KlingRefusal } {
  if (request.nodeInfoList?.length)
    return { refusal: { field: 'nodeInfoList', got: 'set', allowed: ['none (kling takes no workflow nodes)'] } };
  if (!(KLING_SECONDS as readonly string[]).includes(request.seconds))
    return { refusal: { field: 'seconds', got: request.seconds, allowed: KLING_SECONDS } };
  const shape = KLING_SIZES[request.size];
  if (!shape) return { refusal: { field: 'size', got: request.size, allowed: Object.keys(KLING_SIZES) } };
  const path = klingPath(request);
  const body: Record<string, string> = {
    model_name: upstreamModel,
    prompt: request.prompt,
    duration: request.seconds,
    mode: opts.strict ? 'pro' : shape.mode,
    external_task_id: opts.externalTaskId,
  };
  // Image-to-video takes its frame from the image: Kling's image2video has no aspect_ratio.
  if (request.image) body.image = request.image;
  else body.aspect_ratio = shape.aspectRatio;
  return { task: { path, body } };
}

/** Why a model's `seconds` / `sizes` cannot go to a kling channel: one message per value, empty when all can. */
export function klingVideoRefusals(options: { seconds: readonly string[]; sizes: readonly string[] }): {
  field: 'seconds' | 'sizes';
  message: string;
}[] {
  const out: { field: 'seconds' | 'sizes'; message: string }[] = [];
  for (const s of options.seconds)
    if (!(KLING_SECONDS as readonly string[]).includes(s))
      out.push({
        field: 'seconds',
        message: `seconds "${s}" cannot be sent to kling: Kling takes duration ${KLING_SECONDS.join(' or ')} (set the model's seconds)`,
      });
  for (const s of options.sizes)
    if (!KLING_SIZES[s])
      out.push({
        field: 'sizes',
        message:
          `size "${s}" cannot be sent to kling: Kling takes ${Object.keys(KLING_SIZES).join(', ')} ` +
          `(16:9, 9:16 or 1:1 at 720p std or 1080p pro; set the model's sizes)`,
      });
  return out;
}

/**
 * Kling's business codes (its API reference, "Error Code"). Its `code` wins over the HTTP status:
 * an account out of credit answers 429 1101/1102, which is not a rate limit.
 */
export function klingCodeOf(code: number | undefined, status: number | undefined): TaskFailureCode {
  if (code !== undefined) {
    if (code >= 1000 && code <= 1004) return 'auth_failed';
    // 1100 account exception, 1101 arrears, 1102 resource pack used up or expired.
    if (code >= 1100 && code <= 1102) return 'insufficient_balance';
    // 1103: the account may not use this API or model.
    if (code === 1103) return 'auth_failed';
    if (code >= 1200 && code <= 1203) return 'invalid_request';
    // 1300 platform policy, 1301 content safety: the caller must change the request.
    if (code === 1300 || code === 1301) return 'invalid_request';
    // 1302 too fast, 1303 concurrency over the resource pack's, 1304 IP allow-list.
    if (code === 1302 || code === 1303) return 'upstream_rate_limited';
    if (code === 1304) return 'auth_failed';
    if (code === 5002) return 'upstream_timeout';
    if (code >= 5000 && code <= 5001) return 'upstream_error';
  }
  if (status === undefined) return 'upstream_error';
  if (status === 401 || status === 403) return 'auth_failed';
  if (status === 429) return 'upstream_rate_limited';
  if (status === 504) return 'upstream_timeout';
  if (status >= 400 && status < 500) return 'invalid_request';
  return 'upstream_error';
}

/**
 * Refused before any processing: nothing was created, so the same request may be sent again (on
 * this channel after a wait, or on another). Auth, account and allow-list refusals are the
 * channel's own; 1302/1303 and 5001 (maintenance) refuse the request before it becomes a task.
 * 5000 and 5002 may have been processed.
 */
export function klingRefused(code: number | undefined, status: number): boolean {
  if (code !== undefined && code !== 0) {
    if ((code >= 1000 && code <= 1004) || (code >= 1100 && code <= 1103)) return true;
    if (code === 1302 || code === 1303 || code === 1304 || code === 5001) return true;
    if (code >= 1200 && code <= 1301) return false;
  }
  return status === 429 || status === 503 || status === 401 || status === 403 || status === 402;
}
