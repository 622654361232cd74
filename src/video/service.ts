// Video task service: submit starts a `videoTaskWorkflow`; polls come from the Redis read model
// (behind the same limiter as image tasks) and reach Temporal only when Redis has no record.
import { videoOptions, type VideoModel } from '../config/models.js';
import { KilnError } from '../shared/errors.js';
import { newVideoRecord, videoStatus, type VideoRequest, type VideoTaskRecord } from '../shared/video-task.js';
import type { VideoTaskWorkflowInput } from '../../workflows/video-task.js';
import type { Caller } from '../infra/callers.js';
import type { WebhookTarget } from '../shared/webhook-types.js';
import { videoView, type VideoView } from '../shared/views.js';
import type { FallbackKind } from '../tasks/fallback.js';
import { storageUnavailable, type TaskKind } from '../tasks/kind.js';
import { TaskService } from '../tasks/service.js';
import { deleteTask } from '../tasks/delete.js';
import { createBlobs } from '../blobs/stores.js';
import { VARIANTS, VideoFiles, type Variant } from './files.js';

export const VIDEO_ID = /^video_[a-f0-9]{32}$/;

export interface VideoListQuery {
  limit: number;
  after?: string;
  order: 'asc' | 'desc';
}

export const VIDEO_FALLBACK: FallbackKind<VideoTaskRecord> = {
  workflowType: 'videoTaskWorkflow',
  record: (f, m) => {
    // The memo is what a submit left for this moment (the payload codec applies: encrypted at rest).
    const memo = m as Partial<Pick<VideoTaskRecord, 'prompt' | 'seconds' | 'size'>>;
    return {
      id: f.id,
      kind: 'video',
      owner: f.owner,
      model: f.model,
      status: f.status,
      progress: 0,
      prompt: memo.prompt ?? '',
      seconds: memo.seconds ?? '',
      size: memo.size ?? '',
      created_at: f.created_at,
      completed_at: f.closed_at,
      error: f.error,
    };
  },
};

const VIDEO: TaskKind<VideoTaskRecord> = {
  kind: 'video',
  idPrefix: 'video',
  idPattern: VIDEO_ID,
  fallback: VIDEO_FALLBACK,
  view: videoView,
  path: '/v1/videos',
  noun: 'Video',
  // accepted -> queued is no change to an OpenAI client: a wait does not wake for it.
  label: videoStatus,
};

export class VideoTaskService extends TaskService<VideoTaskRecord> {
  protected readonly spec = VIDEO;
  private filesOf?: VideoFiles;
  /** Every `seconds` and `size` some configured video model takes (validateVideo checks the model's own). */
  offered(): { seconds: string[]; sizes: string[] } {
    const opts = this.config.models.filter((m): m is VideoModel => m.kind === 'video').map(videoOptions);
    return {
      seconds: [...new Set(opts.flatMap((o) => o.seconds))],
      sizes: [...new Set(opts.flatMap((o) => o.sizes))],
    };
  }

  /** The configured blob store, for deletes and stills (the worker stored the videos there). */
  private get files(): VideoFiles {
    return (this.filesOf ??= new VideoFiles(createBlobs(this.config).blobs));
  }

  async submit(
    caller: Caller,
    model: VideoModel,
    request: VideoRequest,
    opts: { idempotencyKey?: string; webhook?: WebhookTarget } = {},
  ): Promise<{ video: VideoView; replayed: boolean }> {
    const { record, replayed } = await this.submitTask(caller, model, {
      request,
      operation: 'videos',
      idempotencyKey: opts.idempotencyKey,
      webhook: opts.webhook,
      prompt: request.prompt,
      workflow: (base) => {
        const input: VideoTaskWorkflowInput = {
          ...base,
          policy: { ...base.policy, pollIntervalMs: model.pollIntervalMs, overallTimeoutMs: model.overallTimeoutMs },
          results: videoOptions(model).form === 'workflow-node',
        };
        // What a poll shows while Redis has no record (payload codec applies: encrypted at rest).
        const memo = { prompt: request.prompt, seconds: request.seconds, size: request.size };
        return { workflowType: 'videoTaskWorkflow', input, memo };
      },
      record: (input) => newVideoRecord(input.task, 'accepted'),
      units: model.units + model.unitsPerSecond * Number(request.seconds),
    });
    return { video: videoView(record), replayed };
  }

  /**
   * A page of the caller's videos (GET /v1/videos) as JSON text: the stored views joined, never
   * parsed. `after` must be one of the caller's videos still in the list window.
   */
  async list(caller: Caller, q: VideoListQuery): Promise<string> {
    const page = await this.store.page(caller.owner, 'video', q).catch(() => {
      throw storageUnavailable();
    });
    if (page === 'unknown_cursor') {
      throw new KilnError(
        'invalid_request',
        `after: ${q.after} is not one of your videos of the last 3 days; pass the id of an item of an earlier page.`,
      );
    }
    const { ids, items, hasMore } = page;
    const edge = (id: string | undefined) => (id === undefined ? 'null' : `"${id}"`);
    return (
      `{"object":"list","data":[${items.join(',')}],"first_id":${edge(ids[0])},` +
      `"last_id":${edge(ids[ids.length - 1])},"has_more":${hasMore}}`
    );
  }

  /**
   * Where the finished video (or a still of it) is: the blob store's URL, never the upstream's
   * expiring link. A still is made on its first request (files.ts).
   */
  async contentUrl(caller: Caller, id: string, variant: string): Promise<string> {
    if (!(VARIANTS as readonly string[]).includes(variant)) {
      throw new KilnError(
        'invalid_request',
        `variant must be one of ${VARIANTS.join(', ')}; "${variant}" is not offered.`,
      );
    }
    let seconds = 0;
    const url = await this.finished(
      caller,
      id,
      (view: VideoView) => {
        seconds = Number(view.seconds) || 0;
        return view.video_url ?? view.results?.[0]?.url;
      },
      'video',
    );
    return variant === 'video' ? url : this.files.still(url, variant as Exclude<Variant, 'video'>, seconds);
  }

  /**
   * Remix (OpenAI's POST /v1/videos/{id}/remix): no provider Kiln speaks offers it, so the caller's
   * video is answered with a clear refusal (and another owner's or an unknown id with not_found).
   */
  async remix(caller: Caller, id: string): Promise<never> {
    const { model } = JSON.parse((await this.get(caller, id)).json) as { model: string };
    throw new KilnError(
      'invalid_request',
      `Remix is not supported: no channel of model ${model} offers it. Create a new video with POST /v1/videos ` +
        '(remixed_from_video_id stays null on every Kiln video).',
    );
  }

  /** Deletes the caller's finished video: its files, its workflow's history, its record (src/tasks/delete.ts). */
  delete(caller: Caller, id: string): Promise<void> {
    const deps = {
      temporal: this.temporal,
      store: this.store,
      models: this.config.models,
      pollAfterSeconds: this.config.pollAfterSeconds,
    };
    return deleteTask(deps, this.spec, caller.owner, id, (r) => this.files.remove(r));
  }
}
