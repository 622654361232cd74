// The one way an activity calls an upstream (image generation, video create / check / fetch): the
// channel it goes to (src/upstreams/channel-picker.ts), the Redis dispatch mark, and how a failure
// ends the attempt (a task failure code, `uncertain`, a move to another channel, or a retry by
// Temporal); the checks before a send and the channel's lease are activities/upstream-preflight.ts,
// the per-call budget and heartbeats activities/upstream-budget.ts.
import { ApplicationFailure, Context } from '@temporalio/activity';
import { routed, type Routed } from '../src/config/channels.js';
import {
  CHANNEL_FAILOVER_FAILURE_TYPE,
  CHANNEL_REFUSED_FAILURE_TYPE,
  waitsOut,
  movesOn,
  SUCCEEDED,
  verdictOf,
  type FailedOver,
  type Verdict,
} from '../src/upstreams/failover.js';
import type { AnyTaskRecord } from '../src/shared/records.js';
import { UNCERTAIN_FAILURE_TYPE } from '../src/shared/errors.js';
import { notResent, type CallWording } from '../src/shared/call-wording.js';
import { cancelOrigin, type CancelOrigin } from './cancel-origin.js';
import { channelPicker, type ChannelPicker } from '../src/upstreams/channel-picker.js';
import type { ChannelState } from '../src/channels/state.js';
import type { TaskStore } from '../src/tasks/store/task-store.js';
import { storeRetry } from './retrying.js';
import { createOrFind, LookupFailed, type Found } from './lookup.js';
import { TransportFailure, UpstreamFailure } from '../src/upstreams/failures.js';
import { underBudget } from './upstream-budget.js';
import { resendTarget, takeChannel } from './upstream-preflight.js';
import type { CancelFeed } from './cancel-notices.js';
import {
  mayHaveReached,
  modelOf,
  patient,
  patientStore,
  reach,
  timing,
  upstreamOf,
  type CallChannel,
  type CallModel,
  type Calls,
  type ChannelOf,
  type Dispatching,
  type DispatchStore,
  type TaskRef,
} from './upstream-marks.js';

export { HEARTBEAT_EVERY_MS, type UpstreamModel } from './upstream-budget.js';
export { keepTiming, type Dispatching, type ReachAnswer, type Timing } from './upstream-marks.js';

/** What a kind's activities (image, video) are built from: the worker, or a test, hands them in. */
export interface KindDeps<M extends CallModel<CallChannel> & { provider: string }, P> {
  store: TaskStore;
  /** The deployment's channel leases, rate and health (Redis). */
  channels: ChannelState;
  /** Who canceled a task (its owner or an operator): read from Temporal. */
  origin?: CancelOrigin;
  models: M[];
  providers: Partial<Record<M['provider'], P>>;
  /** Cancel notices (activities/cancel-notices.ts); without them attempts heartbeat often. */
  cancels?: CancelFeed;
  /** Aborts when the worker begins to stop: job watches hand their jobs back (activities/job-watch.ts). */
  stopping?: AbortSignal;
}

/** A kind's upstream calls, on the deployment's channels; `origin` unknown when none is given. */
export function kindUpstream<M extends CallModel<CallChannel> & { provider: string }>(deps: KindDeps<M, unknown>) {
  const origin = deps.origin ?? cancelOrigin(undefined);
  const picker = channelPicker(deps.channels, storeRetry);
  return { ...upstreamCalls(deps.store, deps.models, origin, picker, deps.cancels), origin, cancels: deps.cancels };
}

