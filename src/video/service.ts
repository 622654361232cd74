// Video task service: submit starts a `videoTaskWorkflow`; polls come from the Redis read model
// (behind the same limiter as image tasks) and reach Temporal only when Redis has no record.
import { priorSubmit, replayedRecord, TaskServiceBase } from '../tasks/service.js';
import { requestFingerprint } from '../shared/idempotency.js';
import { videoOptions, type VideoModel } from '../config.js';
import { KilnError } from '../shared/errors.js';
import { UNFINISHED_STATUSES } from '../shared/task.js';
import { newVideoRecord, videoStatus, type VideoRequest, type VideoTaskRecord } from '../shared/video-task.js';
import type { VideoTaskWorkflowInput } from '../../workflows/video-task.js';
import type { Caller } from '../infra/auth.js';
import type { WebhookTarget } from '../shared/webhook.js';
import { finishedView, pollViews, taskLimiterKey, type ViewText } from '../tasks/poll.js';
import { longPoll, type WaitAsk } from '../tasks/waits.js';
import { videoView, type VideoView } from '../shared/views.js';
import { readFromTemporal, type FallbackKind } from '../tasks/fallback.js';
import { cancelTask, type CancelAnswer, type CancelKind } from '../tasks/cancel.js';
import { taskSummary } from '../tasks/summary.js';

export const VIDEO_ID = /^video_[a-f0-9]{32}$/;

export interface VideoListQuery {
  limit: number;
  after?: string;
  order: 'asc' | 'desc';
}

