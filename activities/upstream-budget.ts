// An upstream call's budget: the channel's per-call timeout and Temporal's cancellation, with
// heartbeats meanwhile, and how a failure nobody mapped ends the attempt (retried by Temporal).
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { CallWording } from '../src/shared/call-wording.js';
import { deadline } from '../src/shared/deadline.js';
import { UpstreamFailure } from '../src/upstreams/failures.js';
import type { CancelFeed } from './cancel-notices.js';
import { heartbeating } from './heartbeats.js';

export { HEARTBEAT_EVERY_MS } from './heartbeats.js';

/** What a call needs of its upstream (a model's channel, merged over the model's settings). */
export interface UpstreamModel {
  timeoutMs: number;
  idempotent: boolean;
}

/**
 * Heartbeat details: for operators (the Web UI shows them on a call that lasts); the Redis mark is
 * what decides uncertain.
 */
export interface DispatchMark {
  dispatched: boolean;
  channel?: string;
}

/** Whose call it is, and the feed that tells its attempt of a cancel (activities/heartbeats.ts). */
export interface Listening {
  taskId: string;
  feed?: CancelFeed | undefined;
}

/**
 * Runs `run` within the model's timeout and Temporal's cancellation, heartbeating meanwhile. `map`
 * may turn a failure into the attempt's outcome first; failures mapped by no one are retried.
 */
export async function underBudget<T>(
  model: UpstreamModel,
  wording: CallWording,
  listening: Listening,
  initial: DispatchMark | undefined,
  run: (signal: AbortSignal, nextBeat: (details: DispatchMark) => void) => Promise<T>,
  map: (err: unknown, timedOut: boolean) => Promise<void>,
): Promise<T> {
  const ctx = Context.current();
  const timeout = deadline(model.timeoutMs);
  const signal = AbortSignal.any([timeout.signal, ctx.cancellationSignal]);
  // Heartbeats carry a cancel to the attempt and let Temporal notice a dead worker. An owner's cancel
  // closes the upstream connection within a second: the workflow's cancel notice quickens the beats.
  let details = initial;
  const stop = heartbeating(ctx, listening.taskId, listening.feed, () => details);
  try {
    return await run(signal, (d) => {
      details = d;
    });
  } catch (err) {
    await map(err, timeout.expired);
    if (timeout.expired) {
      throw ApplicationFailure.nonRetryable(
        `The ${wording.upstream} gave no ${wording.answer} within ${model.timeoutMs} ms.`,
        'upstream_timeout',
      );
    }
    if (err instanceof UpstreamFailure) {
      // A retryable type outside TASK_FAILURE_CODES: once retries run out the workflow reports upstream_error.
      throw err.retryable
        ? ApplicationFailure.retryable(err.message, `${err.code}_retryable`)
        : ApplicationFailure.nonRetryable(err.message, err.code);
    }
    throw err; // retryable: a transport failure before dispatch, a read, or an idempotent upstream
  } finally {
    timeout.clear();
    stop();
  }
}
