// What the calls of a worker's upstream calls share, and what the read model's marks tell of an
// attempt: whether a request may have reached the upstream (the dispatch mark), how far a canceled
// task's call got, and the attempts' timing fields. The sending itself is upstream-call.ts.
import { ApplicationFailure, Context } from '@temporalio/activity';
import { routed, type Routed } from '../src/config/channels.js';
import { channelOf, resendable, type ChannelTrail } from '../src/upstreams/failover.js';
import type { TaskStore } from '../src/tasks/store/task-store.js';
import type { AnyTaskRecord } from '../src/shared/records.js';
import type { Closing, Reach } from '../src/shared/closing.js';
import type { CancelOrigin } from './cancel-origin.js';
import type { CancelFeed } from './cancel-notices.js';
import type { ChannelPicker, PickableChannel } from '../src/upstreams/channel-picker.js';
import { retrying, STORE_RETRY_MS } from './retrying.js';

/** What a call needs of a model's channel. */
export type CallChannel = PickableChannel & { idempotent: boolean };

/** What a call needs of a model (image or video). */
export interface CallModel<C extends CallChannel> {
  id: string;
  heartbeatTimeoutMs: number;
  queueTimeoutMs: number;
  channels: C[];
}

export type DispatchStore = Pick<TaskStore, 'dispatchedTo' | 'markDispatched' | 'clearDispatched' | 'get' | 'requeue'>;

/** The timing extension fields an attempt records: when the first attempt began, and this attempt's number. */
export interface Timing {
  started_at: number;
  attempts: number;
}

/** How far a canceled task's upstream call got, and who canceled it (see `reach`). */
export interface ReachAnswer {
  reach: Reach;
  closing: Closing;
}

/** A terminal record the workflow built without the timing fields gets the ones the attempts stored (and the channel). */
export async function keepTiming<R extends AnyTaskRecord>(store: Pick<TaskStore, 'get'>, record: R): Promise<R> {
  if (record.started_at != null) return record;
  const stored = (await store.get(record.id).catch(() => null)) as AnyTaskRecord | null;
  if (stored?.started_at == null) return record;
  return {
    ...record,
    started_at: stored.started_at,
    attempts: stored.attempts,
    ...(stored.channel ? { channel: stored.channel } : {}),
  };
}

/** Must be awaited right before the request can reach the upstream: it makes `uncertain` decidable. */
export type Dispatching = () => Promise<void>;

/** A task as the calls see it: its id, its model's id, and the channels it was moved off. */
export interface TaskRef {
  id: string;
  model: string;
  route?: ChannelTrail;
}

/** What every call of a worker's upstream calls shares: the read model, the models, the picker. */
export interface Calls<M extends CallModel<CallChannel>> {
  store: DispatchStore;
  byId: Map<string, M>;
  origin: CancelOrigin;
  picker: ChannelPicker;
  /** Cancel notices: attempts heartbeat quietly while they listen (activities/heartbeats.ts). */
  cancels?: CancelFeed | undefined;
}

export type ChannelOf<M extends CallModel<CallChannel>> = M['channels'][number];

/** A read-model write that rides out a Redis outage, heartbeating meanwhile so the wait does not look like a dead worker. */
export const patient = <T>(fn: () => Promise<T>) =>
  retrying(fn, STORE_RETRY_MS, () => {
    // Local activities (mayHaveReached) have no heartbeat.
    const ctx = Context.current();
    if (!ctx.info.isLocal) ctx.heartbeat();
  });

export function patientStore(store: DispatchStore): DispatchStore {
  return {
    dispatchedTo: (id) => patient(() => store.dispatchedTo(id)),
    markDispatched: (id, attempt, channel) => patient(() => store.markDispatched(id, attempt, channel)),
    clearDispatched: (id) => patient(() => store.clearDispatched(id)),
    get: (id) => patient(() => store.get(id)),
    requeue: (id) => patient(() => store.requeue(id)),
  };
}

export function modelOf<M extends CallModel<CallChannel>>(c: Calls<M>, id: string): M {
  const model = c.byId.get(id);
  if (!model) throw ApplicationFailure.nonRetryable(`model ${id} is not configured on this worker`, 'invalid_request');
  return model;
}

/** The channel a job or a resend stays on; a job that names none is on the model's first (then only) one. */
export function upstreamOf<M extends CallModel<CallChannel>>(
  model: M,
  channelId: string | undefined,
): Routed<M, ChannelOf<M>> {
  const channel = channelOf(model, channelId ?? '') ?? (channelId === undefined ? model.channels[0] : undefined);
  if (!channel)
    throw ApplicationFailure.nonRetryable(
      `channel ${channelId} of model ${model.id} is not configured on this worker`,
      'invalid_request',
    );
  return routed(model, channel as ChannelOf<M>);
}

/**
 * Asked (as a local activity) when the last attempt ended without an answer of its own — the
 * worker shut down or died mid-call, or retries ran out: whether a non-idempotent upstream may
 * have received the request, which makes the task uncertain rather than failed.
 */
export async function mayHaveReached<M extends CallModel<CallChannel>>(c: Calls<M>, task: TaskRef): Promise<boolean> {
  const sentTo = await c.store.dispatchedTo(task.id);
  return sentTo !== null && !resendable(c.byId.get(task.model), sentTo);
}

/**
 * Asked (as a local activity) when the task is canceled: whether a request was sent (the Redis
 * dispatch mark), whether the upstream may bill for it regardless, and who asked (its owner or
 * an operator: Temporal's cancel request says).
 */
export async function reach<M extends CallModel<CallChannel>>(c: Calls<M>, task: TaskRef): Promise<ReachAnswer> {
  const closing = await c.origin();
  const sentTo = await c.store.dispatchedTo(task.id);
  if (sentTo === null) return { reach: 'not_sent', closing };
  return { reach: resendable(c.byId.get(task.model), sentTo) ? 'sent' : 'sent_not_idempotent', closing };
}

/**
 * This attempt's timing fields: the first attempt's start is kept through retries, so
 * `started_at` says when the upstream call began and `attempts` how many were made.
 */
export async function timing<M extends CallModel<CallChannel>>(
  c: Calls<M>,
  task: TaskRef,
  known?: AnyTaskRecord | null,
): Promise<Timing> {
  const { attempt, isLocal } = Context.current().info;
  const now = Math.floor(Date.now() / 1000);
  // Attempts on the channels the task was moved off count too.
  const before = task.route?.attempts ?? 0;
  if (attempt === 1 && !isLocal && before === 0) return { started_at: now, attempts: attempt };
  const stored = known !== undefined ? known : ((await c.store.get(task.id)) as AnyTaskRecord | null);
  // A local activity whose worker died starts over at attempt 1: count on from the stored attempt.
  const attempts =
    isLocal && stored?.status === 'running' && stored.attempts
      ? Math.max(before + attempt, stored.attempts + 1)
      : before + attempt;
  return { started_at: stored?.started_at ?? now, attempts };
}
