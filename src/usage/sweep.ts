// The net under settlement: reservations older than a moment that no terminal write has settled.
// The usual one is a submit whose API process died between reserving and starting the workflow:
// no workflow will ever end it, so it is voided. Others (a settlement lost with its process after
// the write that should have carried it) are settled by the record, or left to the reconciler to
// write that record first. Run by the worker reconciler, under its lease.
import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import type { AnyTaskRecord } from '../shared/records.js';
import { TERMINAL_STATUSES } from '../shared/task.js';
import { workflowEnd } from '../tasks/closed.js';
import type { TaskStore } from '../tasks/store/task-store.js';
import { settleTask } from './settlement.js';
import type { QuotaStore } from './store.js';

/** A reservation younger than this may belong to a submit still starting its workflow. */
export const SWEEP_MIN_AGE_MS = 30_000;

export interface SweepDeps {
  quota: QuotaStore;
  store: TaskStore;
  temporal: Client;
  log: Logger;
  /** Writes a closed workflow's record to the read model (the reconciler's; the write settles). */
  reconcile(id: string): Promise<boolean>;
}

export interface SweepResult {
  settled: number;
  voided: number;
}

export async function sweepReservations(deps: SweepDeps, minAgeMs = SWEEP_MIN_AGE_MS): Promise<SweepResult> {
  const out: SweepResult = { settled: 0, voided: 0 };
  const before = Date.now() - minAgeMs;
  for (const owner of await deps.quota.owners()) {
    for (const r of await deps.quota.reservations(owner)) {
      if (r.held || r.reservedAtMs > before) continue;
      try {
        await sweepOne(deps, owner, r.id, out);
      } catch (err) {
        deps.log.warn(
          { taskId: r.id, err: (err as Error).message },
          'sweeping a reservation failed; the next round tries again',
        );
      }
    }
  }
  return out;
}

async function sweepOne(deps: SweepDeps, owner: string, id: string, out: SweepResult): Promise<void> {
  const record = (await deps.store.get(id)) as AnyTaskRecord | null;
  if (record) {
    // An unfinished task's own workflow settles it when it ends.
    if (TERMINAL_STATUSES.includes(record.status) && (await settleTask(deps.store, deps.quota, record)) !== 'none')
      out.settled++;
    return;
  }
  const end = await workflowEnd(deps.temporal, id);
  if (end.state === 'running') return;
  if (end.state === 'closed' && end.closing.how === 'gone') {
    if (await deps.quota.void(owner, id)) {
      out.voided++;
      deps.log.info({ taskId: id }, 'reservation voided: its workflow never started');
    }
    return;
  }
  if (await deps.reconcile(id)) out.settled++;
}