/** Upstream calls for the tasks of a worker's `models` (one kind: image or video). */
export function upstreamCalls<M extends CallModel<CallChannel>>(
  redisStore: DispatchStore,
  models: M[],
  origin: CancelOrigin,
  picker: ChannelPicker,
  cancels?: CancelFeed,
) {
  const c: Calls<M> = {
    store: patientStore(redisStore),
    byId: new Map(models.map((m) => [m.id, m])),
    origin,
    picker,
    cancels,
  };
  return {
    mayHaveReached: (task: TaskRef) => mayHaveReached(c, task),
    reach: (task: TaskRef) => reach(c, task),
    timing: (task: TaskRef, known?: AnyTaskRecord | null) => timing(c, task, known),
    send: <T>(
      task: TaskRef,
      wording: CallWording,
      started: (channel: string) => Promise<unknown>,
      call: (model: Routed<M, ChannelOf<M>>, signal: AbortSignal, dispatching: Dispatching) => Promise<T>,
      opts: SendOptions<M, T> = {},
    ) => send(c, task, wording, started, call, opts),
    read: <T>(
      task: TaskRef,
      wording: CallWording,
      channelId: string | undefined,
      call: (model: Routed<M, ChannelOf<M>>, signal: AbortSignal) => Promise<T>,
    ) => read(c, task, wording, channelId, call),
  };
}

interface SendOptions<M extends CallModel<CallChannel>, T> {
  /** Takes a slot of the model's on this worker; runs before a channel is taken. */
  claim?: () => Promise<void>;
  /** The task's record, when the caller has just read it. */
  stored?: AnyTaskRecord | null;
  /**
   * How to look the request up on a channel whose provider finds a create by Kiln's id (lookup.ts);
   * undefined where it cannot. A lost answer is then looked up instead of ending the task uncertain.
   */
  finder?: (model: Routed<M, ChannelOf<M>>, signal: AbortSignal) => (() => Promise<Found<T>>) | undefined;
}

/**
 * A call that asks the upstream to do something (generate, create), on one of the model's
 * channels. `started` runs once the attempt may go ahead and has its channel (it marks the task
 * running); an attempt that may already have reached a non-idempotent upstream, or that loses
 * its answer after sending, ends the task uncertain. A channel that provably did not take the
 * work moves the task to the next channel: the attempt ends with a CHANNEL_FAILOVER failure and
 * the workflow calls again with the channel in `route.tried`.
 */
async function send<M extends CallModel<CallChannel>, T>(
  c: Calls<M>,
  task: TaskRef,
  wording: CallWording,
  started: (channel: string) => Promise<unknown>,
  call: (model: Routed<M, ChannelOf<M>>, signal: AbortSignal, dispatching: Dispatching) => Promise<T>,
  opts: SendOptions<M, T>,
): Promise<{ value: T; channel: string }> {
  const model = modelOf(c, task.model);
  const findable = (ch: ChannelOf<M>) => !!opts.finder?.(routed(model, ch), new AbortController().signal);
  const { pinned, findFirst } = await resendTarget(c, model, task, wording, opts.stored, findable);
  await opts.claim?.();
  const channel = await takeChannel(c, model, task, pinned);
  let verdict: Verdict = SUCCEEDED;
  const began = Date.now();
  try {
    await patient(() => started(channel.id));
    const value = await attemptOn(c, model, channel, task, wording, call, {
      pinned: pinned !== undefined,
      findFirst,
      ...(opts.finder ? { finder: opts.finder } : {}),
      judged: (v) => (verdict = v),
      began,
    });
    return { value, channel: channel.id };
  } catch (err) {
    // A failure of the `running` write or of Kiln's own code after the answer: no verdict on the channel.
    if (verdict === SUCCEEDED) verdict = { ...SUCCEEDED, outcome: 'canceled' };
    throw err;
  } finally {
    await c.picker.release(model, channel, task.id, verdict, Date.now() - began);
  }
}
/**
 * The request on `channel`, within its budget: the dispatch mark is set right before it can reach
 * the upstream, and a failure is judged by the failover decision (src/upstreams/failover.ts).
 */
