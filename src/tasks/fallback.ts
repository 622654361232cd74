// Reads for ids the Redis read model does not know (a lost record, one not written yet, or Redis
// down): Temporal answers, and each record found is written back to Redis. One path for image and
// video tasks.
import { WorkflowNotFoundError, type Client, type WorkflowExecutionInfo } from '@temporalio/client';
import type { Model } from '../config/models.js';
import { closedRecord, workflowEnd } from './closed.js';
import type { TaskStore } from './store/task-store.js';
import type { ErrorBody } from '../shared/errors.js';
import { SEARCH_ATTRIBUTES } from '../shared/task.js';
import type { AnyTaskRecord } from '../shared/records.js';
import { SA } from '../temporal/search-attributes.js';

/** What Temporal tells about a task whose workflow has no result. */
export interface WorkflowFacts {
  id: string;
  owner: string;
  model: string;
  created_at: number;
  /** Running: from the workflow's status search attribute. Ended without a result: failed. */
  status: 'accepted' | 'queued' | 'running' | 'failed';
  /** When a failed workflow closed; null while it runs. */
  closed_at: number | null;
  error: ErrorBody | null;
}

export interface FallbackKind<R> {
  /** Only workflows of this type answer. */
  workflowType: string;
  /** The kind's record of a workflow without a result (running, or terminated / cancelled / timed out). */
  record(facts: WorkflowFacts, memo: Record<string, unknown>): R;
}

/** What a listing and a describe both tell of a workflow. */
export type WorkflowInfo = Omit<WorkflowExecutionInfo, 'raw'>;

type FallbackStore = Pick<
  TaskStore,
  'transition' | 'recentlyMissing' | 'rememberMissing' | 'get' | 'dispatchedTo' | 'deletedAmong' | 'withExpiry'
>;

/**
 * The owner's records among `ids`, found with one visibility query and written back to Redis.
 * Ids Temporal did not know a moment ago are not asked again: a client polling unknown ids must not
 * turn every poll into a visibility query. Temporal unreachable too: the ids stay unknown rather
 * than failing the whole read.
 */
export async function readFromTemporal<R extends AnyTaskRecord>(
  deps: { temporal: Client; store: FallbackStore; models?: readonly Model[] },
  kind: FallbackKind<R>,
  owner: string,
  ids: string[],
): Promise<Map<string, R>> {
  const { temporal, store } = deps;
  const out = new Map<string, R>();
  const recentlyMissing = await store.recentlyMissing(owner, ids).catch(() => new Set<string>());
  const fresh = ids.filter((id) => !recentlyMissing.has(id));
  // Only those are checked for tombstones: a batch naming ids Temporal just did not know is
  // answered with one MGET, not one HEXISTS per id as well.
  if (fresh.length === 0) return out;
  // A deleted task's workflow may outlive its deletion (the deletion of its history is
  // asynchronous, or failed): its tombstone keeps it from being answered or written back.
  const deleted = await store.deletedAmong(fresh).catch(() => new Set<string>());
  const ask = fresh.filter((id) => !deleted.has(id));
  if (ask.length === 0) return out;
  try {
    for await (const wf of workflowsOf(temporal, ask, owner)) {
      if (wf.type !== kind.workflowType) continue;
      const closedOutside = wf.status.name !== 'COMPLETED' && wf.status.name !== 'RUNNING' && deps.models;
      const found =
        wf.status.name === 'COMPLETED'
          ? ((await temporal.workflow.getHandle(wf.workflowId).result()) as R | null)
          : ((closedOutside ? await truthfulEnd<R>(deps, wf.workflowId) : null) ??
            kind.record(factsOf(wf, owner), wf.memo ?? {}));
      if (!found) continue;
      // Answered as Redis will hold it once written back.
      const record = store.withExpiry(found);
      out.set(record.id, record);
      // Only a finished record is written back. Visibility can still say RUNNING for a workflow
      // that has just completed: a record rebuilt from it, written to Redis, would stay there
      // unfinished with nobody left to move it on. An unfinished answer is served, not stored;
      // the workflow's own next transition writes the record.
      if (record.status !== 'accepted' && record.status !== 'queued' && record.status !== 'running') {
        await store.transition(record).catch(() => undefined);
      }
    }
    await store
      .rememberMissing(
        owner,
        ask.filter((id) => !out.has(id)),
      )
      .catch(() => undefined);
  } catch {
    // Temporal unreachable: see above.
  }
  return out;
}

/**
 * The owner's workflows among `ids`. One id (a single poll): described by id, which reads the
 * workflow's own state, exact at once; several (a batch): one visibility query, which can lag a
 * moment behind a workflow that has just started or ended.
 */
async function* workflowsOf(temporal: Client, ids: string[], owner: string): AsyncIterable<WorkflowInfo> {
  if (ids.length === 1) {
    let wf: WorkflowInfo;
    try {
      wf = await temporal.workflow.getHandle(ids[0]).describe();
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return;
      throw err;
    }
    if (wf.typedSearchAttributes.get(SA.owner) === owner) yield wf;
    return;
  }
  const quoted = ids.map((id) => `'${id}'`).join(', ');
  yield* temporal.workflow.list({
    query: `WorkflowId IN (${quoted}) AND ${SEARCH_ATTRIBUTES.owner} = '${owner.replace(/'/g, '')}'`,
  });
}

export function factsOf(wf: WorkflowInfo, owner: string): WorkflowFacts {
  const running = wf.status.name === 'RUNNING';
  return {
    id: wf.workflowId,
    owner,
    model: wf.typedSearchAttributes.get(SA.model) ?? 'unknown',
    created_at: Math.floor(wf.startTime.getTime() / 1000),
    status: statusOf(running, wf.typedSearchAttributes.get(SA.status)),
    // Terminated, cancelled or timed out by an operator: the task did not complete.
    closed_at: running ? null : Math.floor((wf.closeTime ?? new Date()).getTime() / 1000),
    error: running ? null : endedWithoutResult(wf.status.name),
  };
}

/** A running workflow's status search attribute as a task status; a closed one without a result failed. */
export function statusOf(running: boolean, statusAttr: string | undefined): WorkflowFacts['status'] {
  if (!running) return 'failed';
  return statusAttr === 'queued' || statusAttr === 'running' ? statusAttr : 'accepted';
}

/** The error of a task whose workflow closed without a result (terminated, cancelled, timed out). */
export function endedWithoutResult(temporalStatus: string): ErrorBody {
  // Kiln's own cancels end with a result; this one was canceled from outside (an operator).
  if (temporalStatus === 'CANCELLED')
    return { code: 'canceled', message: "The task's workflow was canceled before a result." };
  return {
    code: 'upstream_error',
    message: `The task's workflow ended ${temporalStatus.toLowerCase()} before a result.`,
  };
}

/** A workflow that closed outside Kiln ends as reconciliation ends it (see closed.ts). */
async function truthfulEnd<R extends AnyTaskRecord>(
  deps: { temporal: Client; store: FallbackStore; models?: readonly Model[] },
  id: string,
): Promise<R | null> {
  const end = await workflowEnd(deps.temporal, id);
  if (end.state !== 'closed') return null;
  return (await closedRecord({ store: deps.store, models: deps.models ?? [] }, end, null)) as R | null;
}
