// Deleting a finished task (DELETE /v1/videos/{id}): its files, its workflow's history and its
// record. The order makes a delete that stopped anywhere (a crash, Redis or S3 away) complete when
// repeated, and never leaves a task that is listed or readable without its files for good:
//   1. the kind's files (a repeat finds them gone: no error);
//   2. the workflow's history in Temporal, so no later read of Temporal (the poll fallback, a
//      read-model rebuild after Redis lost its data, the reconciler) can find the task again;
//   3. the record becomes a tombstone, kept for the retention, and leaves the owner's list
//      (store.deleteTask): until Temporal has finished deleting the history, and whatever a late
//      write tries, the tombstone answers for the task.
// Until step 3 the task is still there (a repeat deletes it); after it, it is gone (a repeat is 404).
import type { Client } from '@temporalio/client';
import type { Model } from '../config/models.js';
import { KilnError } from '../shared/errors.js';
import type { AnyTaskRecord } from '../shared/records.js';
import { UNFINISHED_STATUSES } from '../shared/task.js';
import { readFromTemporal } from './fallback.js';
import { notFound, storageUnavailable, type TaskKind } from './kind.js';
import type { TaskStore } from './store/task-store.js';

export interface DeleteDeps {
  temporal: Client;
  store: TaskStore;
  models?: readonly Model[];
  /** Retry-After of the answer for an unfinished task. */
  pollAfterSeconds: number;
}

/** gRPC NOT_FOUND: the history is gone already (a repeated delete, or Temporal's retention). */
const GRPC_NOT_FOUND = 5;

export async function deleteTask<R extends AnyTaskRecord>(
  deps: DeleteDeps,
  k: TaskKind<R>,
  owner: string,
  id: string,
  removeFiles: (record: R) => Promise<void>,
): Promise<void> {
  if (!k.idPattern.test(id)) throw notFound(k, id);
  const record = await find(deps, k, owner, id);
  if (!record) {
    // A tombstone of this owner: a delete that stopped before unlisting is finished; still 404.
    await deps.store.deleteTask({ id, owner, kind: k.kind, created_at: 0 }).catch(() => undefined);
    throw notFound(k, id);
  }
  if (UNFINISHED_STATUSES.includes(record.status)) throw unfinished(k, record, deps);
  await removeFiles(record).catch(() => {
    throw new KilnError(
      'service_unavailable',
      `The files of ${k.noun} ${id} could not be deleted now; retry shortly.`,
      1,
    );
  });
  await deleteHistory(deps.temporal, id);
  const outcome = await deps.store.deleteTask(record).catch(() => {
    throw storageUnavailable();
  });
  if (outcome === 'unfinished') throw unfinished(k, record, deps);
  // 'absent' or 'gone': a concurrent delete of the same task got there first.
  if (outcome !== 'deleted') throw notFound(k, id);
}

/** The owner's task: the read model's record, else (Redis lost it) Temporal's, written back. */
async function find<R extends AnyTaskRecord>(
  deps: DeleteDeps,
  k: TaskKind<R>,
  owner: string,
  id: string,
): Promise<R | null> {
  const stored = (await deps.store.get(id).catch(() => {
    throw storageUnavailable();
  })) as AnyTaskRecord | null;
  // The fallback skips tombstones, so a deleted task is not found there either.
  const record = stored ?? (await readFromTemporal(deps, k.fallback, owner, [id])).get(id);
  return record && record.owner === owner && record.kind === k.kind ? (record as R) : null;
}

const unfinished = (k: TaskKind<AnyTaskRecord>, r: AnyTaskRecord, deps: DeleteDeps) =>
  new KilnError(
    'task_not_ready',
    `${k.noun} ${r.id} is ${(k.label ?? ((s) => s))(r.status)}: only a finished ${k.noun.toLowerCase()} can be ` +
      `deleted. Cancel it first (POST ${k.path}/${r.id}/cancel) or wait for it to finish, then delete it.`,
    deps.pollAfterSeconds,
  );

async function deleteHistory(temporal: Client, id: string): Promise<void> {
  try {
    await temporal.workflowService.deleteWorkflowExecution({
      namespace: temporal.options.namespace,
      workflowExecution: { workflowId: id },
    });
  } catch (err) {
    if ((err as { code?: unknown }).code === GRPC_NOT_FOUND) return;
    throw new KilnError('service_unavailable', 'Temporal is unavailable for a moment; retry the delete shortly.', 1);
  }
}
