// The one way an activity calls an upstream (image generation, video create / check / fetch): the
// channel it goes to (src/upstreams/channel-picker.ts), the Redis dispatch mark, and how a failure
// ends the attempt (a task failure code, `uncertain`, a move to another channel, or a retry by
// Temporal); the per-call budget and heartbeats are activities/upstream-budget.ts.
import { ApplicationFailure, Context } from '@temporalio/activity';
import { routed, type Routed } from '../src/config/channels.js';
import {
  CHANNEL_FAILOVER_FAILURE_TYPE,
  channelOf,
  movesOn,
  SUCCEEDED,
  verdictOf,
  type Verdict,
  resendable,
  type FailedOver,
  type ChannelTrail,
} from '../src/upstreams/failover.js';
import type { TaskStore } from '../src/tasks/store/task-store.js';
import type { AnyTaskRecord } from '../src/shared/records.js';
import { ALREADY_ENDED_FAILURE_TYPE, INLINE_BUSY_FAILURE_TYPE, UNCERTAIN_FAILURE_TYPE } from '../src/shared/errors.js';
import { TERMINAL_STATUSES } from '../src/shared/task.js';
import { notResent, type CallWording } from '../src/shared/call-wording.js';
import type { Closing, Reach } from '../src/shared/closing.js';
import type { CancelOrigin } from './cancel-origin.js';
import { type ChannelPicker, type PickableChannel } from '../src/upstreams/channel-picker.js';

import { retrying, STORE_RETRY_MS } from './retrying.js';
import { HEARTBEAT_EVERY_MS, underBudget } from './upstream-budget.js';

export { HEARTBEAT_EVERY_MS, type UpstreamModel } from './upstream-budget.js';
import { TransportFailure, UpstreamFailure } from '../src/upstreams/failures.js';

/** What a call needs of a model's channel. */
type CallChannel = PickableChannel & { idempotent: boolean };

/** What a call needs of a model (image or video). */
interface CallModel<C extends CallChannel> {
  id: string;
  heartbeatTimeoutMs: number;
  queueTimeoutMs: number;
  channels: C[];
}

type DispatchStore = Pick<TaskStore, 'dispatchedTo' | 'markDispatched' | 'clearDispatched' | 'get'>;

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
interface TaskRef {
  id: string;
  model: string;
  route?: ChannelTrail;
}

