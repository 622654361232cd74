// Which of a model's channels an upstream call goes to, and how its end is told apart: the one
// place that decides when a task may move to another channel. The rule: only when this channel
// provably did not take the work (not sent; or refused before processing). Capacity, rate and
// health are the deployment's, in Redis (src/channels/state.ts).
import { ApplicationFailure } from '@temporalio/activity';
import type { CallOutcome, ChannelLimits, ChannelState } from '../src/channels/state.js';
import { abortableSleep } from '../src/shared/abortable-sleep.js';
import type { TaskFailureCode } from '../src/shared/errors.js';
import { TransportFailure, UpstreamFailure } from './upstream-http.js';

/** What routing needs of a channel (image, video and chat channels all have it). */
export interface RoutableChannel {
  id: string;
  priority: number;
  weight: number;
  timeoutMs: number;
  failoverOn5xx: boolean;
  cooldownAfter: number;
  cooldownWindowMs: number;
  cooldownMs: number;
  concurrency?: number;
  ratePerSecond?: number;
}

export interface RoutableModel<C extends RoutableChannel> {
  id: string;
  channels: C[];
  /** How long a call may wait while every channel is cooling down; default none. */
  queueTimeoutMs?: number;
}

/** Chat channels have no concurrency setting: a chat call holds its client's request, not a queue slot. */
const UNBOUNDED = 1_000_000;

/**
 * A channel's limits. The only channel of a model never cools down: there is nothing to move to,
 * so each task gets the upstream's own answer at once, as a model without channels always did.
 */
export function limitsOf(c: RoutableChannel, only = false): ChannelLimits {
  return {
    concurrency: c.concurrency ?? UNBOUNDED,
    ...(c.ratePerSecond ? { ratePerSecond: c.ratePerSecond } : {}),
    cools: !only,
    cooldownAfter: c.cooldownAfter,
    cooldownWindowMs: c.cooldownWindowMs,
    cooldownMs: c.cooldownMs,
    // A worker killed mid-call never releases: its lease lapses after the longest call it could make.
    leaseMs: c.timeoutMs + 30_000,
  };
}

/**
 * The order to try channels in: the highest priority tier first; within a tier a weighted random
 * order. Channels in `tried` (they refused this task) come only when no other is left.
 */
export function routingOrder<C extends RoutableChannel>(channels: readonly C[], tried: readonly string[]): C[] {
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

/** How a call ended, in routing's terms: whether another channel may take the task. */
export interface Verdict {
  outcome: CallOutcome;
  /** The channel provably did not take the work (or the operator allowed 5xx failover). */
  movable: boolean;
  code: TaskFailureCode;
  message: string;
  retryAfterMs?: number;
}

export function verdictOf(
  err: unknown,
  channel: Pick<RoutableChannel, 'failoverOn5xx'>,
  how: { timedOut: boolean; canceled: boolean },
): Verdict {
  const message = err instanceof Error ? err.message : String(err);
  if (how.canceled) return { outcome: 'canceled', movable: false, code: 'canceled', message };
  if (how.timedOut) return { outcome: 'ambiguous', movable: false, code: 'upstream_timeout', message };
  if (err instanceof TransportFailure)
    return err.dispatched
      ? { outcome: 'ambiguous', movable: false, code: 'upstream_error', message }
      : { outcome: 'not_sent', movable: true, code: 'upstream_error', message };
  if (err instanceof UpstreamFailure) {
    const { refused, status, retryAfterMs } = err.info;
    if (refused)
      return {
        outcome: 'refused',
        movable: true,
        code: err.code,
        message,
        ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
      };
    const serverError = status !== undefined && status >= 500;
    return { outcome: 'failed', movable: serverError && channel.failoverOn5xx, code: err.code, message };
  }
  return { outcome: 'failed', movable: false, code: 'upstream_error', message };
}

export const SUCCEEDED: Verdict = { outcome: 'succeeded', movable: false, code: 'upstream_error', message: '' };

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

export function channelRouter(state: ChannelState, retry: <T>(fn: () => Promise<T>) => Promise<T>) {
  return {
    /** A channel with room for this call (its lease taken), or null when `wait` is false and none has. */
    async take<C extends RoutableChannel>(
      model: RoutableModel<C>,
      holder: string,
      opts: TakeOptions<C>,
    ): Promise<C | null> {
      // Waiting for room is unbounded, as a task waits its turn on a queue; only a wait with every
      // candidate cooling down (refusing) ends, after the model's queue timeout.
      let coolingSince: number | undefined;
      for (;;) {
        const order = opts.pinned ? [opts.pinned] : routingOrder(model.channels, opts.tried);
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
    async release<C extends RoutableChannel>(
      model: RoutableModel<C>,
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

const only = (model: RoutableModel<RoutableChannel>) => model.channels.length === 1;

export type ChannelRouter = ReturnType<typeof channelRouter>;

/**
 * What `channels`' health says while they cool down: the code of the most recent refusal among
 * them, and the soonest end of a cool-down (epoch ms). For a task that waited them out, and for a
 * chat call answered at once.
 */
export async function coolingSummary<C extends RoutableChannel>(
  state: ChannelState,
  model: RoutableModel<C>,
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
