// A batch as Google's API shows it: the Operation whose metadata is the GenerateContentBatch, with
// its state, stats and times derived from its tasks' records at the moment of the read. Pure: the
// service reads, this module decides.
import type { TaskView } from '../shared/views.js';
import { rpcStatus, type RpcStatus } from '../http/google-errors.js';
import type { BatchItem, BatchRecord } from './store.js';

export const BATCH_TYPE = 'type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch';

export type BatchState =
  | 'BATCH_STATE_PENDING'
  | 'BATCH_STATE_RUNNING'
  | 'BATCH_STATE_SUCCEEDED'
  | 'BATCH_STATE_FAILED'
  | 'BATCH_STATE_CANCELLED';

export const BATCH_STATES: readonly BatchState[] = [
  'BATCH_STATE_PENDING',
  'BATCH_STATE_RUNNING',
  'BATCH_STATE_SUCCEEDED',
  'BATCH_STATE_FAILED',
  'BATCH_STATE_CANCELLED',
];

/** A request's task as read now; null when neither Redis nor Temporal keeps it any more. */
export type TaskNow = (TaskView & { model_version?: string; response_id?: string; uncertain_reason?: string }) | null;

/** A request's outcome so far. */
type Outcome = 'pending' | 'running' | 'succeeded' | 'failed';

function outcome(item: BatchItem, task: TaskNow | undefined): Outcome {
  if (item.refused || !task) return 'failed';
  switch (task.status) {
    case 'accepted':
    case 'queued':
      return 'pending';
    case 'running':
      return 'running';
    case 'succeeded':
      return 'succeeded';
    default:
      return 'failed';
  }
}

export interface Summary {
  state: BatchState;
  done: boolean;
  stats: {
    requestCount: number;
    successfulRequestCount: number;
    failedRequestCount: number;
    pendingRequestCount: number;
  };
  /** Epoch ms. */
  updateMs: number;
  endMs?: number;
}

/**
 * The batch now: PENDING while none of its tasks has started, RUNNING while any is unfinished
 * (a canceled batch too, until its tasks have stopped), then CANCELLED if its owner canceled it,
 * SUCCEEDED if any request succeeded, FAILED if none did.
 */
export function summarize(rec: BatchRecord, tasks: TaskNow[], canceledMs?: number): Summary {
  const outcomes = rec.items.map((item, i) => outcome(item, item.task ? tasks[i] : undefined));
  const count = (o: Outcome) => outcomes.filter((x) => x === o).length;
  const [pending, running, succeeded, failed] = [
    count('pending'),
    count('running'),
    count('succeeded'),
    count('failed'),
  ];
  // Task times are whole seconds; the batch's own are ms.
  const times = tasks.flatMap((t) => (t ? [t.created_at, t.started_at ?? 0, t.finished_at ?? 0] : []));
  const updateMs = Math.max(rec.createdMs, canceledMs ?? 0, ...times.map((s) => s * 1000));
  const stats = {
    requestCount: rec.items.length,
    successfulRequestCount: succeeded,
    failedRequestCount: failed,
    pendingRequestCount: pending + running,
  };
  if (pending + running > 0) {
    const started = running > 0 || rec.items.some((it, i) => it.task && tasks[i] && outcomes[i] !== 'pending');
    return { state: started ? 'BATCH_STATE_RUNNING' : 'BATCH_STATE_PENDING', done: false, stats, updateMs };
  }
  const state =
    canceledMs !== undefined ? 'BATCH_STATE_CANCELLED' : succeeded > 0 ? 'BATCH_STATE_SUCCEEDED' : 'BATCH_STATE_FAILED';
  return { state, done: true, stats, updateMs, endMs: updateMs };
}

/** How a request ended, when it did not succeed: the google.rpc.Status of its inline response. */
export function failureOf(item: BatchItem, task: TaskNow): RpcStatus | null {
  if (item.refused) return item.refused;
  if (!task) return rpcStatus('not_found', `Task ${item.task} is no longer kept (RETENTION_DAYS).`);
  if (task.status === 'succeeded') return null;
  if (task.status === 'uncertain')
    return rpcStatus('uncertain', `Task ${task.id}: the outcome is uncertain. ${task.uncertain_reason ?? ''}`.trim());
  const e = task.error ?? { code: 'upstream_error', message: `Task ${task.id} ended ${task.status}.` };
  return rpcStatus(e.code, `Task ${task.id}: ${e.message}`);
}

/** A GenerateContentResponse or a Status, per request, in request order. */
export interface InlinedResponse {
  response?: unknown;
  error?: RpcStatus;
  metadata?: Record<string, unknown>;
}

const time = (ms: number) => new Date(ms).toISOString();

/**
 * The Operation as Google answers create, get and list. When done, the inline responses are in
 * `metadata.output` (where the SDKs read them); a batch that did not succeed also carries the
 * Operation's `error`.
 */
export function operation(rec: BatchRecord, s: Summary, output?: InlinedResponse[]) {
  const name = `batches/${rec.id}`;
  const failed: RpcStatus | undefined =
    s.state === 'BATCH_STATE_CANCELLED'
      ? { code: 1, message: 'The batch was canceled by its owner; finished requests keep their responses.' }
      : s.state === 'BATCH_STATE_FAILED'
        ? { code: 2, message: 'No request of the batch succeeded; each one says why in metadata.output.' }
        : undefined;
  return {
    name,
    metadata: {
      '@type': BATCH_TYPE,
      model: `models/${rec.model}`,
      name,
      ...(rec.displayName !== undefined ? { displayName: rec.displayName } : {}),
      createTime: time(rec.createdMs),
      updateTime: time(s.updateMs),
      ...(s.endMs !== undefined ? { endTime: time(s.endMs) } : {}),
      state: s.state,
      // int64 fields: decimal strings in Google's JSON mapping.
      batchStats: Object.fromEntries(Object.entries(s.stats).map(([k, v]) => [k, String(v)])),
      // Kiln's extension: each request's task (null for a request refused at submit).
      taskIds: rec.items.map((it) => it.task ?? null),
      ...(output ? { output: { inlinedResponses: { inlinedResponses: output } } } : {}),
    },
    done: s.done,
    ...(s.done && failed ? { error: failed } : {}),
  };
}

export type Operation = ReturnType<typeof operation>;
