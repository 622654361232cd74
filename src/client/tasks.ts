// Image tasks: submit (generateContent, output=url), get, batch-get, list, content, wait.
import type { KilnCore } from './core.js';
import { newIdempotencyKey } from './core.js';
import { KilnClientError } from './errors.js';
import { cancelResource, createThenWait, getResource, withPollHints } from './resource.js';
import { pollBatch, pollUntilDone, UNFINISHED_TASK_STATUSES, type PollProgress } from './polling.js';
import type {
  BatchItem,
  BatchTaskList,
  GenerateContentRequest,
  ImageTask,
  SubmitResponse,
  TaskListItem,
  TaskListPage,
  WebhookEvents,
} from './types.js';

export interface ImageCreateParams {
  model: string;
  prompt: string;
  /** `<w>:<h>`, e.g. "16:9"; omitted lets the service choose. */
  aspectRatio?: string;
  /** Size label, e.g. "2K"; omitted lets the service choose. */
  imageSize?: string;
  /** Reference images: absolute public http(s) URLs (at most 8). */
  references?: (string | { url: string; mimeType?: string })[];
  system?: string;
  topP?: number;
}

export interface SubmitOptions {
  signal?: AbortSignal;
  /**
   * The `Idempotency-Key` (1–255 characters 0x21–0x7E). Default: a fresh UUID per call, reused on
   * that call's retries. Keep it to resubmit after an unknown outcome without a second task.
   */
  idempotencyKey?: string;
  /**
   * An https URL that receives the task object, signed (Standard Webhooks, see `verifyWebhook`),
   * when the task ends; the server refuses a private or loopback address (400 `invalid_webhook_url`).
   */
  webhook?: string;
  /** `terminal` (default): the final state only; `all`: also queued and running. */
  webhookEvents?: WebhookEvents;
}

export interface WaitOptions {
  signal?: AbortSignal;
  /** When the task was submitted (epoch ms): the first check is firstCheckMs after it. Default: now. */
  submittedAt?: number;
  /** Overrides the delay before the first check, e.g. after a check of one's own (then at least the interval). */
  firstDelayMs?: number;
  onProgress?: (p: PollProgress) => void;
}

export interface ListParams {
  days?: number;
  limit?: number;
  before_created_at?: number;
  before_id?: string;
}

const REF_MIME: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  webp: 'image/webp',
  gif: 'image/gif',
};

/** The generateContent body of a task submission from friendly parameters. */
export function buildImageRequest(p: Omit<ImageCreateParams, 'model'>): GenerateContentRequest {
  const refs = (p.references ?? []).map((r) => (typeof r === 'string' ? { url: r } : r));
  const imageConfig = {
    ...(p.aspectRatio ? { aspectRatio: p.aspectRatio } : {}),
    ...(p.imageSize ? { imageSize: p.imageSize } : {}),
    output: 'url' as const,
  };
  return {
    contents: [
      {
        role: 'user',
        parts: [
          { text: p.prompt },
          ...refs.map((r) => ({ inlineData: { mimeType: r.mimeType ?? guessMime(r.url), data: r.url } })),
        ],
      },
    ],
    generationConfig: { responseModalities: ['IMAGE'], ...(p.topP !== undefined ? { topP: p.topP } : {}), imageConfig },
    ...(p.system ? { systemInstruction: { parts: [{ text: p.system }] } } : {}),
  };
}

function guessMime(url: string): string {
  let path = url;
  try {
    path = new URL(url).pathname;
  } catch {
    /* the server reports a bad URL */
  }
  return REF_MIME[path.toLowerCase().split('.').pop() ?? ''] ?? 'image/png';
}

export const isUnfinished = (status: string): boolean => UNFINISHED_TASK_STATUSES.includes(status);

export class Tasks {
  constructor(private readonly core: KilnCore) {}

  /**
   * Submits a raw generateContent body as a task (`?output=url` is added). One `Idempotency-Key`
   * (yours, or a fresh UUID) goes with every retry of this call, so retries never create a second
   * task; pass your own key to resubmit safely later (e.g. after a crash): the same key and body
   * return the same task.
   */
  async submit(model: string, body: GenerateContentRequest, opts: SubmitOptions = {}): Promise<SubmitResponse> {
    const path = `/v1beta/models/${encodeURIComponent(model)}:generateContent`;
    const headers = { 'idempotency-key': opts.idempotencyKey ?? newIdempotencyKey() };
    return (
      await this.core.request<SubmitResponse>('POST', path, {
        body,
        query: { output: 'url', webhook: opts.webhook, webhook_events: opts.webhookEvents },
        signal: opts.signal,
        headers,
      })
    ).data;
  }

  /** Submits an image task from friendly parameters. */
  create(params: ImageCreateParams, opts: SubmitOptions = {}): Promise<SubmitResponse> {
    const { model, ...rest } = params;
    return this.submit(model, buildImageRequest(rest), opts);
  }

