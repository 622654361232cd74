// Image task service: submit starts a workflow; reads come from the Redis read model and reach
// Temporal only for ids Redis does not know (then the record is repaired).
import { startTask } from '../temporal/start-task.js';
import { findModel } from '../infra/models.js';
import { createHash, randomBytes } from 'node:crypto';
import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import { modelTaskQueue, type Config, type ImageModel } from '../config.js';
import { KilnError } from '../shared/errors.js';
import { promptText } from '../shared/prompt.js';
import { taskSummary } from '../temporal/summary.js';
import { SA } from '../temporal/search-attributes.js';
import { SEARCH_ATTRIBUTES, UNFINISHED_STATUSES, type ImageRequest, type TaskRecord } from '../shared/task.js';
import type { ImageTaskWorkflowInput } from '../../workflows/image-task.js';
import { indexMember, type TaskStore } from '../infra/store.js';
import { pollRecords, taskLimiterKey } from '../infra/poll.js';
import type { Caller } from '../infra/auth.js';
import { taskView, notFoundItem, type TaskView } from './views.js';

export const TASK_ID = /^task_[a-f0-9]{32}$/;
const LIST_MAX_DAYS = 3;
const FALLBACK_LOOKUPS = 100;

export interface ListQuery { days: number; limit: number; before_created_at?: number; before_id?: string }

export class TaskService {
  constructor(
    private readonly config: Config,
    private readonly store: TaskStore,
    private readonly temporal: Client,
  ) {}

  model(id: string): ImageModel {
    return findModel(this.config.models, 'image', id);
  }

  async submit(caller: Caller, model: ImageModel, request: ImageRequest) {
    const id = `task_${randomBytes(16).toString('hex')}`;
    const created_at = Math.floor(Date.now() / 1000);
    const input: ImageTaskWorkflowInput = {
      task: { id, owner: caller.owner, model: model.id, created_at, request, ...(caller.credential ? { credential: caller.credential } : {}) },
      policy: { timeoutMs: model.timeoutMs, heartbeatTimeoutMs: model.heartbeatTimeoutMs, maxAttempts: model.maxAttempts },
      activityQueue: modelTaskQueue(this.config.temporal.taskQueue, model.id),
    };
    await startTask({ config: this.config, store: this.store, temporal: this.temporal }, {
      id, workflowType: 'imageTaskWorkflow', input, owner: caller.owner, model: model.id,
      summary: taskSummary('image', model.id, caller.owner, promptText(request), this.config.ops.summaryPromptChars),
    });
    const record: TaskRecord = { id, kind: 'image', owner: caller.owner, model: model.id, status: 'accepted', created_at, finished_at: null, candidates: null, error: null };
    // The workflow records its own transitions; this write makes an immediate poll cheap, and a
    // failure here only means that poll takes the Temporal path.
    await this.store.transition(record).catch(() => undefined);
    return {
      id, object: 'image.task' as const, model: model.id, status: 'accepted' as const, created_at,
      polling_url: `/v1/tasks/${id}`, content_url: `/v1/tasks/${id}/content`,
    };
  }

  /** One task, behind the per-task poll limiter. */
  async get(caller: Caller, id: string): Promise<TaskView> {
    const [record] = await this.read(caller, [id], taskLimiterKey(caller.owner, id), this.config.rateLimitTaskMs);
    if (!record) throw new KilnError('not_found', `Task ${id} was not found.`);
    return taskView(record);
  }

  async batchGet(caller: Caller, ids: string[]) {
    const unique = [...new Set(ids)];
    const setHash = createHash('sha256').update([...unique].sort().join('\n')).digest('hex').slice(0, 32);
    const records = await this.read(caller, unique, `batch:{${caller.owner}}:${setHash}`, this.config.rateLimitBatchMs);
    return {
      object: 'batch.task.list' as const,
      items: unique.map((id, i) => (records[i] ? taskView(records[i]!) : notFoundItem(id))),
      next_poll_after_ms: this.config.pollAfterSeconds * 1000,
    };
  }

  async list(caller: Caller, q: ListQuery) {
    const now = Math.floor(Date.now() / 1000);
    const days = Math.min(q.days, LIST_MAX_DAYS);
    const min = `[${indexMember(now - days * 86400, '')}`;
    const max = q.before_created_at === undefined ? '+' : `(${indexMember(q.before_created_at, q.before_id ?? '')}`;
    const records = await this.store.list(caller.owner, max, min, q.limit).catch((err) => { throw this.storeDown(err); });
    return {
      object: 'list' as const,
      days,
      items: records.map((r) => ({
        id: r.id, model: r.model, status: r.status, created_at: r.created_at, finished_at: r.finished_at,
        content_url: `/v1/tasks/${r.id}/content`,
      })),
    };
  }

