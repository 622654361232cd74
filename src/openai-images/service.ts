// OpenAI Images on Kiln's image models: each image asked for is one ordinary image task (its own
// workflow, listed in /v1/tasks, admitted and charged like any submit), started through the image
// service; the synchronous answer waits for their workflows as the direct form does.
import { createHash } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { ImageModel, Model } from '../config/models.js';
import type { Caller } from '../infra/callers.js';
import type { Blobs } from '../blobs/stores.js';
import { UnusableUrl, type SafeFetch } from '../infra/safe-fetch.js';
import type { ImageTaskService, SubmitResponse, SubmitResult } from '../image/service.js';
import { validateSubmit } from '../image/validate.js';
import { ERROR_STATUS, KilnError, type ErrorCode } from '../shared/errors.js';
import type { ImageRequest, ImageTaskRecord } from '../shared/image-task.js';
import { LIMITS } from '../shared/limits.js';
import { TERMINAL_STATUSES } from '../shared/task.js';
import type { WebhookTarget } from '../shared/webhook-types.js';
import { storageUnavailable } from '../tasks/kind.js';
import type { RedisClient } from '../tasks/store/task-store.js';
// Type only: the handle's result is typed by the workflow function, whose code the API never loads.
import type { imageTaskWorkflow } from '../../workflows/image-task.js';
import type { Upload } from './multipart.js';
import { imageConfigOf, imageModelOf, type ImagesAsk, type ResponseFormat } from './params.js';
import { withDeadline } from '../shared/deadline.js';

export interface OpenAIImagesDeps {
  tasks: ImageTaskService;
  temporal: Client;
  blobs: Blobs;
  /** For result images an upstream returned as URLs outside the blob store, when b64_json is asked for. */
  fetchImage: SafeFetch;
  models: readonly Model[];
  /** Where a key's generation is kept (see `generation`): the read model's Redis. */
  redis: RedisClient;
  prefix: string;
  retentionSeconds: number;
}

export interface ImagesCall {
  endpoint: 'generations' | 'edits';
  ask: ImagesAsk;
  images?: Upload[];
  idempotencyKey?: string;
  webhook?: WebhookTarget;
}

export interface Started {
  model: ImageModel;
  tasks: SubmitResult[];
  /** Every task named an earlier request's task (an Idempotency-Key resent). */
  replayed: boolean;
}

export type ImageDatum = { url: string } | { b64_json: string };
export interface ImagesResponse {
  created: number;
  data: ImageDatum[];
}

/**
 * The Gemini-form request of one image: the prompt, then each uploaded file as an inline reference
 * image. The text-only checks are the task form's own (validateSubmit).
 */
export function imageRequest(ask: ImagesAsk, model: ImageModel, images: Upload[] = []): ImageRequest {
  const imageConfig = imageConfigOf(ask, model);
  const base = validateSubmit(
    {
      contents: [{ role: 'user', parts: [{ text: ask.prompt }] }],
      ...(Object.keys(imageConfig).length ? { generationConfig: { imageConfig } } : {}),
      output: 'url',
    },
    'url',
    model,
  );
  if (images.length === 0) return base;
  const [first] = base.contents;
  const parts = [
    ...first!.parts,
    ...images.map((i) => ({ inlineData: { mimeType: i.mimeType, data: i.data.toString('base64') } })),
  ];
  const request: ImageRequest = { ...base, contents: [{ ...first, parts }] };
  // The edit form's byte limits keep this true; the check stays as the payload's last guard.
  const bytes = Buffer.byteLength(JSON.stringify(request));
  if (bytes > LIMITS.requestBytes)
    throw new KilnError(
      'request_too_large',
      `The images take ${bytes} bytes as base64; at most ${LIMITS.requestBytes}.`,
    );
  return request;
}

export class OpenAIImagesService {
  constructor(private readonly deps: OpenAIImagesDeps) {}

  /** The image model of that id for this caller (404, 400 for another kind, 403 outside the key's list). */
  model(id: string, caller: Caller): ImageModel {
    const model = imageModelOf(this.deps.models, id);
    this.deps.tasks.model(id, caller);
    return model;
  }

  webhookTarget(url: unknown, events: unknown): WebhookTarget | undefined {
    return this.deps.tasks.webhookTarget(url, events);
  }

