// What an upstream send settles before its request may go (upstream-call.ts): whether the task may be
// sent at all and to which channel (an ended task is not; a request that may have reached a channel
// goes back only there), and the channel's lease.
import { ApplicationFailure, Context } from '@temporalio/activity';
import { channelOf } from '../src/upstreams/failover.js';
import type { AnyTaskRecord } from '../src/shared/records.js';
import { ALREADY_ENDED_FAILURE_TYPE, INLINE_BUSY_FAILURE_TYPE, UNCERTAIN_FAILURE_TYPE } from '../src/shared/errors.js';
import { TERMINAL_STATUSES } from '../src/shared/task.js';
import { notResent, type CallWording } from '../src/shared/call-wording.js';
import { heartbeating } from './heartbeats.js';
import type { CallChannel, CallModel, Calls, ChannelOf, TaskRef } from './upstream-marks.js';

/**
 * The checks before a send, against the read model (an operator's reset starts the call over at
 * attempt 1, as does a local activity whose worker died, so every attempt asks): an ended task is
 * not sent again, and a request that may have reached a channel is resent only there, and only
 * when that channel is idempotent, or when its provider can look the request up by Kiln's id (then
 * it is looked up first). Returns that channel, or undefined for a first send.
 */
export async function resendTarget<M extends CallModel<CallChannel>>(
  c: Calls<M>,
  model: M,
  task: TaskRef,
  wording: CallWording,
  known: AnyTaskRecord | null | undefined,
  findable: (channel: ChannelOf<M>) => boolean,
): Promise<{ pinned?: ChannelOf<M>; findFirst: boolean }> {
  const { attempt, isLocal } = Context.current().info;
  const stored = known !== undefined ? known : ((await c.store.get(task.id)) as AnyTaskRecord | null);
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
  if (attempt > 1 && stored === null && !model.channels.every((ch) => ch.idempotent)) {
    throw ApplicationFailure.nonRetryable(
      notResent(wording, 'its record (with the mark of what was sent) was lost from the read model'),
      UNCERTAIN_FAILURE_TYPE,
    );
  }
  // The Redis mark is awaited before sending, unlike heartbeats, which are throttled and may be
  // lost with the worker. Only an attempt after a `running` write can find it set.
  const mayHaveSent = attempt > 1 || isLocal || stored?.status === 'running';
  const sentTo = mayHaveSent ? await c.store.dispatchedTo(task.id) : null;
  if (sentTo === null) return { findFirst: false };
  const pinned = channelOf(model, sentTo) as ChannelOf<M> | undefined;
  if (pinned && !pinned.idempotent && findable(pinned)) return { pinned, findFirst: true };
  if (!pinned?.idempotent)
    throw ApplicationFailure.nonRetryable(
      notResent(wording, 'the attempt ended before its answer arrived'),
      UNCERTAIN_FAILURE_TYPE,
    );
  return { pinned, findFirst: false };
}

/** A channel with room for this call, its lease taken; an inline call that finds none ends at once. */
export async function takeChannel<M extends CallModel<CallChannel>>(
  c: Calls<M>,
  model: M,
  task: TaskRef,
  pinned: ChannelOf<M> | undefined,
): Promise<ChannelOf<M>> {
  const ctx = Context.current();
  const { isLocal } = ctx.info;
  // While it waits for a channel with room the attempt heartbeats: a long wait must not look
  // like a dead worker, and a cancel must reach it.
  const stop = heartbeating(ctx, task.id, c.cancels);
  const taken = await c.picker
    .take(model, task.id, {
      tried: task.route?.tried ?? [],
      ...(pinned ? { pinned } : {}),
      // An inline call runs now or not at all: a workflow task cannot wait.
      wait: !isLocal,
      signal: ctx.cancellationSignal,
    })
    .finally(stop);
  if (!taken)
    throw ApplicationFailure.nonRetryable('no channel with room for an inline call now', INLINE_BUSY_FAILURE_TYPE);
  return taken as ChannelOf<M>;
}