  /** The first image's URL of a finished task. */
  async contentUrl(caller: Caller, id: string): Promise<string> {
    const [record] = await this.read(caller, [id], null, 0);
    if (!record) throw new KilnError('not_found', `Task ${id} was not found.`);
    if (UNFINISHED_STATUSES.includes(record.status)) {
      throw new KilnError('task_not_ready', `Task ${id} is ${record.status}; its content is not ready yet.`, this.config.pollAfterSeconds);
    }
    const url = record.candidates?.flatMap((c) => c.content.parts).find((p) => p.inlineData)?.inlineData?.data;
    if (record.status !== 'succeeded' || !url) {
      throw new KilnError('task_failed', `Task ${id} ended ${record.status} and has no image${record.error ? `: ${record.error.message}` : '.'}`);
    }
    return url;
  }

  private storeDown(err: unknown): KilnError {
    if (err instanceof KilnError) return err;
    return new KilnError('service_unavailable', 'Task storage is unavailable for a moment; retry shortly.', 1);
  }

  /** Owner-scoped records for ids, in order; null where absent or another owner's. */
  private async read(caller: Caller, ids: string[], limiterKey: string | null, intervalMs: number): Promise<(TaskRecord | null)[]> {
    // Ids that Kiln cannot have issued are not_found without a lookup.
    const valid = ids.filter((id) => TASK_ID.test(id));
    // With Redis unreachable every id takes the Temporal path: polls keep answering, unthrottled.
    const json = await pollRecords(this.store, valid, limiterKey, intervalMs);
    const byId = new Map(valid.map((id, i) => [id, json[i]]));
    const records = ids.map((id) => { const j = byId.get(id); return j ? (JSON.parse(j) as TaskRecord) : null; });
    const missing = ids.filter((id, i) => !records[i] && TASK_ID.test(id)).slice(0, FALLBACK_LOOKUPS);
    if (missing.length > 0) {
      const found = await this.fromTemporal(caller.owner, missing);
      ids.forEach((id, i) => { if (!records[i] && found.has(id)) records[i] = found.get(id)!; });
    }
    // Video records share the keyspace: they are never image tasks.
    return records.map((r) => (r && r.owner === caller.owner && r.kind !== ('video' as string) ? r : null));
  }

  /**
   * Redis has no record for these ids (lost, or not yet written): one visibility query finds the
   * caller's workflows among them, and each found task is written back to Redis.
   */
  private async fromTemporal(owner: string, ids: string[]): Promise<Map<string, TaskRecord>> {
    const out = new Map<string, TaskRecord>();
    // Ids Temporal did not know a moment ago are not asked again: a client polling a batch with
    // unknown ids must not turn every poll into a visibility query.
    const recentlyMissing = await this.store.recentlyMissing(owner, ids).catch(() => new Set<string>());
    const ask = ids.filter((id) => !recentlyMissing.has(id));
    if (ask.length === 0) return out;
    const quoted = ask.map((id) => `'${id}'`).join(', ');
    try {
      for await (const wf of this.temporal.workflow.list({ query: `WorkflowId IN (${quoted}) AND ${SEARCH_ATTRIBUTES.owner} = '${owner.replace(/'/g, '')}'` })) {
        const record = await this.recordOf(wf, owner);
        if (!record) continue;
        out.set(record.id, record);
        await this.store.transition(record).catch(() => undefined);
      }
      await this.store.rememberMissing(owner, ask.filter((id) => !out.has(id))).catch(() => undefined);
    } catch {
      // Temporal unreachable too: the ids stay not_found rather than failing the whole read.
    }
    return out;
  }

  private async recordOf(wf: WorkflowExecutionInfo, owner: string): Promise<TaskRecord | null> {
    const model = wf.typedSearchAttributes.get(SA.model) ?? 'unknown';
    const base: TaskRecord = {
      id: wf.workflowId, kind: 'image', owner, model, status: 'accepted',
      created_at: Math.floor(wf.startTime.getTime() / 1000), finished_at: null, candidates: null, error: null,
    };
    if (wf.status.name === 'COMPLETED') return (await this.temporal.workflow.getHandle(wf.workflowId).result()) as TaskRecord;
    if (wf.status.name === 'RUNNING') {
      const status = wf.typedSearchAttributes.get(SA.status);
      return { ...base, status: status === 'queued' || status === 'running' ? status : 'accepted' };
    }
    // Terminated, cancelled or timed out by an operator: the task did not complete.
    return {
      ...base, status: 'failed', finished_at: Math.floor((wf.closeTime ?? new Date()).getTime() / 1000),
      error: { code: 'upstream_error', message: `The task's workflow ended ${wf.status.name.toLowerCase()} before a result.` },
    };
  }
}
