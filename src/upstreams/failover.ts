// The one failover decision: how an upstream call's end reads in routing's terms (a verdict), whether
// the task or chat call may move to another of its model's channels, and the trail of channels a
// task has left. The rule: move only when this channel provably did not take the work (not sent, or
// refused before processing; a 5xx only where the operator allowed it), never after a send that may
// have reached a channel, and never back to a channel already tried while another is left.
// Pure module: the workflow value-imports it (it keeps the trail; the activity decides each move).
import type { CallOutcome } from '../channels/state.js';
import type { TaskFailureCode } from '../shared/errors.js';
import type { ChannelTrail, FailedOver } from '../shared/channel-trail.js';
import { TransportFailure, UpstreamFailure } from './failures.js';

export type { ChannelTrail, FailedOver };

/** ApplicationFailure type of an attempt that moves the task to another channel (details: FailedOver). */
export const CHANNEL_FAILOVER_FAILURE_TYPE = 'channel_failover';

/**
 * ApplicationFailure type of an attempt refused without processing (busy, overloaded, rate limited,
 * not reachable) with no other channel left to move to (details: FailedOver). The workflow waits
 * (`refusalWaitMs`) and sends again, the task `queued` meanwhile, until the model's queue timeout.
 */
export const CHANNEL_REFUSED_FAILURE_TYPE = 'channel_refused';

/** How a call ended, in routing's terms. */
export interface Verdict {
  outcome: CallOutcome;
  /** The channel provably did not take the work (or the operator allowed 5xx failover). */
  movable: boolean;
  code: TaskFailureCode;
  message: string;
  retryAfterMs?: number;
}

export const SUCCEEDED: Verdict = { outcome: 'succeeded', movable: false, code: 'upstream_error', message: '' };

export function verdictOf(
  err: unknown,
  channel: { failoverOn5xx: boolean },
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

/**
 * Whether a call that ended with `verdict` on `channel` moves to another channel: the verdict
 * allows it, the call was not pinned to this channel (a resend goes only where the first send
 * went), and a channel not yet tried is left.
 */
export function movesOn(
  verdict: Verdict,
  at: { channel: string; channels: readonly { id: string }[]; tried: readonly string[]; pinned?: boolean },
): boolean {
  if (!verdict.movable || at.pinned) return false;
  return at.channels.some((c) => c.id !== at.channel && !at.tried.includes(c.id));
}

/**
 * Whether a call that ended with `verdict` and moved nowhere is worth sending again later: the
 * request provably did not leave, or the upstream refused it without processing for a passing
 * reason (rate limited, overloaded, unavailable). A refusal of the channel's credential or balance
 * (auth_failed, insufficient_balance) lasts: it ends the task at once.
 */
export function waitsOut(verdict: Verdict): boolean {
  if (verdict.outcome === 'not_sent') return true;
  return verdict.outcome === 'refused' && PASSING_REFUSALS.has(verdict.code);
}
const PASSING_REFUSALS: ReadonlySet<string> = new Set(['upstream_rate_limited', 'upstream_error', 'upstream_timeout']);

/** The first wait after a refusal, and the longest: a capped doubling, so a busy upstream is not hammered. */
export const REFUSAL_WAIT = { firstMs: 1000, maxMs: 30_000 } as const;

/**
 * The wait before sending again after the `n`th refusal in a row (0-based): the doubling backoff,
 * jittered over its upper half by `random` (0..1, so many refused tasks do not come back at once),
 * and never shorter than the upstream's Retry-After.
 */
export function refusalWaitMs(n: number, retryAfterMs: number | undefined, random: number): number {
  const capped = Math.min(REFUSAL_WAIT.maxMs, REFUSAL_WAIT.firstMs * 2 ** Math.min(n, 30));
  const jittered = Math.round(capped * (0.5 + 0.5 * random));
  return Math.max(jittered, retryAfterMs ?? 0);
}

/** The trail the next attempt carries once `moved` left a channel. */
export function trailAfter(trail: ChannelTrail | undefined, moved: FailedOver): ChannelTrail {
  return { tried: [...(trail?.tried ?? []), moved.channel], attempts: moved.attempts };
}

/** A line per attempt, for the workflow's current details in the Web UI. */
export function attemptLog(moves: readonly FailedOver[], last?: { channel: string; outcome: string }): string {
  const lines = moves.map((m, i) => `attempt ${i + 1} ${m.channel}: ${m.code} (${m.message.slice(0, 120)})`);
  if (last) lines.push(`attempt ${moves.length + 1} ${last.channel}: ${last.outcome}`);
  return lines.join('\n');
}

interface Channelled<C> {
  channels: readonly C[];
}

/**
 * The channel a dispatch mark names; undefined when the model no longer has it. `''` is a mark
 * that names none (a history without the record): the model's channel when it has one only, else
 * unknown.
 */
export function channelOf<C extends { id: string }>(model: Channelled<C>, id: string): C | undefined {
  if (id === '') return model.channels.length === 1 ? model.channels[0] : undefined;
  return model.channels.find((c) => c.id === id);
}

/**
 * Whether a request sent on `channelId` may be sent again: a channel no longer configured counts
 * as not idempotent, the careful answer.
 */
export function resendable(
  model: Channelled<{ id: string; idempotent: boolean }> | undefined,
  channelId: string,
): boolean {
  return model ? (channelOf(model, channelId)?.idempotent ?? false) : false;
}