  /**
   * Starts `n` tasks, one after another. When one is refused (quota, queue), the tasks this call
   * started are canceled (they settle canceled, their units released) and the refusal is answered.
   */
  async start(caller: Caller, call: ImagesCall): Promise<Started> {
    const { ask, idempotencyKey: key } = call;
    const model = this.model(ask.model, caller);
    const request = imageRequest(ask, model, call.images);
    const generation = key ? await this.generation(caller.owner, key) : 0;
    const operation = `openai-images.${call.endpoint}:${ask.responseFormat}:n=${ask.n}`;
    const tasks: SubmitResult[] = [];
    for (let i = 0; i < ask.n; i++) {
      try {
        tasks.push(
          await this.deps.tasks.submit(caller, model, request, {
            // A newline cannot occur in a header's key: these never meet a generateContent key.
            ...(key ? { idempotencyKey: `openai-images\n${generation}\n${i}\n${key}` } : {}),
            operation,
            webhook: call.webhook,
          }),
        );
      } catch (err) {
        const own = tasks.filter((t) => !t.replayed).map((t) => t.response.id);
        if (own.length === 0 || !(err instanceof KilnError)) throw err;
        const answers = await Promise.all(own.map((id) => this.deps.tasks.cancel(caller, id).catch(() => null)));
        // The key's canceled tasks must not answer its retry: the next use of the key starts anew.
        if (key) await this.nextGeneration(caller.owner, key);
        const stopped = answers.filter((a) => a?.code === 202).length;
        const were = (k: number) => (k === 1 ? 'was' : 'were');
        throw new KilnError(
          err.code,
          `Image ${i + 1} of ${ask.n} was not started: ${err.message} ` +
            (stopped === own.length
              ? `The ${own.length} already started ${were(own.length)} canceled.`
              : `Of the ${own.length} already started, ${stopped} ${were(stopped)} canceled; the others had ended.`),
          err.retryAfterSeconds,
        );
      }
    }
    return { model, tasks, replayed: tasks.every((t) => t.replayed) };
  }

  /** The asynchronous answer: the tasks as generateContent's submit answers them. */
  listed(started: Started): { object: 'list'; data: SubmitResponse[] } {
    return { object: 'list', data: started.tasks.map((t) => t.response) };
  }

  /**
   * The synchronous answer, once every task has ended: each task's first image. The first failure
   * is the answer; the other tasks are canceled then, as nobody will receive their images.
   */
  async answer(caller: Caller, started: Started, format: ResponseFormat): Promise<ImagesResponse> {
    const ids = started.tasks.map((t) => t.response.id);
    const images = started.tasks.map((t) => this.finished(t).then((r) => firstImage(r)));
    let urls: string[];
    try {
      urls = await Promise.all(images);
    } catch (err) {
      await Promise.all(ids.map((id) => this.deps.tasks.cancel(caller, id).catch(() => undefined)));
      throw err;
    }
    const data = await Promise.all(
      urls.map(async (url): Promise<ImageDatum> => (format === 'url' ? { url } : { b64_json: await this.bytes(url) })),
    );
    return { created: started.tasks[0]!.response.created_at, data };
  }

  /** The task's final record: a finished replay's from the read model, else its workflow's result. */
  private async finished(t: SubmitResult): Promise<ImageTaskRecord> {
    const { id } = t.response;
    if (t.replayed && TERMINAL_STATUSES.includes(t.record.status)) return t.record;
    try {
      return await this.deps.temporal.workflow.getHandle<typeof imageTaskWorkflow>(id).result();
    } catch {
      // Terminated or reset by an operator: there is no record to answer with.
      throw new KilnError('upstream_error', `Task ${id} ended without a result; see GET /v1/tasks/${id}.`);
    }
  }

  private async bytes(url: string): Promise<string> {
    const stored = await this.deps.blobs.read(url);
    if (stored) return stored.data.toString('base64');
    try {
      return (await withDeadline(30_000, (signal) => this.deps.fetchImage(url, signal))).data.toString('base64');
    } catch (err) {
      const why = err instanceof UnusableUrl ? err.message : 'no answer in time';
      throw new KilnError(
        'upstream_error',
        `The upstream returned an image URL that could not be read back as base64 (${why}); ask for response_format=url.`,
      );
    }
  }

  /**
   * A key's generation: 0 until a request of that key was refused part way, one more after each
   * such refusal. It is part of each task's derived key, so a retry after a refusal is a new request.
   */
  private genKey(owner: string, key: string): string {
    const hash = createHash('sha256').update(key).digest('hex').slice(0, 32);
    return `${this.deps.prefix}openai-images:{${owner}}:${hash}`;
  }

  private async generation(owner: string, key: string): Promise<number> {
    const got = await this.deps.redis.get(this.genKey(owner, key)).catch(() => {
      throw storageUnavailable();
    });
    return Number(got ?? 0) || 0;
  }

  private async nextGeneration(owner: string, key: string): Promise<void> {
    const k = this.genKey(owner, key);
    await this.deps.redis
      .multi()
      .incr(k)
      .expire(k, this.deps.retentionSeconds)
      .exec()
      .catch(() => undefined);
  }
}

/** The first image URL of a task's record, or the error its end stands for. */
function firstImage(record: ImageTaskRecord): string {
  const { id } = record;
  if (record.status === 'uncertain')
    throw new KilnError(
      'upstream_error',
      `Task ${id}: the outcome is uncertain. ${record.uncertain_reason ?? ''}`.trim(),
    );
  const url = record.candidates?.flatMap((c) => c.content.parts).find((p) => p.inlineData)?.inlineData?.data;
  if (record.status === 'succeeded' && url) return url;
  const code = record.error?.code;
  throw new KilnError(
    code && Object.hasOwn(ERROR_STATUS, code) ? (code as ErrorCode) : 'upstream_error',
    record.error?.message ?? `Task ${id} ended ${record.status} without an image.`,
  );
}
