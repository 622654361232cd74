// Reconciliation: the read model follows Temporal. A task the read model shows unfinished while its
// workflow has closed (an operator terminated or canceled it in the Web UI or CLI, a run timed out,
// its history was deleted, or its last write was lost) gets its truthful terminal state within a
// round or two. Worker processes run it; a lease makes one of them do each round.
import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import type { Config } from '../config/env.js';
import type { AnyTaskRecord } from '../shared/records.js';
import { TERMINAL_STATUSES } from '../shared/task.js';
import type { WebhookTarget } from '../shared/webhook-types.js';
import type { WebhookDelivery } from '../../activities/deliver-webhook.js';
import { closedRecord, workflowEnd, type WorkflowEnd } from '../tasks/closed.js';
import type { TaskStore } from '../tasks/store/task-store.js';

export interface ReconcileDeps {
  temporal: Client;
  store: TaskStore;
  config: Pick<Config, 'models' | 'temporal'>;
  log: Logger;
  /** Counts a task this process ended (metrics). */
  reconciled?: (record: AnyTaskRecord, how: string) => void;
  /** More work for the round's lease holder (the quota sweep, src/usage/sweep.ts). */
  sweep?: () => Promise<unknown>;
}

export interface ReconcileOptions {
  /** Time between rounds; the lease lasts as long, so one process does each round. */
  everyMs: number;
  /** A task younger than this is left alone: its workflow may not be visible yet. */
  graceSeconds: number;
  /** Tasks looked at per round, oldest first; a full page goes on from where it ended next round. */
  pageSize: number;
}

export const RECONCILE_DEFAULTS: ReconcileOptions = { everyMs: 15_000, graceSeconds: 10, pageSize: 1000 };

/** Ids per visibility query. */
const VISIBILITY_BATCH = 100;

export function startReconciler(deps: ReconcileDeps, opts: ReconcileOptions = RECONCILE_DEFAULTS) {
  let cursor: number | null = null;
  let running: Promise<number> | null = null;

  /** One round: returns how many tasks it ended. */
  async function round(): Promise<number> {
    if (!(await deps.store.lease('reconcile', opts.everyMs))) return 0;
    const before = Math.floor(Date.now() / 1000) - opts.graceSeconds;
    const page = await deps.store.unfinishedIds(before, cursor, opts.pageSize);
    // A full page goes on from its last reservation time (inclusive: a second holds many tasks).
    const lastSince = page.at(-1)?.since;
    cursor =
      page.length < opts.pageSize || lastSince === undefined ? null : lastSince === cursor ? lastSince + 1 : lastSince;
    let ended = 0;
    for (let i = 0; i < page.length; i += VISIBILITY_BATCH) {
      const ids = page.slice(i, i + VISIBILITY_BATCH).map((p) => p.id);
      for (const id of await closedAmong(deps.temporal, ids)) {
        if (await reconcileTask(deps, id).catch((err) => failed(deps.log, id, err))) ended++;
      }
    }
    await deps.sweep?.().catch((err: Error) => deps.log.warn({ err: err.message }, 'reservation sweep failed'));
    return ended;
  }

  const timer = setInterval(() => {
    running ??= round()
      .catch((err) => {
        deps.log.warn({ err: (err as Error).message }, 'reconciliation round failed');
        return 0;
      })
      .finally(() => (running = null));
  }, opts.everyMs);
  timer.unref();

  return {
    round,
    async stop(): Promise<void> {
      clearInterval(timer);
      await running;
    },
  };
}

/**
 * The ids whose workflow may have closed: any not listed as running by visibility (which lags a
 * little behind; `workflowEnd` then asks the workflow itself, which does not).
 */
async function closedAmong(temporal: Client, ids: string[]): Promise<string[]> {
  const query = `WorkflowId IN (${ids.map((id) => `'${id}'`).join(',')})`;
  const runningIds = new Set<string>();
  for await (const wf of temporal.workflow.list({ query }))
    if (wf.status.name === 'RUNNING') runningIds.add(wf.workflowId);
  return ids.filter((id) => !runningIds.has(id));
}

/** True when this call ended the task. */
export async function reconcileTask(deps: ReconcileDeps, id: string): Promise<boolean> {
  const end = await workflowEnd(deps.temporal, id);
  if (end.state === 'running') return false;
  const stored = (await deps.store.get(id)) as AnyTaskRecord | null;
  if (stored && TERMINAL_STATUSES.includes(stored.status)) {
    // Ended already; only the place it held among unfinished tasks is left over.
    await deps.store.release(id);
    return false;
  }
  // The workflow recorded its outcome, but the write of it never reached the read model.
  if (end.state === 'completed') return deps.store.transition(end.record);
  const record = await closedRecord({ store: deps.store, models: deps.config.models }, end, stored);
  if (!record || !(await deps.store.transition(record))) return false;
  deps.log.info({ taskId: id, owner: record.owner, status: record.status, how: end.closing.how }, 'task reconciled');
  deps.reconciled?.(record, end.closing.how);
  const webhook = end.input?.task.webhook;
  if (webhook) await deliverEnd(deps, webhook, record, stored);
  return true;
}

/** Starts the webhook delivery of the end, as the task's workflow would have (same id: once). */
async function deliverEnd(
  deps: ReconcileDeps,
  target: WebhookTarget,
  record: AnyTaskRecord,
  stored: AnyTaskRecord | null,
): Promise<void> {
  const after = target.events === 'all' && stored ? stored.status : undefined;
  const delivery: WebhookDelivery = {
    messageId: `msg_${record.id}_${record.status}`,
    url: target.url,
    record,
    ...(after === 'queued' || after === 'running' ? { after } : {}),
  };
  await deps.temporal.workflow
    .start('webhookDeliveryWorkflow', {
      taskQueue: deps.config.temporal.taskQueue,
      workflowId: `${record.id}/webhook/${record.status}`,
      args: [delivery],
    })
    .catch((err: Error) => {
      if (err.name !== 'WorkflowExecutionAlreadyStartedError') throw err;
    });
}

function failed(log: Logger, id: string, err: unknown): false {
  log.warn({ taskId: id, err: (err as Error).message }, 'reconciling a task failed; the next round tries again');
  return false;
}

export type { WorkflowEnd };
