// Image task service: submit starts a workflow; reads come from the Redis read model and reach
// Temporal only for ids Redis does not know (then the record is repaired).
import { createHash } from 'node:crypto';
import type { ImageModel } from '../config/models.js';
import { promptText } from '../shared/prompt.js';
import { newImageRecord, type ImageRequest, type ImageTaskRecord } from '../shared/image-task.js';
import type { TaskStatus } from '../shared/task.js';
import type { ImageTaskWorkflowInput } from '../../workflows/image-task.js';
import { indexMember } from '../tasks/store/task-store.js';
import type { ListFrame } from '../tasks/store/list-items.js';
import type { WebhookTarget } from '../shared/webhook-types.js';
import { longPoll } from '../tasks/long-poll.js';
import type { WaitAsk } from '../tasks/waits.js';
import type { Caller } from '../infra/callers.js';
import { notFoundItem, taskView, type TaskView } from '../shared/views.js';
import { TaskService } from '../tasks/service.js';
import { storageUnavailable, type TaskKind } from '../tasks/kind.js';
import type { FallbackKind } from '../tasks/fallback.js';

export const TASK_ID = /^task_[a-f0-9]{32}$/;
const LIST_MAX_DAYS = 3;

export const IMAGE_FALLBACK: FallbackKind<ImageTaskRecord> = {
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

const IMAGE: TaskKind<ImageTaskRecord> = {
  kind: 'image',
  idPrefix: 'task',
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
  /** Another surface's endpoint (OpenAI Images): its own fingerprint, so its keys never match a generateContent submit. */
  operation?: string;
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
/** The list object around a page's items, for each window (index: days, 1..LIST_MAX_DAYS), made once. */
const LIST_FRAMES: ListFrame[] = Array.from({ length: LIST_MAX_DAYS + 1 }, (_, days) => ({
  head: Buffer.from(`{"object":"list","days":${days},"items":[`),
  tail: LIST_END,
}));

export class ImageTaskService extends TaskService<ImageTaskRecord> {
  protected readonly spec = IMAGE;

  async submit(
    caller: Caller,
    model: ImageModel,
    request: ImageRequest,
    opts: SubmitOptions = {},
  ): Promise<SubmitResult> {
    const { record, replayed } = await this.submitTask(caller, model, {
      request,
      operation: opts.operation ?? (opts.direct ? `generateContent:direct:${opts.direct}` : 'generateContent'),
      idempotencyKey: opts.idempotencyKey,
      webhook: opts.webhook,
      prompt: promptText(request),
      workflow: (input: ImageTaskWorkflowInput) => ({ workflowType: 'imageTaskWorkflow', input }),
      record: (input) => newImageRecord(input.task, 'accepted'),
      units: model.units,
    });
    return this.submitted(record, replayed);
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
    return this.store.list(caller.owner, max, min, q.limit, LIST_FRAMES[days]).catch(() => {
      throw storageUnavailable();
    });
  }

  /** The first image's URL of a finished task. */
  contentUrl(caller: Caller, id: string): Promise<string> {
    const firstImage = (view: TaskView) =>
      view.candidates?.flatMap((c) => c.content.parts).find((p) => p.inlineData)?.inlineData?.data;
    return this.finished(caller, id, firstImage, 'image');
  }
}