  /** Submits, then waits by the polling guidance; resolves to the final task (succeeded, failed or uncertain). */
  async createAndWait(
    params: ImageCreateParams,
    opts: Omit<WaitOptions, 'submittedAt'> & SubmitOptions & { onSubmitted?: (t: SubmitResponse) => void } = {},
  ): Promise<ImageTask> {
    return createThenWait(
      this.core,
      () => this.create(params, opts),
      (id, o) => this.wait(id, o),
      opts,
    );
  }

  /**
   * One task. `retryAfterMs` is the server's hint for the next poll (unfinished tasks). With
   * `wait` (1-60 s) the server may hold the answer until the task changes status (long-poll);
   * `waited` (not enumerable, like `retryAfterMs`) says it did.
   */
  async get(
    id: string,
    opts: { signal?: AbortSignal; wait?: number } = {},
  ): Promise<ImageTask & { retryAfterMs?: number; waited?: boolean }> {
    return getResource<ImageTask>(this.core, `/v1/tasks/${encodeURIComponent(id)}`, opts);
  }

  /**
   * `POST /v1/tasks/{id}/cancel`: the task ends `failed` with `error.code: "canceled"` (the answer
   * usually shows that already; else poll on). A finished task comes back unchanged. Cancelling is
   * idempotent, so retries after a lost answer are safe. Unknown id: NotFoundError.
   */
  async cancel(id: string, opts: { signal?: AbortSignal } = {}): Promise<ImageTask & { retryAfterMs?: number }> {
    return cancelResource<ImageTask>(this.core, `/v1/tasks/${encodeURIComponent(id)}`, opts);
  }

  /** Up to 100 ids in one request (the server's limit); `waitMany` splits larger sets. `wait` as for `get`. */
  async batchGet(
    ids: string[],
    opts: { signal?: AbortSignal; wait?: number } = {},
  ): Promise<BatchTaskList & { waited?: boolean }> {
    const { wait = 0 } = opts;
    const { data, response } = await this.core.request<BatchTaskList>('POST', '/v1/tasks/batch-get', {
      body: wait > 0 ? { ids, wait } : { ids },
      signal: opts.signal,
      maxRetries: 0,
      extraTimeoutMs: wait * 1000,
    });
    return withPollHints(data, response);
  }

  /** One page of recent tasks, newest first. */
  async listPage(params: ListParams = {}, opts: { signal?: AbortSignal } = {}): Promise<TaskListPage> {
    return (await this.core.request<TaskListPage>('GET', '/v1/tasks', { query: { ...params }, signal: opts.signal }))
      .data;
  }

  /** Every recent task, newest first, following the (before_created_at, before_id) cursor. */
  async *list(
    params: Omit<ListParams, 'before_created_at' | 'before_id'> = {},
    opts: { signal?: AbortSignal } = {},
  ): AsyncGenerator<TaskListItem> {
    const limit = params.limit ?? 20;
    let cursor: Pick<ListParams, 'before_created_at' | 'before_id'> = {};
    for (;;) {
      const page = await this.listPage({ ...params, limit, ...cursor }, opts);
      yield* page.items;
      if (page.items.length < limit) return;
      const last = page.items[page.items.length - 1];
      cursor = { before_created_at: last.created_at, before_id: last.id };
    }
  }

  /** The first image's URL, from the content redirect (409 TaskNotReadyError while unfinished). */
  async content(id: string, opts: { signal?: AbortSignal } = {}): Promise<string> {
    const { response } = await this.core.request<void>('GET', `/v1/tasks/${encodeURIComponent(id)}/content`, {
      manualRedirect: true,
      signal: opts.signal,
      maxRetries: 0,
    });
    const location = response.headers.get('location');
    if (!location)
      throw new KilnClientError(`GET /v1/tasks/${id}/content answered ${response.status} without a Location header.`);
    return new URL(location, this.core.baseURL).toString();
  }

  /**
   * Waits for one task by the polling guidance and resolves to it once it is succeeded, failed or
   * uncertain; the caller decides what each means (uncertain must not be resubmitted blindly).
   * Throws PollTimeoutError (carrying the id) after the total timeout.
   */
  wait(id: string, opts: WaitOptions = {}): Promise<ImageTask> {
    return pollUntilDone(
      id,
      async (wait) => {
        const t = await this.get(id, { signal: opts.signal, wait });
        return { value: t, hintMs: t.retryAfterMs, waited: t.waited };
      },
      (t) => t.status,
      (t) => !isUnfinished(t.status),
      { options: this.core.polling, clock: this.core.clock, ...opts },
    );
  }

  /**
   * Waits for many tasks with batch-get: each cycle asks only for ids still unfinished, 100 per
   * request, all requests of a cycle together. Resolves to the final item per id (not_found too).
   */
  waitMany(ids: string[], opts: WaitOptions = {}): Promise<Map<string, BatchItem>> {
    if (ids.length === 0) return Promise.resolve(new Map());
    return pollBatch(
      ids,
      async (batch, wait, signal) => {
        const r = await this.batchGet(batch, { signal, wait });
        return { items: r.items, hintMs: r.next_poll_after_ms, waited: r.waited };
      },
      { options: this.core.polling, clock: this.core.clock, ...opts },
    );
  }
}
