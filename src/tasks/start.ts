// Starting a task's workflow, shared by image and video submits: claim a place among unfinished
// tasks (queue_full), start the workflow with the owner/model/status search attributes, and give
// the place back if Temporal did not take the task. Keyed submits (Idempotency-Key) find the
// workflow their id already names instead (see startTask).
import type { Client } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError, WorkflowIdReusePolicy, WorkflowNotFoundError } from '@temporalio/client';
import type { Config } from '../config/env.js';
import { KilnError } from '../shared/errors.js';
import { storageUnavailable } from './kind.js';
import type { TaskStore } from './store/task-store.js';
import { TERMINAL_STATUSES } from '../shared/task.js';
import { SA } from '../temporal/search-attributes.js';
import { IDEMPOTENCY_HEADER, IDEMPOTENCY_MEMO, type IdempotencyMemo } from '../shared/idempotency.js';
// Types only: the API process never loads workflow code, yet a wrong input fails type checking.
import type { imageTaskWorkflow } from '../../workflows/image-task.js';
import type { videoTaskWorkflow } from '../../workflows/video-task.js';

interface TaskWorkflows {
  imageTaskWorkflow: typeof imageTaskWorkflow;
  videoTaskWorkflow: typeof videoTaskWorkflow;
}

/** One workflow type with the input its function takes. */
type WorkflowStart = {
  [K in keyof TaskWorkflows]: { workflowType: K; input: Parameters<TaskWorkflows[K]>[0] };
}[keyof TaskWorkflows];

export type StartTask = WorkflowStart & {
  id: string;
  owner: string;
  model: string;
  summary: string;
  memo?: Record<string, unknown>;
  /** A keyed submit (Idempotency-Key): `id` was derived from the owner and the key. */
  idempotency?: IdempotencyMemo;
};

/** A workflow that a keyed submit found instead of starting one: the earlier submit's task. */
export interface ExistingTask {
  memo: Record<string, unknown>;
  /** The earlier submit's created_at (from its memo; the workflow's start time otherwise). */
  createdAt: number;
  model: string | undefined;
  running: boolean;
  /** KilnStatus search attribute: unset, `running` (videos), then an outcome other than success. */
  statusAttr: string | undefined;
  /** Temporal's status name: RUNNING, COMPLETED, FAILED, TERMINATED, … */
  temporalStatus: string;
  closedAt: number | null;
  /** The workflow's result (its final record); only for COMPLETED. */
  result(): Promise<unknown>;
}

export type StartOutcome = { replayed: false } | { replayed: true; existing: ExistingTask };

type Deps = { config: Config; store: TaskStore; temporal: Client };

/**
 * Starts the task's workflow. A keyed submit (`t.idempotency`) is answered `{replayed: true}` when
 * the workflow id exists already, running or closed (reuse policy REJECT_DUPLICATE), for the same
 * request; for another request it is refused with `idempotency_key_reused`. Temporal decides, so
 * concurrent submits of one key start exactly one workflow. The unfinished gauge holds one place
 * per id: a replay neither adds a second one nor gives back the place of the task it found.
 */