/** Upstream calls for the tasks of a worker's `models` (one kind: image or video). */
export function upstreamCalls<M extends CallModel<CallChannel>>(
  redisStore: DispatchStore,
  models: M[],
  origin: CancelOrigin,
  router: ChannelPicker,
) {
  // Heartbeats go on while a call waits for Redis, so the wait does not look like a dead worker.
  const patient = <T>(fn: () => Promise<T>) =>
    retrying(fn, STORE_RETRY_MS, () => {
      // Local activities (mayHaveReached) have no heartbeat.
      const ctx = Context.current();
      if (!ctx.info.isLocal) ctx.heartbeat();
    });
  const store: DispatchStore = {
    dispatchedTo: (id) => patient(() => redisStore.dispatchedTo(id)),
    markDispatched: (id, attempt, channel) => patient(() => redisStore.markDispatched(id, attempt, channel)),
    clearDispatched: (id) => patient(() => redisStore.clearDispatched(id)),
    get: (id) => patient(() => redisStore.get(id)),
  };
  const byId = new Map(models.map((m) => [m.id, m]));
  const modelOf = (id: string): M => {
    const model = byId.get(id);
    if (!model)
      throw ApplicationFailure.nonRetryable(`model ${id} is not configured on this worker`, 'invalid_request');
    return model;
  };
  /** The channel a job or a resend stays on; a job from before channels is on the model's one channel. */
  type C = M['channels'][number];
  const upstreamOf = (model: M, channelId: string | undefined): Routed<M, C> => {
    // A job from before channels names none: it went to the model's first (then only) upstream.
    const channel = channelOf(model, channelId ?? '') ?? (channelId === undefined ? model.channels[0] : undefined);
    if (!channel)
      throw ApplicationFailure.nonRetryable(
        `channel ${channelId} of model ${model.id} is not configured on this worker`,
        'invalid_request',
      );
    return routed(model, channel as C);
  };

  return {
    /**
     * Asked (as a local activity) when the last attempt ended without an answer of its own — the
     * worker shut down or died mid-call, or retries ran out: whether a non-idempotent upstream may
     * have received the request, which makes the task uncertain rather than failed.
     */
    async mayHaveReached(task: TaskRef): Promise<boolean> {
      const sentTo = await store.dispatchedTo(task.id);
      return sentTo !== null && !resendable(byId.get(task.model), sentTo);
    },

    /**
     * Asked (as a local activity) when the task is canceled: whether a request was sent (the Redis
     * dispatch mark), whether the upstream may bill for it regardless, and who asked (its owner or
     * an operator: Temporal's cancel request says).
     */
    async reach(task: TaskRef): Promise<ReachAnswer> {
      const closing = await origin();
      const sentTo = await store.dispatchedTo(task.id);
      if (sentTo === null) return { reach: 'not_sent', closing };
      return { reach: resendable(byId.get(task.model), sentTo) ? 'sent' : 'sent_not_idempotent', closing };
    },

    /**
     * This attempt's timing fields: the first attempt's start is kept through retries, so
     * `started_at` says when the upstream call began and `attempts` how many were made.
     */
    async timing(task: TaskRef, known?: AnyTaskRecord | null): Promise<Timing> {
      const { attempt, isLocal } = Context.current().info;
      const now = Math.floor(Date.now() / 1000);
      // Attempts on the channels the task was moved off count too.
      const before = task.route?.attempts ?? 0;
      if (attempt === 1 && !isLocal && before === 0) return { started_at: now, attempts: attempt };
      const stored = known !== undefined ? known : ((await store.get(task.id)) as AnyTaskRecord | null);
      // A local activity whose worker died starts over at attempt 1: count on from the stored attempt.
      const attempts =
        isLocal && stored?.status === 'running' && stored.attempts
          ? Math.max(before + attempt, stored.attempts + 1)
          : before + attempt;
      return { started_at: stored?.started_at ?? now, attempts };
    },

    /**
     * A call that asks the upstream to do something (generate, create), on one of the model's
     * channels. `started` runs once the attempt may go ahead and has its channel (it marks the task
     * running); an attempt that may already have reached a non-idempotent upstream, or that loses
     * its answer after sending, ends the task uncertain. A channel that provably did not take the
     * work (not sent, or refused) moves the task to the next channel: the attempt ends with a
     * CHANNEL_FAILOVER failure and the workflow calls again with the channel in `route.tried`.
     * `claim` (a slot of the model's on this worker) runs before a channel is taken.
     */
    async send<T>(
      task: TaskRef,
      wording: CallWording,
      started: (channel: string) => Promise<unknown>,
      call: (model: Routed<M, C>, signal: AbortSignal, dispatching: Dispatching) => Promise<T>,
      opts: { claim?: () => Promise<void>; stored?: AnyTaskRecord | null } = {},
    ): Promise<{ value: T; channel: string }> {
      const model = modelOf(task.model);
      const ctx = Context.current();
      const { attempt, isLocal } = ctx.info;
      // Every attempt asks, the first too: an operator's reset of the workflow starts the call over at
      // attempt 1 (as does a local activity whose worker died), and the read model is what remembers.
      const stored = opts.stored !== undefined ? opts.stored : ((await store.get(task.id)) as AnyTaskRecord | null);
      if (stored && TERMINAL_STATUSES.includes(stored.status)) {
        throw ApplicationFailure.create({
          message: `The task already ended ${stored.status}; its ${wording.request} is not sent again.`,
          type: ALREADY_ENDED_FAILURE_TYPE,
          nonRetryable: true,
          details: [stored],
        });
      }
      // A retry that finds no record at all: Redis lost it, and the dispatch mark with it, so
      // whether an earlier attempt sent the request (and where) cannot be known.
      if (attempt > 1 && stored === null && !model.channels.every((c) => c.idempotent)) {
        throw ApplicationFailure.nonRetryable(
          notResent(wording, 'its record (with the mark of what was sent) was lost from the read model'),
          UNCERTAIN_FAILURE_TYPE,
        );
      }
      // The Redis mark is awaited before sending, unlike heartbeats, which are throttled and may be
      // lost with the worker. Only an attempt after a `running` write can find it set. A request
      // that may have reached a channel is resent only there, and only when that channel is idempotent.
      const mayHaveSent = attempt > 1 || isLocal || stored?.status === 'running';
      const sentTo = mayHaveSent ? await store.dispatchedTo(task.id) : null;
      const pinned = sentTo === null ? undefined : channelOf(model, sentTo);
      if (sentTo !== null && !pinned?.idempotent) {
        throw ApplicationFailure.nonRetryable(
          notResent(wording, 'the attempt ended before its answer arrived'),
          UNCERTAIN_FAILURE_TYPE,
        );
      }
      await opts.claim?.();
      const tried = task.route?.tried ?? [];
      // While it waits for a channel with room the attempt heartbeats: a long wait must not look
      // like a dead worker, and a cancel must reach it.
      const beating = isLocal ? undefined : setInterval(() => ctx.heartbeat(), HEARTBEAT_EVERY_MS);
      const taken = await router
        .take(model, task.id, {
          tried,
          ...(pinned ? { pinned } : {}),
          // An inline call runs now or not at all: a workflow task cannot wait.
          wait: !isLocal,
          signal: ctx.cancellationSignal,
        })
        .finally(() => clearInterval(beating));
      if (!taken) {
        throw ApplicationFailure.nonRetryable('no channel with room for an inline call now', INLINE_BUSY_FAILURE_TYPE);
      }
      const channel = taken as C;
      const upstream = routed(model, channel);
      let verdict: Verdict = SUCCEEDED;
      const began = Date.now();
      try {
        await patient(() => started(channel.id));
        const value = await underBudget(
          upstream,
          wording,
          { dispatched: false },
          (signal, beat) =>
            call(upstream, signal, async () => {
              beat({ dispatched: true, channel: channel.id });
              await store.markDispatched(task.id, attempt, channel.id);
            }),
          async (err, timedOut) => {
            verdict = verdictOf(err, channel, { timedOut, canceled: ctx.cancellationSignal.aborted });
            if (movesOn(verdict, { channel: channel.id, channels: model.channels, tried, pinned: !!pinned })) {
              await store.clearDispatched(task.id);
              throw failover(channel.id, verdict, (task.route?.attempts ?? 0) + attempt, Date.now() - began);
            }
            if (timedOut || !(err instanceof TransportFailure)) return;
            if (!err.dispatched) await store.clearDispatched(task.id);
            else if (!upstream.idempotent) {
              throw ApplicationFailure.nonRetryable(
                `${err.message} after the ${wording.request} was sent; the outcome cannot be confirmed.`,
                UNCERTAIN_FAILURE_TYPE,
              );
            }
          },
        );
        return { value, channel: channel.id };
      } catch (err) {
        // A failure of the `running` write or of Kiln's own code after the answer: no verdict on the channel.
        if (verdict === SUCCEEDED) verdict = { ...SUCCEEDED, outcome: 'canceled' };
        throw err;
      } finally {
        await router.release(model, channel, task.id, verdict, Date.now() - began);
      }
    },

    /**
     * A read (status check, download, cancel) on the channel that accepted the job: safe to repeat,
     * so a long job does not end on one passing fault.
     */
    async read<T>(
      task: TaskRef,
      wording: CallWording,
      channelId: string | undefined,
      call: (model: Routed<M, C>, signal: AbortSignal) => Promise<T>,
    ): Promise<T> {
      const upstream = upstreamOf(modelOf(task.model), channelId);
      return underBudget(
        upstream,
        wording,
        undefined,
        (signal) => call(upstream, signal),
        async (err) => {
          if (err instanceof UpstreamFailure && err.transient)
            throw ApplicationFailure.retryable(err.message, 'upstream_transient');
        },
      );
    },
  };
}

/** The attempt's end that moves the task to another channel; the Web UI shows its message. */
function failover(channel: string, v: Verdict, attempts: number, durationMs: number): ApplicationFailure {
  const details: FailedOver = { channel, code: v.code, message: v.message.slice(0, 300), attempts, durationMs };
  return ApplicationFailure.create({
    message: `${channel}: ${v.message}`,
    type: CHANNEL_FAILOVER_FAILURE_TYPE,
    nonRetryable: true,
    details: [details],
  });
}
