// Image task service: submit starts a workflow; reads come from the Redis read model and reach
// Temporal only for ids Redis does not know (then the record is repaired).
import { priorSubmit, replayedRecord, TaskServiceBase } from '../tasks/service.js';
import { requestFingerprint } from '../shared/idempotency.js';
import { createHash } from 'node:crypto';
import type { ImageModel } from '../config.js';
import { KilnError } from '../shared/errors.js';
import { promptText } from '../shared/prompt.js';
import { taskSummary } from '../tasks/summary.js';
import { readFromTemporal, type FallbackKind } from '../tasks/fallback.js';
import { cancelTask, type CancelAnswer, type CancelKind } from '../tasks/cancel.js';
import { newImageRecord, type ImageRequest, type ImageTaskRecord } from '../shared/image-task.js';
import { UNFINISHED_STATUSES, type TaskStatus } from '../shared/task.js';
import type { ImageTaskWorkflowInput } from '../../workflows/image-task.js';
import { indexMember } from '../tasks/store/task-store.js';
import type { WebhookTarget } from '../shared/webhook.js';
import { finishedView, pollViews, taskLimiterKey, type ViewText } from '../tasks/poll.js';
import { longPoll, type WaitAsk } from '../tasks/waits.js';
import type { Caller } from '../infra/auth.js';
import { notFoundItem, taskView, type TaskView } from '../shared/views.js';

export const TASK_ID = /^task_[a-f0-9]{32}$/;
const LIST_MAX_DAYS = 3;
const FALLBACK_LOOKUPS = 100;

const IMAGE_FALLBACK: FallbackKind<ImageTaskRecord> = {
  workflowType: 'imageTaskWorkflow',
  record: (f) => ({
    id: f.id,
    kind: 'image',
    owner: f.owner,
    model: f.model,
    status: f.status,
    created_at: f.created_at,
    finished_at: f.closed_at,
    candidates: null,
    error: f.error,
  }),
};

const IMAGE_CANCEL: CancelKind<ImageTaskRecord> = {
  kind: 'image',
  idPattern: TASK_ID,
  fallback: IMAGE_FALLBACK,
  view: taskView,
  path: '/v1/tasks',
  noun: 'Task',
};

export interface SubmitOptions {
  /** The Idempotency-Key header: the id is derived from it, and a repeat returns the same task. */
  idempotencyKey?: string;
  /** Direct form, with its output: part of what makes two keyed submits the same request. */
  direct?: 'url' | 'base64';
  /** `?webhook=` and `?webhook_events=`, checked: where the task's status changes are delivered. */
  webhook?: WebhookTarget;
}

export interface SubmitResponse {
  id: string;
  object: 'image.task';
  model: string;
  /** `accepted` for a new task; a replay shows the task's state now. */
  status: TaskStatus;
  created_at: number;
  polling_url: string;
  content_url: string;
}

export interface SubmitResult {
  response: SubmitResponse;
  /** True when an Idempotency-Key named an earlier submit's task. */
  replayed: boolean;
  /** The task's record as known at this moment (finished already, for some replays). */
  record: ImageTaskRecord;
}

export interface ListQuery {
  days: number;
  limit: number;
  before_created_at?: number;
  before_id?: string;
}

const LIST_END = Buffer.from(']}');

export class ImageTaskService extends TaskServiceBase<'image'> {
  protected readonly kind = 'image';

