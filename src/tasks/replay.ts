// The read side of a keyed submit (Idempotency-Key), shared by every task kind: the task a key
// already names, found in the read model before a start is tried, or after Temporal refused a
// second workflow for the key.
import type { TaskStore } from './store/task-store.js';
import type { AnyTaskRecord } from '../shared/records.js';
import { endedWithoutResult, statusOf, type FallbackKind } from './fallback.js';
import { keyReused, type ExistingTask } from './start.js';
import { KilnError } from '../shared/errors.js';

/**
 * The caller's task of this id when the read model knows it with a fingerprint; throws
 * idempotency_key_reused when it was submitted for another request. Null: Temporal decides.
 */
export async function priorSubmit<R extends AnyTaskRecord>(
  store: TaskStore,
  id: string,
  kind: R['kind'],
  owner: string,
  fingerprint: string,
): Promise<R | null> {
  // The read model knows most replays (and is the only memory once Temporal's retention of a
  // closed workflow has passed).
  const prior = await store.fingerprintOf(id).catch(() => null);
  // A new workflow under the id could never be seen (the tombstone refuses its writes): refused.
  if (prior?.deleted) throw keyOfDeleted(kind);
  if (!prior?.fingerprint || prior.record?.kind !== kind || prior.record.owner !== owner) return null;
  if (prior.fingerprint !== fingerprint) throw keyReused();
  return prior.record as R;
}

/** The task a keyed submit found already started for the same request, as it is now. */
export async function replayedRecord<R extends AnyTaskRecord>(
  store: TaskStore,
  fallback: FallbackKind<R>,
  kind: R['kind'],
  ids: { id: string; owner: string; model: string },
  wf: ExistingTask,
): Promise<R> {
  const stored = await store.fingerprintOf(ids.id).catch(() => null);
  if (stored?.record?.kind === kind) return stored.record as R;
  if (wf.temporalStatus === 'COMPLETED') {
    const result = (await wf.result().catch(() => null)) as R | null;
    if (result) return result;
  }
  return fallback.record(
    {
      id: ids.id,
      owner: ids.owner,
      model: wf.model ?? ids.model,
      created_at: wf.createdAt,
      status: statusOf(wf.running, wf.statusAttr),
      closed_at: wf.closedAt,
      error: wf.running ? null : endedWithoutResult(wf.temporalStatus),
    },
    wf.memo,
  );
}

const keyOfDeleted = (kind: AnyTaskRecord['kind']) =>
  new KilnError(
    'idempotency_key_reused',
    `This Idempotency-Key named a ${kind === 'video' ? 'video' : 'task'} that was since deleted; send a new key.`,
  );