const VIDEO_FALLBACK: FallbackKind<VideoTaskRecord> = {
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

const VIDEO_CANCEL: CancelKind<VideoTaskRecord> = {
  kind: 'video',
  idPattern: VIDEO_ID,
  fallback: VIDEO_FALLBACK,
  view: videoView,
  path: '/v1/videos',
  noun: 'Video',
};

export class VideoTaskService extends TaskServiceBase<'video'> {
  protected readonly kind = 'video';

  async submit(
    caller: Caller,
    model: VideoModel,
    request: VideoRequest,
    opts: { idempotencyKey?: string; webhook?: WebhookTarget } = {},
  ): Promise<{ video: VideoView; replayed: boolean }> {
    const key = opts.idempotencyKey;
    const id = this.taskId('video', caller.owner, key);
    const fingerprint = key ? requestFingerprint('videos', model.id, request, opts.webhook) : undefined;
    const prior =
      fingerprint && (await priorSubmit<VideoTaskRecord>(this.store, id, 'video', caller.owner, fingerprint));
    if (prior) return { video: videoView(prior), replayed: true };
    const created_at = Math.floor(Date.now() / 1000);
    const base = this.workflowInput(caller, model, id, created_at, request, opts.webhook);
    const input: VideoTaskWorkflowInput = {
      ...base,
      policy: { ...base.policy, pollIntervalMs: model.pollIntervalMs, overallTimeoutMs: model.overallTimeoutMs },
      results: videoOptions(model).form === 'workflow-node',
    };
    const outcome = await this.start({
      id,
      workflowType: 'videoTaskWorkflow',
      input,
      owner: caller.owner,
      model: model.id,
      // What a poll shows while Redis has no record (payload codec applies: encrypted at rest).
      memo: { prompt: request.prompt, seconds: request.seconds, size: request.size },
      summary: taskSummary('video', model.id, caller.owner, request.prompt, this.config.ops.summaryPromptChars),
      ...(fingerprint ? { idempotency: { fingerprint, created_at } } : {}),
    });
    if (outcome.replayed) {
      const ids = { id, owner: caller.owner, model: model.id };
      return {
        video: videoView(await replayedRecord(this.store, VIDEO_FALLBACK, 'video', ids, outcome.existing)),
        replayed: true,
      };
    }
    const record = newVideoRecord(input.task, 'accepted');
    // The workflow records its own transitions; this write makes an immediate poll cheap.
    await this.store.transition(record).catch(() => undefined);
    if (fingerprint) await this.store.rememberFingerprint(id, fingerprint).catch(() => undefined);
    return { video: videoView(record), replayed: false };
  }

  /**
   * One video task, behind the per-task poll limiter. With `wait`, a long-poll that wakes when the
   * OpenAI status changes (accepted -> queued is no change there); `waited` says it was honoured.
   */
  async get(caller: Caller, id: string, wait?: WaitAsk): Promise<ViewText & { waited?: boolean }> {
    if (!wait) return this.read(caller, id, true);
    const read = async (limited: boolean) => [await this.read(caller, id, limited)];
    const share = `video\n${caller.owner}\n${id}`;
    const { views, applied } = await longPoll(this.waits, [id], wait, read, { label: videoStatus, share });
    return applied ? { ...views[0]!, waited: true } : views[0]!;
  }

  /** `get` without `wait`, when memory answers it (a finished video, no poll limit); else undefined. */
  peek(caller: Caller, id: string): ViewText | undefined {
    return finishedView(this.store, id, caller.owner, 'video', this.config.rateLimitTaskMs);
  }

  /**
   * A page of the caller's videos (GET /v1/videos) as JSON text: the stored views joined, never
   * parsed. `after` must be one of the caller's videos still in the list window.
   */
  async list(caller: Caller, q: VideoListQuery): Promise<string> {
    const page = await this.store.page(caller.owner, 'video', q).catch(() => {
      throw new KilnError('service_unavailable', 'Task storage is unavailable for a moment; retry shortly.', 1);
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

  /** Where the finished video is: the blob store's URL (never the upstream's expiring link). */
  async contentUrl(caller: Caller, id: string, variant: string): Promise<string> {
    if (variant !== 'video')
      throw new KilnError('invalid_request', `variant must be "video"; "${variant}" is not offered.`);
    const stored = await this.read(caller, id, false);
    if (UNFINISHED_STATUSES.includes(stored.status)) {
      throw new KilnError(
        'task_not_ready',
        `Video ${id} is ${videoStatus(stored.status)}; its content is not ready yet.`,
        this.config.pollAfterSeconds,
      );
    }
    const view = JSON.parse(stored.json) as VideoView;
    const url = view.video_url ?? view.results?.[0]?.url;
    if (stored.status !== 'succeeded' || !url) {
      throw new KilnError(
        'task_failed',
        `Video ${id} ended ${videoStatus(stored.status)} and has ` +
          `no video${view.error ? `: ${view.error.message}` : '.'}`,
      );
    }
    return url;
  }

  /** Cancels the caller's unfinished video task (202), or answers a finished one unchanged (200). */
  cancel(caller: Caller, id: string): Promise<CancelAnswer> {
    return cancelTask({ temporal: this.temporal, store: this.store }, VIDEO_CANCEL, caller.owner, id);
  }

  private async read(caller: Caller, id: string, limited: boolean): Promise<ViewText> {
    // Built only when needed: an Error's stack trace was a visible share of a poll's CPU.
    const notFound = () => new KilnError('not_found', `Video ${id} was not found.`);
    if (!VIDEO_ID.test(id)) throw notFound();
    const [stored] = await pollViews(
      this.store,
      [id],
      caller.owner,
      'video',
      limited ? taskLimiterKey(caller.owner, id) : null,
      limited ? this.config.rateLimitTaskMs : 0,
    );
    if (typeof stored === 'object') return { status: stored.status, json: stored.view };
    if (stored === 'foreign') throw notFound();
    const record = await this.fromTemporal(caller.owner, id);
    if (!record || record.owner !== caller.owner || record.kind !== 'video') throw notFound();
    return { status: record.status, json: JSON.stringify(videoView(record)) };
  }

  /** Redis has no record (lost, or Redis down): Temporal answers, and Redis is repaired. */
  private async fromTemporal(owner: string, id: string): Promise<VideoTaskRecord | null> {
    return (
      (await readFromTemporal({ temporal: this.temporal, store: this.store }, VIDEO_FALLBACK, owner, [id])).get(id) ??
      null
    );
  }
}
