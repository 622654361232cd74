// What Temporal knows of each task, for a rebuild of the read model: the deployment's task
// workflows page by page (with the page token, so a rebuild can resume), and each one's record —
// a completed workflow's result, otherwise the record the poll fallback builds (src/tasks/fallback.ts)
// — and the state of its webhook delivery.
import { WorkflowNotFoundError, type Client, type WorkflowExecutionDescription } from '@temporalio/client';
import proto from '@temporalio/proto';
import type { Model } from '../../config/models.js';
import { closedRecord, decodeFirst, workflowEnd } from '../closed.js';
import { factsOf, type FallbackKind, type WorkflowFacts } from '../fallback.js';
import type { TaskStore } from '../store/task-store.js';
import type { BaseWorkflowInput } from '../service.js';
import type { AnyTaskRecord } from '../../shared/records.js';
import { STATUS_RANK } from '../../shared/task.js';
import { WEBHOOK_PENDING, type WebhookState } from '../../shared/webhook-types.js';
import { SA } from '../../temporal/search-attributes.js';

const PendingState = proto.temporal.api.enums.v1.PendingActivityState;

export interface TaskSource {
  temporal: Client;
  /** The deployment's task queue: other deployments sharing the namespace are not rebuilt. */
  taskQueue: string;
  kinds: readonly FallbackKind<AnyTaskRecord>[];
  /** For the truthful end of a workflow closed outside Kiln (closed.ts). */
  models: readonly Model[];
  store: TaskStore;
}

/** A listed workflow: which run. */
export interface WorkflowRef {
  workflowId: string;
  runId: string;
}

export interface VisibilityPage {
  workflows: WorkflowRef[];
  /** The next page's token; null after the last page. */
  next: Buffer | null;
}

/** The deployment's task workflows running, or closed at or after `since` (epoch s), newest first. */
export function rebuildQuery(src: TaskSource, since: number): string {
  const types = src.kinds.map((k) => `'${k.workflowType}'`).join(', ');
  const queue = src.taskQueue.replace(/'/g, '');
  const after = new Date(since * 1000).toISOString();
  return `TaskQueue = '${queue}' AND WorkflowType IN (${types}) AND (ExecutionStatus = 'Running' OR CloseTime >= '${after}')`;
}

/**
 * One visibility page. The SDK's list hides the page token, which a resumed rebuild needs: this is
 * its loop body, with the token in the caller's hands.
 */
export async function listPage(
  src: TaskSource,
  query: string,
  token: Buffer | null,
  pageSize: number,
): Promise<VisibilityPage> {
  const { temporal } = src;
  const res = await temporal.workflowService.listWorkflowExecutions({
    namespace: temporal.options.namespace,
    query,
    pageSize,
    nextPageToken: token ?? Buffer.alloc(0),
  });
  // Only the ids: each is described on its own (the SDK's typed view of a listing is not public).
  const workflows: WorkflowRef[] = (res.executions ?? []).flatMap((raw) =>
    raw.execution?.workflowId && raw.execution.runId
      ? [{ workflowId: raw.execution.workflowId, runId: raw.execution.runId }]
      : [],
  );
  const next = res.nextPageToken?.length ? Buffer.from(res.nextPageToken) : null;
  return { workflows, next };
}

/**
 * The task's record as Temporal tells it, or null for a workflow that is not one of Kiln's tasks.
 * A workflow listed as open is described first: visibility can lag behind one that has just closed.
 */
export async function taskRecord(src: TaskSource, ref: WorkflowRef): Promise<AnyTaskRecord | null> {
  const handle = src.temporal.workflow.getHandle(ref.workflowId, ref.runId);
  const d = await handle.describe();
  const kind = src.kinds.find((k) => k.workflowType === d.type);
  const owner = d.typedSearchAttributes.get(SA.owner);
  if (!kind || !owner) return null;
  if (d.status.name === 'COMPLETED') return (await handle.result()) as AnyTaskRecord | null;
  if (d.status.name !== 'RUNNING') {
    // Closed outside Kiln: the end reconciliation gives it (who ended it, and whether it was sent).
    const end = await workflowEnd(src.temporal, ref.workflowId);
    if (end.state === 'completed') return end.record;
    if (end.state === 'closed') {
      const ended = await closedRecord({ store: src.store, models: src.models }, end, null);
      if (ended) return ended;
    }
  }
  const facts = factsOf(d, owner);
  // What only the workflow's input holds: the created_at the task was listed under (its start time
  // can be a second later, and a list orders by created_at) and whether it has a webhook.
  const input = (await startInput(src.temporal, ref.workflowId, ref.runId)) as BaseWorkflowInput<unknown> | undefined;
  const record = kind.record(
    {
      ...facts,
      created_at: input?.task.created_at ?? facts.created_at,
      status: d.status.name === 'RUNNING' ? later(facts.status, pendingStatus(d)) : facts.status,
    },
    d.memo ?? {},
  );
  return input?.task.webhook ? { ...record, webhook: WEBHOOK_PENDING } : record;
}

/** The workflow of a task by id, described (null when Temporal does not know it). */
export async function describeTask(src: TaskSource, id: string): Promise<WorkflowExecutionDescription | null> {
  try {
    return await src.temporal.workflow.getHandle(id).describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return null;
    throw err;
  }
}

/**
 * The state of the delivery of the task's `status` event (`<id>/webhook/<status>`): a finished
 * delivery's result, a running one's last attempt; null when there is none (yet).
 */
export async function deliveryState(src: TaskSource, id: string, status: string): Promise<WebhookState | null> {
  const d = await describeTask(src, `${id}/webhook/${status}`);
  if (!d) return null;
  const handle = src.temporal.workflow.getHandle(d.workflowId, d.runId);
  if (d.status.name === 'COMPLETED') return (await handle.result()) as WebhookState;
  if (d.status.name !== 'RUNNING') return null;
  const history = await handle.fetchHistory();
  const done = (history.events ?? []).filter((e) => e.activityTaskCompletedEventAttributes?.result);
  const last = done.at(-1)?.activityTaskCompletedEventAttributes?.result?.payloads;
  if (!last) return null;
  // An attempt's result (activities/deliver-webhook.ts, AttemptResult) carries the state it wrote.
  return (await decodeFirst<{ state: WebhookState }>(src.temporal, last)).state;
}

/** The workflow's input, from its first history event. */
async function startInput(temporal: Client, workflowId: string, runId: string): Promise<unknown> {
  const res = await temporal.workflowService.getWorkflowExecutionHistory({
    namespace: temporal.options.namespace,
    execution: { workflowId, runId },
    maximumPageSize: 1,
  });
  const payloads = res.history?.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads;
  return payloads?.length ? decodeFirst(temporal, payloads) : undefined;
}

/**
 * What a running workflow's pending activity says of an image task, whose status search attribute
 * is unset while it runs: its upstream attempt is under way (running: the attempt records that
 * before it calls), or waiting for a slot (queued: the first workflow task recorded that).
 */
function pendingStatus(d: WorkflowExecutionDescription): WorkflowFacts['status'] {
  const states = (d.raw.pendingActivities ?? []).map((a) => a.state);
  if (states.some((s) => s === PendingState.PENDING_ACTIVITY_STATE_STARTED)) return 'running';
  return states.length ? 'queued' : 'accepted';
}

const later = (a: WorkflowFacts['status'], b: WorkflowFacts['status']) => (STATUS_RANK[b] > STATUS_RANK[a] ? b : a);