async function attemptOn<M extends CallModel<CallChannel>, T>(
  c: Calls<M>,
  model: M,
  channel: ChannelOf<M>,
  task: TaskRef,
  wording: CallWording,
  call: (model: Routed<M, ChannelOf<M>>, signal: AbortSignal, dispatching: Dispatching) => Promise<T>,
  how: {
    pinned: boolean;
    findFirst: boolean;
    finder?: SendOptions<M, T>['finder'];
    began: number;
    judged: (v: Verdict) => void;
  },
): Promise<T> {
  const ctx = Context.current();
  const { attempt } = ctx.info;
  const upstream = routed(model, channel);
  const tried = task.route?.tried ?? [];
  return underBudget(
    upstream,
    wording,
    { taskId: task.id, feed: c.cancels },
    { dispatched: false },
    (signal, nextBeat) => {
      const dispatching = async () => {
        nextBeat({ dispatched: true, channel: channel.id });
        await c.store.markDispatched(task.id, attempt, channel.id);
      };
      const find = how.finder?.(upstream, signal);
      const create = () => call(upstream, signal, dispatching);
      return find ? createOrFind({ create, find, signal, findFirst: how.findFirst }) : create();
    },
    async (err, timedOut) => {
      // Whether the upstream has the request could not be asked: it may, and it is not sent again.
      if (err instanceof LookupFailed && !timedOut)
        throw ApplicationFailure.nonRetryable(notResent(wording, err.message), UNCERTAIN_FAILURE_TYPE);
      const verdict = verdictOf(err, channel, { timedOut, canceled: ctx.cancellationSignal.aborted });
      how.judged(verdict);
      const attempts = (task.route?.attempts ?? 0) + attempt;
      if (movesOn(verdict, { channel: channel.id, channels: model.channels, tried, pinned: how.pinned })) {
        await c.store.clearDispatched(task.id);
        throw failover(channel.id, verdict, attempts, Date.now() - how.began);
      }
      // Nowhere to move, but nothing was processed: the workflow waits and sends again.
      if (waitsOut(verdict)) {
        await c.store.clearDispatched(task.id);
        // The task waits its turn again: `queued`, until the next attempt takes a channel.
        await c.store.requeue(task.id);
        throw failover(channel.id, verdict, attempts, Date.now() - how.began, CHANNEL_REFUSED_FAILURE_TYPE);
      }
      if (timedOut || !(err instanceof TransportFailure)) return;
      if (!err.dispatched) await c.store.clearDispatched(task.id);
      else if (!upstream.idempotent) {
        throw ApplicationFailure.nonRetryable(
          `${err.message} after the ${wording.request} was sent; the outcome cannot be confirmed.`,
          UNCERTAIN_FAILURE_TYPE,
        );
      }
    },
  );
}

/**
 * A read (status check, download, cancel) on the channel that accepted the job: safe to repeat,
 * so a long job does not end on one passing fault.
 */
async function read<M extends CallModel<CallChannel>, T>(
  c: Calls<M>,
  task: TaskRef,
  wording: CallWording,
  channelId: string | undefined,
  call: (model: Routed<M, ChannelOf<M>>, signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const upstream = upstreamOf(modelOf(c, task.model), channelId);
  return underBudget(
    upstream,
    wording,
    { taskId: task.id, feed: c.cancels },
    undefined,
    (signal) => call(upstream, signal),
    async (err) => {
      if (err instanceof UpstreamFailure && err.transient)
        throw ApplicationFailure.retryable(err.message, 'upstream_transient');
    },
  );
}

/**
 * The attempt's end that moves the task to another channel, or (CHANNEL_REFUSED) has it wait and
 * come back; the Web UI shows its message.
 */
function failover(
  channel: string,
  v: Verdict,
  attempts: number,
  durationMs: number,
  type = CHANNEL_FAILOVER_FAILURE_TYPE,
): ApplicationFailure {
  const details: FailedOver = {
    channel,
    code: v.code,
    message: v.message.slice(0, 300),
    attempts,
    durationMs,
    ...(v.retryAfterMs !== undefined ? { retryAfterMs: v.retryAfterMs } : {}),
  };
  return ApplicationFailure.create({
    message: `${channel}: ${v.message}`,
    type,
    nonRetryable: true,
    details: [details],
  });
}
