// A task whose workflow closed without recording its outcome: terminated, timed out, canceled or
// failed outside its own code, or gone from Temporal. No workflow code runs on those ends, so the
// task's record is written from here: what Temporal says happened, by whom, and whether the
// request may have reached a non-idempotent upstream (the dispatch mark) — `uncertain` then.
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Payload } from '@temporalio/common';
import { resendable } from '../upstreams/failover.js';
import type { Model } from '../config/models.js';
import { cancelBy, closedOutcome, type Closing, type Reach } from '../shared/closing.js';
import { newImageRecord, type ImageTaskInput } from '../shared/image-task.js';
import type { AnyTaskRecord } from '../shared/records.js';
import { IMAGE_CALL, VIDEO_CALL } from '../shared/call-wording.js';
import { newVideoRecord, type VideoTaskInput } from '../shared/video-task.js';
import type { TaskStore } from './store/task-store.js';

type TaskInput = { task: ImageTaskInput } | { task: VideoTaskInput };

/** What Temporal holds of a task's workflow now. */
export type WorkflowEnd =
  | { state: 'running' }
  | { state: 'completed'; record: AnyTaskRecord }
  | {
      state: 'closed';
      closing: Closing;
      closedAt: number;
      kind?: AnyTaskRecord['kind'];
      input?: TaskInput;
      /** The history shows an upstream call scheduled: the evidence when the read model lost the dispatch mark. */
      callStarted?: boolean;
    };

const KIND_OF: Record<string, AnyTaskRecord['kind']> = { imageTaskWorkflow: 'image', videoTaskWorkflow: 'video' };

/** The current run of `id`'s workflow: running, completed with its record, or closed and how. */
export async function workflowEnd(temporal: Client, id: string): Promise<WorkflowEnd> {
  const handle = temporal.workflow.getHandle(id);
  let d;
  try {
    d = await handle.describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return { state: 'closed', closing: { how: 'gone' }, closedAt: now() };
    throw err;
  }
  const status = d.status.name;
  if (status === 'RUNNING' || status === 'CONTINUED_AS_NEW') return { state: 'running' };
  if (status === 'COMPLETED') return { state: 'completed', record: (await handle.result()) as AnyTaskRecord };
  const events = (await temporal.workflow.getHandle(id, d.runId).fetchHistory()).events ?? [];
  const closedAt = Math.floor((d.closeTime ?? new Date()).getTime() / 1000);
  const first = events[0]?.workflowExecutionStartedEventAttributes;
  const input = first?.input?.payloads?.length
    ? await decodeFirst<TaskInput>(temporal, first.input.payloads)
    : undefined;
  return {
    state: 'closed',
    closing: closingOf(status, events),
    closedAt,
    kind: KIND_OF[d.type],
    input,
    callStarted: callStarted(events, input),
  };
}

/** Activities that send the task's request upstream. */
const UPSTREAM_CALLS = new Set(['generateImage', 'createVideo']);

function callStarted(events: HistoryEvent[], input: TaskInput | undefined): boolean {
  // An inline model's call leaves no event until it ends: its task counts as called.
  if ((input as { policy?: { inline?: boolean } } | undefined)?.policy?.inline) return true;
  // Temporal writes a retried activity's start only with its end: a call still under way when the
  // workflow closed shows as scheduled alone. Scheduled is the evidence, then: it may have been sent.
  return events.some((e) => UPSTREAM_CALLS.has(e.activityTaskScheduledEventAttributes?.activityType?.name ?? ''));
}

type HistoryEvent = NonNullable<
  Awaited<ReturnType<ReturnType<Client['workflow']['getHandle']>['fetchHistory']>>['events']
>[number];

function closingOf(status: string, events: HistoryEvent[]): Closing {
  const last = [...events].reverse();
  if (status === 'TERMINATED') {
    const t = last.find(
      (e) => e.workflowExecutionTerminatedEventAttributes,
    )?.workflowExecutionTerminatedEventAttributes;
    return { how: 'terminated', by: 'operator', ...said(t?.identity, t?.reason) };
  }
  if (status === 'CANCELLED') {
    const c = last.find(
      (e) => e.workflowExecutionCancelRequestedEventAttributes,
    )?.workflowExecutionCancelRequestedEventAttributes;
    const by = c ? cancelBy(c.identity ?? undefined) : 'unknown';
    return { how: 'canceled', by, ...(by === 'operator' ? said(c?.identity, c?.cause) : {}) };
  }
  if (status === 'TIMED_OUT') return { how: 'timed_out' };
  const f = last.find((e) => e.workflowExecutionFailedEventAttributes)?.workflowExecutionFailedEventAttributes;
  return { how: 'failed', ...(f?.failure?.message ? { reason: f.failure.message } : {}) };
}

const said = (identity?: string | null, reason?: string | null) => ({
  ...(identity ? { identity } : {}),
  ...(reason ? { reason } : {}),
});

/** The first of `payloads`, through the deployment's payload codec (encrypted at rest) and converter. */
export async function decodeFirst<T>(temporal: Client, payloads: Payload[]): Promise<T> {
  const { payloadConverter, payloadCodecs } = temporal.options.loadedDataConverter;
  let decoded = payloads;
  for (const codec of [...payloadCodecs].reverse()) decoded = await codec.decode(decoded);
  return payloadConverter.fromPayload(decoded[0]!) as T;
}

/**
 * The record a closed task ends with: its stored record (else the one its input describes), ended
 * truthfully. Null when neither is known (nothing to tell its owner).
 */
export async function closedRecord(
  deps: { store: Pick<TaskStore, 'get' | 'dispatchedTo'>; models: readonly Model[] },
  end: Extract<WorkflowEnd, { state: 'closed' }>,
  stored: AnyTaskRecord | null,
): Promise<AnyTaskRecord | null> {
  const base = stored ?? startRecord(end);
  if (!base) return null;
  const model = deps.models.find((m) => m.id === base.model);
  // The dispatch mark lives beside the record: without the record, the history is the evidence (and
  // names no channel). An unknown channel, or one no longer configured, counts as not idempotent.
  const sentTo = stored ? await deps.store.dispatchedTo(base.id) : end.callStarted ? '' : null;
  const idempotent = model && model.kind !== 'chat' && sentTo !== null ? resendable(model, sentTo) : false;
  const reach: Reach = sentTo === null ? 'not_sent' : idempotent ? 'sent' : 'sent_not_idempotent';
  const outcome = closedOutcome(end.closing, reach, base.kind === 'image' ? IMAGE_CALL : VIDEO_CALL);
  const ended =
    base.kind === 'image' ? { finished_at: end.closedAt, candidates: null } : { completed_at: end.closedAt };
  return outcome.status === 'uncertain'
    ? ({
        ...base,
        ...ended,
        status: 'uncertain',
        error: null,
        uncertain_reason: outcome.uncertain_reason,
      } as AnyTaskRecord)
    : ({ ...base, ...ended, status: 'failed', error: outcome.error } as AnyTaskRecord);
}

function startRecord(end: Extract<WorkflowEnd, { state: 'closed' }>): AnyTaskRecord | null {
  if (!end.input) return null;
  if (end.kind === 'video') return newVideoRecord(end.input.task as VideoTaskInput, 'accepted');
  return newImageRecord(end.input.task as ImageTaskInput, 'accepted');
}

const now = () => Math.floor(Date.now() / 1000);
