// How a task moves between its model's channels. Pure module: safe to value-import from workflow
// code (the workflow keeps the route; the activity picks the channel and says when to move on).

/**
 * What a task's upstream call carries from the calls before it: the channels that refused it or
 * could not be reached (skipped while another is available), and the attempts made so far.
 */
export interface Route {
  tried: string[];
  attempts: number;
}

/** One attempt that moved the task to another channel: the Web UI's "attempt 1 relay-a: 503". */
export interface FailedOver {
  channel: string;
  /** The task failure code the refusal would have ended the task with. */
  code: string;
  message: string;
  /** Attempts made so far, this one included. */
  attempts: number;
  durationMs: number;
}

/** ApplicationFailure type of an attempt that moves the task to another channel (details: FailedOver). */
export const CHANNEL_FAILOVER_FAILURE_TYPE = 'channel_failover';

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
 * that names none (written before channels, or a history without the record): the model's channel
 * when it has one only, else unknown.
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
