// Video tasks: create, retrieve, wait (same polling guidance as image tasks), content download.
import type { KilnCore } from './core.js';
import { newIdempotencyKey } from './core.js';
import { KilnClientError } from './errors.js';
import { pollUntilDone } from './polling.js';
import { videoUrlsOf } from './results.js';
import { cancelResource, createThenWait, getResource } from './resource.js';
import type { SubmitOptions, WaitOptions } from './tasks.js';
import type { Video, VideoCreateParams } from './types.js';

/** `GET /v1/videos`: `limit` 1-100 (default 20), `after` the `last_id` of the previous page. */
export interface VideoListParams {
  limit?: number;
  after?: string;
  order?: 'desc' | 'asc';
}

/** One page of the caller's videos of the last 3 days (OpenAI list shape). */
export interface VideoListPage {
  object: 'list';
  data: Video[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}

export const UNFINISHED_VIDEO_STATUSES: readonly string[] = ['queued', 'in_progress', 'accepted', 'running'];

export class Videos {
  constructor(private readonly core: KilnCore) {}

  /**
   * Creates a video task; one `Idempotency-Key` (yours, or a fresh UUID) goes with every retry (see `tasks.submit`).
   */
  async create(params: VideoCreateParams, opts: SubmitOptions = {}): Promise<Video> {
    const headers = { 'idempotency-key': opts.idempotencyKey ?? newIdempotencyKey() };
    const body = {
      ...params,
      ...(opts.webhook !== undefined ? { webhook: opts.webhook } : {}),
      ...(opts.webhookEvents !== undefined ? { webhook_events: opts.webhookEvents } : {}),
    };
    return (await this.core.request<Video>('POST', '/v1/videos', { body, signal: opts.signal, headers })).data;
  }

  /** `POST /v1/videos/{id}/cancel`, as `tasks.cancel`: the task ends `failed` with `error.code: "canceled"`. */
  async cancel(id: string, opts: { signal?: AbortSignal } = {}): Promise<Video & { retryAfterMs?: number }> {
    return cancelResource<Video>(this.core, `/v1/videos/${encodeURIComponent(id)}`, opts);
  }

  /** One video task; `wait` (1-60 s) long-polls as for `tasks.get`. */
  async retrieve(
    id: string,
    opts: { signal?: AbortSignal; wait?: number } = {},
  ): Promise<Video & { retryAfterMs?: number; waited?: boolean }> {
    return getResource<Video>(this.core, `/v1/videos/${encodeURIComponent(id)}`, opts);
  }

  /** One page of the caller's videos, newest first unless `order: 'asc'`. */
  async listPage(params: VideoListParams = {}, opts: { signal?: AbortSignal } = {}): Promise<VideoListPage> {
    return (await this.core.request<VideoListPage>('GET', '/v1/videos', { query: { ...params }, signal: opts.signal }))
      .data;
  }

  /** Every video of the window, page after page (`after` = the previous page's `last_id`, while `has_more`). */
  async *list(params: VideoListParams = {}, opts: { signal?: AbortSignal } = {}): AsyncGenerator<Video> {
    let after = params.after;
    for (;;) {
      const page = await this.listPage({ ...params, ...(after !== undefined ? { after } : {}) }, opts);
      yield* page.data;
      if (!page.has_more || page.last_id === null) return;
      after = page.last_id;
    }
  }

  /** Waits until completed or failed (uncertain included); throws PollTimeoutError (with the id) after the total timeout. */
  wait(id: string, opts: WaitOptions = {}): Promise<Video> {
    return pollUntilDone(
      id,
      async (wait) => {
        const v = await this.retrieve(id, { signal: opts.signal, wait });
        return { value: v, hintMs: v.retryAfterMs, waited: v.waited };
      },
      (v) => v.status,
      (v) => !UNFINISHED_VIDEO_STATUSES.includes(v.status),
      { options: this.core.polling, clock: this.core.clock, ...opts },
    );
  }

  async createAndWait(
    params: VideoCreateParams,
    opts: Omit<WaitOptions, 'submittedAt'> & SubmitOptions & { onSubmitted?: (v: Video) => void } = {},
  ): Promise<Video> {
    return createThenWait(
      this.core,
      () => this.create(params, opts),
      (id, o) => this.wait(id, o),
      opts,
    );
  }

  /** `GET /v1/videos/{id}/content?variant=video`: the video's bytes (the response streams them). */
  async content(id: string, opts: { signal?: AbortSignal; variant?: string } = {}): Promise<Response> {
    const query = { variant: opts.variant ?? 'video' };
    return (
      await this.core.request<void>('GET', `/v1/videos/${encodeURIComponent(id)}/content`, {
        query,
        signal: opts.signal,
        raw: true,
        maxRetries: 0,
      })
    ).response;
  }

  /**
   * The finished video's files: each URL from `video_url`, `data.video_url` or `results[*].url`;
   * when there is none, or a URL cannot be fetched, the content endpoint is the fallback.
   */
  async download(video: Video, opts: { signal?: AbortSignal } = {}): Promise<{ url: string; response: Response }[]> {
    if (video.status !== 'completed')
      throw new KilnClientError(`Video ${video.id} is ${video.status}; only a completed video has content.`);
    const out: { url: string; response: Response }[] = [];
    for (const [i, url] of videoUrlsOf(video).entries()) {
      try {
        out.push({ url, response: await this.core.fetchUrl(url, opts.signal) });
      } catch (err) {
        // The first (main) video falls back to the content endpoint; a later one has no fallback.
        if (i > 0 || opts.signal?.aborted) throw err;
        break;
      }
    }
    if (out.length > 0) return out;
    const res = await this.content(video.id, opts);
    return [{ url: res.url || this.core.url(`/v1/videos/${video.id}/content?variant=video`), response: res }];
  }
}