export async function startTask(deps: Deps, t: StartTask): Promise<StartOutcome> {
  const { config, store, temporal } = deps;
  let held = false;
  if (t.idempotency) {
    const r = await store.reserveOnce(t.id, config.maxUnfinishedTasks).catch(() => {
      throw storageUnavailable();
    });
    if (r === 'full') {
      // A replay of a finished task asks for no new place: answer it even when the queue is full.
      const existing = await findExisting(deps, t).catch(unlessRefusal);
      if (existing) return { replayed: true, existing };
      throw new KilnError('queue_full', 'The task queue is full; retry the submission later.', config.pollAfterSeconds);
    }
    held = r === 'held';
  } else {
    const reserved = await store.reserve(t.id, config.maxUnfinishedTasks).catch(() => {
      throw storageUnavailable();
    });
    if (!reserved)
      throw new KilnError('queue_full', 'The task queue is full; retry the submission later.', config.pollAfterSeconds);
  }
  const memo = { ...t.memo, ...(t.idempotency ? { [IDEMPOTENCY_MEMO]: t.idempotency } : {}) };
  const options = {
    workflowId: t.id,
    taskQueue: config.temporal.taskQueue,
    typedSearchAttributes: [
      { key: SA.owner, value: t.owner },
      { key: SA.model, value: t.model },
    ],
    ...(Object.keys(memo).length ? { memo } : {}),
    // A closed workflow keeps its id while Temporal retains it: a keyed submit must not re-run it.
    ...(t.idempotency ? { workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE } : {}),
    staticSummary: t.summary,
    // TEMPORAL_EAGER_START: the first workflow task comes back with the start, to this process's worker.
    ...(config.temporal.eagerStart ? { requestEagerStart: true } : {}),
  };
  try {
    // One call per type, so each is checked against its own function's parameters.
    if (t.workflowType === 'imageTaskWorkflow')
      await temporal.workflow.start<typeof imageTaskWorkflow>(t.workflowType, { ...options, args: [t.input] });
    else await temporal.workflow.start<typeof videoTaskWorkflow>(t.workflowType, { ...options, args: [t.input] });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError) || !t.idempotency) {
      // A place held by the id before this call belongs to the submit (or task) that took it.
      if (!held) await store.release(t.id).catch(() => undefined);
      if (err instanceof WorkflowExecutionAlreadyStartedError) throw err;
      throw new KilnError(
        'service_unavailable',
        'The task could not be queued right now; retry the submission.',
        config.pollAfterSeconds,
      );
    }
    let existing: ExistingTask | null = null;
    try {
      existing = await findExisting(deps, t).catch(unlessRefusal);
    } finally {
      // The place belongs to the id, whichever concurrent submit of the key added it: it stays
      // while the workflow runs; once it has closed (its last transition gave its own back), a
      // place this call added is given back.
      if (!held && !(existing?.running && !(await finishedInStore(store, t.id))))
        await store.release(t.id).catch(() => undefined);
    }
    if (existing) return { replayed: true, existing };
    throw new KilnError(
      'service_unavailable',
      'The task could not be queued right now; retry the submission.',
      config.pollAfterSeconds,
    );
  }
  // Started while another submit of the key held the place (its own start failed): the running
  // task needs the place; adding an id the gauge has is a no-op.
  if (held) await store.reserveOnce(t.id, Number.MAX_SAFE_INTEGER).catch(() => undefined);
  return { replayed: false };
}

/**
 * The workflow of a keyed submit's id, or null when Temporal does not know it. Throws
 * `idempotency_key_reused` when it was started for another request (fingerprint in its memo).
 */
async function findExisting(deps: Deps, t: StartTask): Promise<ExistingTask | null> {
  const handle = deps.temporal.workflow.getHandle(t.id);
  let d: Awaited<ReturnType<typeof handle.describe>>;
  try {
    d = await handle.describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return null;
    throw err;
  }
  const memo = (d.memo ?? {}) as Record<string, unknown>;
  const idem = memo[IDEMPOTENCY_MEMO] as Partial<IdempotencyMemo> | undefined;
  if (
    idem?.fingerprint !== t.idempotency?.fingerprint ||
    d.type !== t.workflowType ||
    d.typedSearchAttributes.get(SA.owner) !== t.owner
  )
    throw keyReused();
  return {
    memo,
    createdAt: typeof idem?.created_at === 'number' ? idem.created_at : Math.floor(d.startTime.getTime() / 1000),
    model: d.typedSearchAttributes.get(SA.model),
    running: d.status.name === 'RUNNING',
    statusAttr: d.typedSearchAttributes.get(SA.status),
    temporalStatus: d.status.name,
    closedAt: d.closeTime ? Math.floor(d.closeTime.getTime() / 1000) : null,
    result: () => handle.result(),
  };
}

/** The read model has the task's last transition (the workflow may not have closed yet). */
async function finishedInStore(store: TaskStore, id: string): Promise<boolean> {
  const { record } = await store.fingerprintOf(id).catch(() => ({ record: null }));
  return record !== null && TERMINAL_STATUSES.includes(record.status);
}

/** Temporal unreachable while looking: no answer (null); a refusal goes to the caller. */
function unlessRefusal(err: unknown): null {
  if (err instanceof KilnError) throw err;
  return null;
}

export function keyReused(): KilnError {
  return new KilnError(
    'idempotency_key_reused',
    `This ${IDEMPOTENCY_HEADER} was already used for a different request ` +
      `(another model, endpoint or body); use a new key for a new request.`,
  );
}