  async submit(
    caller: Caller,
    model: ImageModel,
    request: ImageRequest,
    opts: SubmitOptions = {},
  ): Promise<SubmitResult> {
    const key = opts.idempotencyKey;
    const id = this.taskId('task', caller.owner, key);
    const fingerprint = key
      ? requestFingerprint(
          opts.direct ? `generateContent:direct:${opts.direct}` : 'generateContent',
          model.id,
          request,
          opts.webhook,
        )
      : undefined;
    const prior =
      fingerprint && (await priorSubmit<ImageTaskRecord>(this.store, id, 'image', caller.owner, fingerprint));
    if (prior) return this.submitted(prior, true);
    const created_at = Math.floor(Date.now() / 1000);
    const input: ImageTaskWorkflowInput = this.workflowInput(caller, model, id, created_at, request, opts.webhook);
    const outcome = await this.start({
      id,
      workflowType: 'imageTaskWorkflow',
      input,
      owner: caller.owner,
      model: model.id,
      summary: taskSummary('image', model.id, caller.owner, promptText(request), this.config.ops.summaryPromptChars),
      ...(fingerprint ? { idempotency: { fingerprint, created_at } } : {}),
    });
    if (outcome.replayed) {
      const ids = { id, owner: caller.owner, model: model.id };
      return this.submitted(await replayedRecord(this.store, IMAGE_FALLBACK, 'image', ids, outcome.existing), true);
    }
    const record = newImageRecord(input.task, 'accepted');
    // The workflow records its own transitions; this write makes an immediate poll cheap, and a
    // failure here only means that poll takes the Temporal path.
    await this.store.transition(record).catch(() => undefined);
    if (fingerprint) await this.store.rememberFingerprint(id, fingerprint).catch(() => undefined);
    return this.submitted(record, false);
  }

  private submitted(record: ImageTaskRecord, replayed: boolean): SubmitResult {
    const { id } = record;
    const response: SubmitResponse = {
      id,
      object: 'image.task',
      model: record.model,
      status: record.status,
      created_at: record.created_at,
      polling_url: `/v1/tasks/${id}`,
      content_url: `/v1/tasks/${id}/content`,
    };
    return { response, replayed, record };
  }

  /**
   * One task, behind the per-task poll limiter. With `wait`, a long-poll: the limited read comes
   * first, the read after a change or the time is not limited; `waited` says it was honoured.
   */
  async get(caller: Caller, id: string, wait?: WaitAsk): Promise<ViewText & { waited?: boolean }> {
    const limiter = taskLimiterKey(caller.owner, id);
    const read = (limited: boolean) =>
      this.views(caller, [id], limited ? limiter : null, limited ? this.config.rateLimitTaskMs : 0);
    const { views, applied } = await longPoll(this.waits, [id], wait, read, { share: `image\n${caller.owner}\n${id}` });
    const [view] = views;
    if (!view) throw new KilnError('not_found', `Task ${id} was not found.`);
    return applied ? { ...view, waited: true } : view;
  }

  /** `get` without `wait`, when memory answers it (a finished task, no poll limit); else undefined. */
  peek(caller: Caller, id: string): ViewText | undefined {
    return finishedView(this.store, id, caller.owner, 'image', this.config.rateLimitTaskMs);
  }

  /** The batch answer as JSON text: stored views are joined, never parsed. With `wait`, wakes on any listed id. */
  async batchGet(caller: Caller, ids: string[], wait?: WaitAsk): Promise<{ json: string; waited: boolean }> {
    const unique = [...new Set(ids)];
    const setHash = createHash('sha256')
      .update([...unique].sort().join('\n'))
      .digest('hex')
      .slice(0, 32);
    const limiter = `batch:{${caller.owner}}:${setHash}`;
    const read = (limited: boolean) =>
      this.views(caller, unique, limited ? limiter : null, limited ? this.config.rateLimitBatchMs : 0);
    const share = `image\n${caller.owner}\n${unique.join(',')}`;
    const { views, applied } = await longPoll(this.waits, unique, wait, read, { share });
    const items = unique.map((id, i) => views[i]?.json ?? JSON.stringify(notFoundItem(id))).join(',');
    const pollAfterMs = this.config.pollAfterSeconds * 1000;
    const json = `{"object":"batch.task.list","items":[${items}],"next_poll_after_ms":${pollAfterMs}}`;
    return { json, waited: applied };
  }

