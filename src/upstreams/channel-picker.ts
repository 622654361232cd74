// Which of a model's channels a call goes to (priority, weight, room, cool-downs), for tasks and
// chat alike; whether it may then move to another is failover.ts's. Capacity, rate and health are
// the deployment's, in Redis (src/channels/state.ts).
import { ApplicationFailure } from '@temporalio/common';
import { limitsOf, type PickableChannel } from '../channels/limits.js';
import type { ChannelState } from '../channels/state.js';

export type { PickableChannel };
import { abortableSleep } from '../shared/abortable-sleep.js';
import type { Verdict } from './failover.js';

export interface PickableModel<C extends PickableChannel> {
  id: string;
  channels: C[];
  /** How long a call may wait while every channel is cooling down; default none. */
  queueTimeoutMs?: number;
}

/**
 * The order to try channels in: the highest priority tier first; within a tier a weighted random
 * order. Channels in `tried` (they refused this task) come only when no other is left.
 */
export function pickingOrder<C extends PickableChannel>(channels: readonly C[], tried: readonly string[]): C[] {
  const fresh = channels.filter((c) => !tried.includes(c.id));
  const pool = fresh.length ? fresh : [...channels];
  const tiers = [...new Set(pool.map((c) => c.priority))].sort((a, b) => b - a);
  return tiers.flatMap((p) => weightedShuffle(pool.filter((c) => c.priority === p)));
}

function weightedShuffle<C extends { weight: number }>(items: C[]): C[] {
  // Efraimidis–Spirakis: sorting by u^(1/w) draws without replacement in proportion to weight.
  return items
    .map((c) => ({ c, key: Math.random() ** (1 / c.weight) }))
    .sort((a, b) => b.key - a.key)
    .map((x) => x.c);
}

/** Every candidate was cooling down for the whole queue timeout: the task ends with the last refusal's code. */
function noChannel(modelId: string, waitedMs: number, lastCode: string | undefined) {
  return ApplicationFailure.nonRetryable(
    `No channel of model ${modelId} could take the task within ${waitedMs} ms: ` +
      'every channel was cooling down after refusals.',
    lastCode ?? 'upstream_rate_limited',
  );
}

export interface TakeOptions<C> {
  tried: readonly string[];
  /** The only channel the call may use (an idempotent resend goes where the first one went). */
  pinned?: C;
  /** Wait for room (the caller heartbeats meanwhile); false: answer null at once (an inline call). */
  wait: boolean;
  signal: AbortSignal;
}

export function channelPicker(state: ChannelState, retry: <T>(fn: () => Promise<T>) => Promise<T>) {
  return {
    /** A channel with room for this call (its lease taken), or null when `wait` is false and none has. */
    async take<C extends PickableChannel>(
      model: PickableModel<C>,
      holder: string,
      opts: TakeOptions<C>,
    ): Promise<C | null> {
      // Waiting for room is unbounded, as a task waits its turn on a queue; only a wait with every
      // candidate cooling down (refusing) ends, after the model's queue timeout.
      let coolingSince: number | undefined;
      for (;;) {
        const order = opts.pinned ? [opts.pinned] : pickingOrder(model.channels, opts.tried);
        let coolingOnly = true;
        let pause = 1000;
        for (const channel of order) {
          const got = await retry(() =>
            state.acquire({ model: model.id, channel: channel.id }, holder, limitsOf(channel, only(model))),
          );
          if (got.ok) return channel;
          if (got.reason === 'cooling') pause = Math.min(pause, Math.max(20, got.untilMs - Date.now()));
          else {
            if (got.reason !== 'probing') coolingOnly = false;
            pause = Math.min(pause, got.reason === 'rate' ? Math.max(5, got.retryInMs) : 50 + Math.random() * 150);
          }
        }
        if (!opts.wait) return null;
        const now = Date.now();
        coolingSince = coolingOnly ? (coolingSince ?? now) : undefined;
        if (coolingSince !== undefined && now + pause - coolingSince > (model.queueTimeoutMs ?? 0))
          throw noChannel(model.id, now - coolingSince, (await coolingSummary(state, model, order)).lastCode);
        await abortableSleep(pause, opts.signal);
      }
    },

    /** Gives the lease back and tells the channel's health how the call ended (best effort: leases lapse). */
    async release<C extends PickableChannel>(
      model: PickableModel<C>,
      channel: C,
      holder: string,
      v: Verdict,
      durationMs: number,
    ): Promise<void> {
      await state
        .release({ model: model.id, channel: channel.id }, holder, limitsOf(channel, only(model)), {
          outcome: v.outcome,
          durationMs,
          ...(v.outcome === 'succeeded' ? {} : { error: { code: v.code, message: v.message.slice(0, 300) } }),
          ...(v.retryAfterMs !== undefined ? { retryAfterMs: v.retryAfterMs } : {}),
          jitter: Math.random(),
        })
        .catch(() => undefined);
    },
  };
}

const only = (model: PickableModel<PickableChannel>) => model.channels.length === 1;

export type ChannelPicker = ReturnType<typeof channelPicker>;

/**
 * What `channels`' health says while they cool down: the code of the most recent refusal among
 * them, and the soonest end of a cool-down (epoch ms). For a task that waited them out, and for a
 * chat call answered at once.
 */
export async function coolingSummary<C extends PickableChannel>(
  state: ChannelState,
  model: PickableModel<C>,
  channels: readonly C[],
): Promise<{ lastCode?: string; soonestEndMs?: number }> {
  const snaps = await Promise.all(
    channels.map((c) => state.snapshot({ model: model.id, channel: c.id }, limitsOf(c)).catch(() => null)),
  );
  const now = Date.now();
  const last = snaps.flatMap((s) => (s?.lastError ? [s.lastError] : [])).sort((a, b) => b.at - a.at)[0];
  const ends = snaps.flatMap((s) => (s?.coolingUntil && s.coolingUntil > now ? [s.coolingUntil] : []));
  return {
    ...(last ? { lastCode: last.code } : {}),
    ...(ends.length ? { soonestEndMs: Math.min(...ends) } : {}),
  };
}
