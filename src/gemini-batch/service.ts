// Gemini batch mode on Kiln's image models. Each inline request is submitted as its own image task
// through ImageTaskService (validation, quotas, owner scope and idempotency as for any submit);
// the batch record only names those tasks, and every read derives the batch from their records:
// one read of the record, one of the tasks' stored views (per node on a Redis Cluster).
import { createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { Config } from '../config/env.js';
import type { Caller } from '../infra/callers.js';
import { IMAGE_FALLBACK, type ImageTaskService } from '../image/service.js';
import { KilnError } from '../shared/errors.js';
import { canonicalJson } from '../shared/idempotency.js';
import { UNFINISHED_STATUSES } from '../shared/task.js';
import { taskView, type TaskView } from '../shared/views.js';
import { readFromTemporal } from '../tasks/fallback.js';
import { pollViews } from '../tasks/poll.js';
import { keyReused } from '../tasks/start.js';
import type { TaskStore } from '../tasks/store/task-store.js';
import { rpcStatus } from '../http/google-errors.js';
import { checkBatch } from './request.js';
import { inlinedResponses, inPool, type ImageSource } from './results.js';
import { BatchStore, isCursor, type BatchItem, type BatchRecord, type StoredBatch } from './store.js';
import { operation, summarize, type Operation, type TaskNow } from './view.js';

export const BATCH_ID = /^batch_[a-f0-9]{32}$/;
export const PAGE_SIZE = { default: 10, max: 50 } as const;

/** Ids asked of Temporal per read at most (a whole batch fits). */
const FALLBACK_LOOKUPS = 100;
/** Cancels sent at once when a batch is canceled; each waits up to 3 s for its task to stop. */
const CANCELS_AT_ONCE = 20;

export interface GeminiBatchDeps extends ImageSource {
  config: Pick<Config, 'redisPrefix' | 'retentionSeconds' | 'ownerKey' | 'models'>;
  tasks: ImageTaskService;
  store: TaskStore;
  temporal: Client;
}

const notFound = (id: string) => new KilnError('not_found', `Batch batches/${id} was not found.`);
const unavailable = () =>
  new KilnError('service_unavailable', 'Batch storage is unavailable for a moment; retry shortly.', 1);

export class GeminiBatches {
  private readonly batches: BatchStore;
  private readonly idSecret: Buffer;

  constructor(private readonly deps: GeminiBatchDeps) {
    this.batches = new BatchStore(deps.store.redis, deps.config.redisPrefix, deps.config.retentionSeconds);
    this.idSecret = Buffer.from(
      hkdfSync('sha256', deps.config.ownerKey, Buffer.alloc(0), 'kiln gemini batch id v1', 32),
    );
  }

  /** model_not_found (or model_not_allowed) before the body is read. */
  checkModel(name: string, caller: Caller): void {
    this.deps.tasks.model(name, caller);
  }

  /**
   * Submits each request in order (so when a limit is reached, the requests after it are the ones
   * refused), then writes the batch. With an Idempotency-Key the batch id and each request's task
   * id derive from it: a create sent again answers the same batch (`replayed`), whatever got done
   * the first time.
   */
  async create(
    caller: Caller,
    modelName: string,
    raw: unknown,
    idempotencyKey?: string,
  ): Promise<{ operation: Operation; replayed: boolean }> {
    const model = this.deps.tasks.model(modelName, caller);
    const checked = checkBatch(raw, model);
    const { owner } = caller;
    const id = idempotencyKey ? this.keyedId(owner, idempotencyKey) : `batch_${randomBytes(16).toString('hex')}`;
    const fingerprint = idempotencyKey
      ? createHash('sha256')
          .update(canonicalJson({ v: 1, model: model.id, displayName: checked.displayName, items: checked.items }))
          .digest('hex')
      : undefined;
    if (fingerprint) {
      const earlier = await this.batches.get(owner, id).catch(() => Promise.reject(unavailable()));
      if (earlier) return this.replay(caller, earlier, fingerprint);
    }
    const createdMs = Date.now();
    const items: BatchItem[] = [];
    const now: TaskNow[] = [];
    for (const [i, c] of checked.items.entries()) {
      const meta = c.metadata ? { metadata: c.metadata } : {};
      if ('refused' in c) {
        items.push({ refused: c.refused, ...meta });
        now.push(null);
        continue;
      }
      try {
        const key = idempotencyKey ? { idempotencyKey: `gemini-batch/${id}/${i}` } : {};
        const { record } = await this.deps.tasks.submit(caller, model, c.request, key);
        items.push({ task: record.id, ...meta });
        now.push(taskView(record));
      } catch (err) {
        // Tasks before this one run already: a refusal is this request's answer, not the batch's.
        const e =
          err instanceof KilnError ? err : new KilnError('service_unavailable', 'The task could not be queued.');
        items.push({ refused: rpcStatus(e.code, `requests[${i}]: ${e.message}`), ...meta });
        now.push(null);
      }
    }
    const record: BatchRecord = {
      id,
      model: model.id,
      ...(checked.displayName !== undefined ? { displayName: checked.displayName } : {}),
      createdMs,
      items,
    };
    const written = await this.batches.create(owner, record, fingerprint).catch(() => Promise.reject(unavailable()));
    if (!written) {
      // A concurrent create of the same key wrote it first.
      const earlier = await this.batches.get(owner, id).catch(() => Promise.reject(unavailable()));
      if (earlier) return this.replay(caller, earlier, fingerprint!);
      throw unavailable();
    }
    return { operation: await this.answer(record, now), replayed: false };
  }

  private async replay(caller: Caller, earlier: StoredBatch, fingerprint: string) {
    if (earlier.fingerprint !== fingerprint) throw keyReused();
    return { operation: await this.read(caller, earlier), replayed: true };
  }

  /** The batch id of an owner's Idempotency-Key: unguessable without KILN_SECRET, one per owner and key. */
  private keyedId(owner: string, key: string): string {
    const mac = createHmac('sha256', this.idSecret).update(`batch\n${owner.length}:${owner}\n${key}`).digest('hex');
    return `batch_${mac.slice(0, 32)}`;
  }

  async get(caller: Caller, id: string): Promise<Operation> {
    return this.read(caller, await this.find(caller, id));
  }

  /** The owner's batches, newest first; without their results (GET one batch for those). */
  async list(
    caller: Caller,
    q: { pageSize?: number; pageToken?: string },
  ): Promise<{ operations: Operation[]; nextPageToken?: string }> {
    const size = q.pageSize || PAGE_SIZE.default;
    const after = q.pageToken === undefined || q.pageToken === '' ? undefined : cursorOf(q.pageToken);
    const { owner } = caller;
    const page = await this.batches.page(owner, after, size).catch(() => Promise.reject(unavailable()));
    const stored = await this.batches.getMany(owner, page.ids).catch(() => Promise.reject(unavailable()));
    const gone = page.members.filter((_, i) => !stored[i]);
    if (gone.length) void this.batches.forget(owner, gone).catch(() => undefined);
    const found = stored.filter((s): s is StoredBatch => s !== null);
    const ids = found.flatMap((s) => s.record.items.flatMap((it) => (it.task ? [it.task] : [])));
    const views = new Map(ids.map((tid, i) => [tid, i]));
    const all = await this.taskViews(caller, ids);
    const operations = found.map((s) => {
      const tasks = s.record.items.map((it) => (it.task ? (all[views.get(it.task)!] ?? null) : null));
      return operation(s.record, summarize(s.record, tasks, s.canceledMs));
    });
    return { operations, ...(page.next ? { nextPageToken: Buffer.from(page.next).toString('base64url') } : {}) };
  }

  /**
   * Cancels the batch's unfinished tasks (each as POST /v1/tasks/{id}/cancel would); the batch is
   * CANCELLED once they have stopped. A finished batch is left as it is.
   */
  async cancel(caller: Caller, name: string): Promise<void> {
    const stored = await this.find(caller, name);
    const { id } = stored.record;
    const tasks = await this.tasksOf(caller, stored.record);
    const open = tasks.filter(
      (t): t is TaskView => t !== null && (UNFINISHED_STATUSES as readonly string[]).includes(t.status),
    );
    if (open.length === 0) return;
    await this.batches.markCanceled(caller.owner, id, Date.now()).catch(() => Promise.reject(unavailable()));
    const outcomes = await inPool(open, CANCELS_AT_ONCE, (t) =>
      this.deps.tasks.cancel(caller, t.id).then(
        () => null,
        (err: unknown) => err,
      ),
    );
    // A task gone meanwhile needs no cancel; anything else (Temporal unreachable) is worth a retry.
    const failed = outcomes.find((e) => e !== null && !(e instanceof KilnError && e.code === 'not_found'));
    if (failed) throw failed instanceof KilnError ? failed : unavailable();
  }

  /** Forgets the batch; its tasks are not canceled and stay listed in /v1/tasks. */
  async delete(caller: Caller, name: string): Promise<void> {
    const id = bare(name);
    if (!BATCH_ID.test(id)) throw notFound(id);
    const deleted = await this.batches.delete(caller.owner, id).catch(() => Promise.reject(unavailable()));
    if (!deleted) throw notFound(id);
  }

  private async find(caller: Caller, name: string): Promise<StoredBatch> {
    const id = bare(name);
    if (!BATCH_ID.test(id)) throw notFound(id);
    const stored = await this.batches.get(caller.owner, id).catch(() => Promise.reject(unavailable()));
    if (!stored) throw notFound(id);
    return stored;
  }

  private async read(caller: Caller, stored: StoredBatch): Promise<Operation> {
    return this.answer(stored.record, await this.tasksOf(caller, stored.record), stored.canceledMs);
  }

  private async answer(record: BatchRecord, tasks: TaskNow[], canceledMs?: number): Promise<Operation> {
    const s = summarize(record, tasks, canceledMs);
    return operation(record, s, s.done ? await inlinedResponses(this.deps, record, tasks) : undefined);
  }

  /** Each request's task now, in request order (null for a refused request). */
  private async tasksOf(caller: Caller, record: BatchRecord): Promise<TaskNow[]> {
    const ids = record.items.flatMap((it) => (it.task ? [it.task] : []));
    const views = await this.taskViews(caller, ids);
    let j = 0;
    return record.items.map((it) => (it.task ? (views[j++] ?? null) : null));
  }

  /** Stored views in one read; ids Redis lost are asked of Temporal (one visibility query). */
  private async taskViews(caller: Caller, ids: string[]): Promise<TaskNow[]> {
    const { owner } = caller;
    const stored = await pollViews(this.deps.store, ids, owner, 'image', null, 0);
    const out: TaskNow[] = stored.map((s) => (typeof s === 'object' ? (JSON.parse(s.view) as TaskView) : null));
    // Bounded as the task kernel bounds it: a list page must not become a visibility scan.
    const missing = ids.filter((_, i) => stored[i] === 'absent').slice(0, FALLBACK_LOOKUPS);
    if (missing.length === 0) return out;
    const { temporal, store, config } = this.deps;
    const found = await readFromTemporal({ temporal, store, models: config.models }, IMAGE_FALLBACK, owner, missing);
    return ids.map((id, i) => {
      const r = found.get(id);
      return out[i] ?? (r && r.owner === owner ? taskView(r) : null);
    });
  }
}

/** The id of `batch_…` or of the whole resource name `batches/batch_…` (a path parameter may carry either). */
const bare = (name: string) => (name.startsWith('batches/') ? name.slice('batches/'.length) : name);

/** The index member a page token stands for; 400 for a token this server did not issue. */
function cursorOf(token: string): string {
  const member = Buffer.from(token, 'base64url').toString();
  if (!isCursor(member) || Buffer.from(member).toString('base64url') !== token)
    throw new KilnError('invalid_request', 'query.pageToken: not a page token this server issued (nextPageToken).');
  return member;
}