  /** A page of the owner's tasks as JSON (UTF-8), from the list items stored with the records. */
  async list(caller: Caller, q: ListQuery): Promise<Buffer> {
    const now = Math.floor(Date.now() / 1000);
    const days = Math.min(q.days, LIST_MAX_DAYS);
    const min = `[${indexMember(now - days * 86400, '')}`;
    const max = q.before_created_at === undefined ? '+' : `(${indexMember(q.before_created_at, q.before_id ?? '')}`;
    const items = await this.store.list(caller.owner, max, min, q.limit).catch((err) => {
      throw this.storeDown(err);
    });
    return Buffer.concat([Buffer.from(`{"object":"list","days":${days},"items":[`), items, LIST_END]);
  }

  /** The first image's URL of a finished task. */
  async contentUrl(caller: Caller, id: string): Promise<string> {
    const [stored] = await this.views(caller, [id], null, 0);
    if (!stored) throw new KilnError('not_found', `Task ${id} was not found.`);
    if (UNFINISHED_STATUSES.includes(stored.status)) {
      throw new KilnError(
        'task_not_ready',
        `Task ${id} is ${stored.status}; its content is not ready yet.`,
        this.config.pollAfterSeconds,
      );
    }
    const view = JSON.parse(stored.json) as TaskView;
    const url = view.candidates?.flatMap((c) => c.content.parts).find((p) => p.inlineData)?.inlineData?.data;
    if (stored.status !== 'succeeded' || !url) {
      throw new KilnError(
        'task_failed',
        `Task ${id} ended ${stored.status} and has no image${view.error ? `: ${view.error.message}` : '.'}`,
      );
    }
    return url;
  }

  /** Cancels the caller's unfinished task (202), or answers a finished one unchanged (200). */
  cancel(caller: Caller, id: string): Promise<CancelAnswer> {
    return cancelTask({ temporal: this.temporal, store: this.store }, IMAGE_CANCEL, caller.owner, id);
  }

  private storeDown(err: unknown): KilnError {
    if (err instanceof KilnError) return err;
    return new KilnError('service_unavailable', 'Task storage is unavailable for a moment; retry shortly.', 1);
  }

  /** Owner-scoped views for ids, in order; null where absent or another owner's. */
  private async views(
    caller: Caller,
    ids: string[],
    limiterKey: string | null,
    intervalMs: number,
  ): Promise<(ViewText | null)[]> {
    // Ids that Kiln cannot have issued are not_found without a lookup.
    const valid = ids.map((id) => TASK_ID.test(id));
    // With Redis unreachable every id takes the Temporal path: polls keep answering, unthrottled.
    const stored = await pollViews(
      this.store,
      ids.filter((_, i) => valid[i]),
      caller.owner,
      'image',
      limiterKey,
      intervalMs,
    );
    const out: (ViewText | null)[] = ids.map(() => null);
    const missing: number[] = [];
    for (let i = 0, j = 0; i < ids.length; i++) {
      if (!valid[i]) continue;
      const s = stored[j++];
      if (typeof s === 'object') out[i] = { status: s.status, json: s.view };
      else if (s === 'absent' && missing.length < FALLBACK_LOOKUPS) missing.push(i);
    }
    if (missing.length > 0) {
      const found = await this.fromTemporal(
        caller.owner,
        missing.map((i) => ids[i]),
      );
      for (const i of missing) {
        const r = found.get(ids[i]);
        // Video records share the keyspace: they are never image tasks.
        if (r && r.owner === caller.owner && r.kind === 'image')
          out[i] = { status: r.status, json: JSON.stringify(taskView(r)) };
      }
    }
    return out;
  }

  /** Redis has no record for these ids (lost, or not yet written): Temporal answers, and Redis is repaired. */
  private async fromTemporal(owner: string, ids: string[]): Promise<Map<string, ImageTaskRecord>> {
    return readFromTemporal({ temporal: this.temporal, store: this.store }, IMAGE_FALLBACK, owner, ids);
  }
}
