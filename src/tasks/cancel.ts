// Cancel (POST /v1/tasks/{id}/cancel, POST /v1/videos/{id}/cancel), one path for image and video
// tasks. The owner's unfinished task gets a Temporal cancellation request that names the owner (the
// Web UI shows it on the workflow's history); the workflow aborts the running upstream call and
// records failed / canceled itself, so a cancel made while every worker is down still takes effect
// once one runs. A finished task is answered unchanged.
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { Model } from '../config/models.js';
import type { TaskStore } from './store/task-store.js';
import type { ViewText } from './poll.js';
import { KilnError } from '../shared/errors.js';
import { TERMINAL_STATUSES } from '../shared/task.js';
import type { AnyTaskRecord } from '../shared/records.js';
import { readFromTemporal } from './fallback.js';
import { notFound as notFoundError, type TaskKind } from './kind.js';

export interface CancelDeps {
  temporal: Client;
  store: TaskStore;
  models?: readonly Model[];
}

/** 202 when a cancel was requested (the task as it is after a short wait), 200 for a finished task. */
export interface CancelAnswer extends ViewText {
  code: 200 | 202;
}

/** How long a cancel waits for the workflow's failed / canceled record before answering with the state it has. */
const SETTLE_WAIT_MS = 3000;
const SETTLE_POLL_MS = 100;
/** gRPC NOT_FOUND: the workflow closed meanwhile (or Temporal's retention dropped it). */
const GRPC_NOT_FOUND = 5;

export async function cancelTask<R extends AnyTaskRecord>(
  deps: CancelDeps,
  k: TaskKind<R>,
  owner: string,
  id: string,
): Promise<CancelAnswer> {
  const notFound = () => notFoundError(k, id);
  if (!k.idPattern.test(id)) throw notFound();
  let record = await find(deps, k, owner, id);
  if (!record) throw notFound();
  if (TERMINAL_STATUSES.includes(record.status)) return answer(k, record, 200);
  await requestCancel(deps.temporal, owner, `${k.path}/${id}/cancel`, id);
  const deadline = Date.now() + SETTLE_WAIT_MS;
  while (!TERMINAL_STATUSES.includes(record.status) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, SETTLE_POLL_MS));
    record = (await find(deps, k, owner, id)) ?? record;
  }
  return answer(k, record, 202);
}

function answer<R extends AnyTaskRecord>(k: TaskKind<R>, record: R, code: 200 | 202): CancelAnswer {
  return { code, status: record.status, json: JSON.stringify(k.view(record)) };
}

/** The owner's task of this kind: the read model's record, else (Redis lost or down) Temporal's. */
async function find<R extends AnyTaskRecord>(
  deps: CancelDeps,
  k: TaskKind<R>,
  owner: string,
  id: string,
): Promise<R | null> {
  const stored = (await deps.store.get(id).catch(() => null)) as AnyTaskRecord | null;
  const record = stored ?? (await readFromTemporal(deps, k.fallback, owner, [id])).get(id);
  return record && record.owner === owner && record.kind === k.kind ? (record as R) : null;
}

/**
 * RequestCancelWorkflowExecution with the owner as identity (Kiln's owner id, never a key) and a
 * reason: both appear on the WorkflowExecutionCancelRequested event. Repeating it is harmless.
 */
async function requestCancel(temporal: Client, owner: string, path: string, id: string): Promise<void> {
  try {
    await temporal.workflowService.requestCancelWorkflowExecution({
      namespace: temporal.options.namespace,
      workflowExecution: { workflowId: id },
      identity: `kiln owner ${owner}`,
      reason: `canceled by its owner (${owner}) through POST ${path}`,
      requestId: randomUUID(),
    });
  } catch (err) {
    if ((err as { code?: unknown }).code === GRPC_NOT_FOUND) return;
    throw new KilnError('service_unavailable', 'Temporal is unavailable for a moment; retry the cancel shortly.', 1);
  }
}
