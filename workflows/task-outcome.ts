// How a failed upstream activity ends a task (image or video): pure workflow-side classification.
import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  isCancellation,
  proxySinks,
  setCurrentDetails,
  sleep,
  TimeoutFailure,
  upsertSearchAttributes,
  workflowInfo,
  type ActivityOptions,
  type LocalActivityOptions,
} from '@temporalio/workflow';
import {
  ALREADY_ENDED_FAILURE_TYPE,
  INLINE_BUSY_FAILURE_TYPE,
  TASK_FAILURE_CODES,
  UNCERTAIN_FAILURE_TYPE,
  type ErrorBody,
} from '../src/shared/errors.js';
import { SEARCH_ATTRIBUTES, type TaskStatus } from '../src/shared/task.js';
import { notResent, type CallWording } from '../src/shared/call-wording.js';
import type { ReachAnswer } from '../activities/upstream-call.js';
import type { CancelNoticeSinks } from '../activities/cancel-notices.js';
import {
  attemptLog,
  CHANNEL_FAILOVER_FAILURE_TYPE,
  CHANNEL_REFUSED_FAILURE_TYPE,
  refusalWaitMs,
  trailAfter,
  type ChannelTrail,
  type FailedOver,
} from '../src/upstreams/failover.js';
import { canceledError, endedBy, type Closing, type Reach } from '../src/shared/closing.js';

export interface Outcome {
  status: 'failed' | 'uncertain';
  error: ErrorBody;
}

/** Whether the activity itself ended the task with a known outcome (a task failure code or uncertain). */
export function endedByActivity(err: unknown): boolean {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return (
    cause instanceof ApplicationFailure &&
    (cause.type === UNCERTAIN_FAILURE_TYPE ||
      cause.type === ALREADY_ENDED_FAILURE_TYPE ||
      (TASK_FAILURE_CODES as readonly string[]).includes(cause.type ?? ''))
  );
}

/**
 * The record of a task that had ended before this call (an operator reset its workflow): it stays
 * the task's outcome, so the read model, the workflow's result and the Web UI agree. Null otherwise.
 */
export function endedBefore<R>(err: unknown): R | null {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (!(cause instanceof ApplicationFailure) || cause.type !== ALREADY_ENDED_FAILURE_TYPE) return null;
  return (cause.details?.[0] as R | undefined) ?? null;
}

/** The attempt moved the task to another channel (or was refused with none left, `type`): what happened; null otherwise. */
export function failedOver(err: unknown, type = CHANNEL_FAILOVER_FAILURE_TYPE): FailedOver | null {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (!(cause instanceof ApplicationFailure) || cause.type !== type) return null;
  return (cause.details?.[0] as FailedOver | undefined) ?? null;
}

/**
 * Runs `call` until an attempt ends other than by moving to another channel: each move goes into
 * the route the next call carries, and into the workflow's current details (the Web UI shows
 * "attempt 1 relay-a: upstream_rate_limited …"). An attempt refused without processing where no
 * channel is left to move to (busy, overloaded, rate limited, unreachable) waits on a durable timer
 * (a capped, jittered doubling that honours Retry-After) and sends again over every channel, for
 * at most `queueMs` from the first such refusal; then the task ends with that refusal's code.
 */
export async function overChannels<I extends { route?: ChannelTrail }, O>(
  input: I,
  call: (input: I) => Promise<O>,
  queueMs = 0,
): Promise<O> {
  const moves: FailedOver[] = [];
  let refusedSince: number | undefined;
  let refusals = 0;
  for (let next = input; ;) {
    try {
      return await call(next);
    } catch (err) {
      const moved = failedOver(err);
      if (moved) {
        moves.push(moved);
        next = { ...next, route: trailAfter(next.route, moved) };
        setCurrentDetails(attemptLog(moves));
        continue;
      }
      const refused = failedOver(err, CHANNEL_REFUSED_FAILURE_TYPE);
      if (!refused) throw err;
      moves.push(refused);
      refusedSince ??= Date.now() - refused.durationMs;
      const waitMs = refusalWaitMs(refusals++, refused.retryAfterMs, Math.random());
      const waited = Date.now() - refusedSince;
      if (waited + waitMs > queueMs)
        throw ApplicationFailure.nonRetryable(
          `${refused.message} (refused for ${waited} ms; the next try would pass the model's queue timeout, ` +
            `${queueMs} ms)`,
          refused.code,
        );
      setCurrentDetails(`${attemptLog(moves)}\nwaiting ${waitMs} ms before sending again`);
      // Every channel may be tried again: the refusals were passing.
      next = { ...next, route: { tried: [], attempts: refused.attempts } };
      await sleep(waitMs);
    }
  }
}

/** An inline call that found no free slot: nothing was written or sent (activities/inline-slots.ts). */
export function inlineBusy(err: unknown): boolean {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return cause instanceof ApplicationFailure && cause.type === INLINE_BUSY_FAILURE_TYPE;
}

function lastAttemptReason(err: unknown): string {
  const cause = err instanceof ActivityFailure ? (err.cause ?? err) : err;
  return cause instanceof Error && cause.message ? cause.message : 'no details';
}

/**
 * No attempt gave an answer of its own (the last one died with its worker, or retries ran out): if
 * the request may have reached a non-idempotent upstream (`mayHaveReached`, a local activity), the
 * result cannot be confirmed and the task is uncertain; otherwise null.
 */
export async function lostAfterSending(
  err: unknown,
  wording: CallWording,
  mayHaveReached: () => Promise<boolean>,
): Promise<Outcome | null> {
  if (endedByActivity(err) || !(await mayHaveReached())) return null;
  const reason = notResent(wording, `its last attempt ended without an answer (${lastAttemptReason(err)})`);
  return { status: 'uncertain', error: { code: 'uncertain', message: reason } };
}

export function classify(err: unknown): Outcome {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof ApplicationFailure) {
    if (cause.type === UNCERTAIN_FAILURE_TYPE)
      return { status: 'uncertain', error: { code: 'uncertain', message: cause.message } };
    if ((TASK_FAILURE_CODES as readonly string[]).includes(cause.type ?? '')) {
      return { status: 'failed', error: { code: cause.type!, message: cause.message } };
    }
    return {
      status: 'failed',
      error: { code: 'upstream_error', message: `The upstream call failed after retries: ${cause.message}` },
    };
  }
  if (cause instanceof TimeoutFailure) {
    return {
      status: 'failed',
      error: { code: 'upstream_timeout', message: 'The upstream call did not finish in time.' },
    };
  }
  return { status: 'failed', error: { code: 'upstream_error', message: 'The upstream call failed.' } };
}

/**
 * Upstream calls of a task that can be canceled: the workflow waits until the attempt has stopped
 * (its next heartbeat, well under a second), so what the cancel message says about the upstream
 * is settled. Only the cancel path differs: Temporal's schedule command does not carry this.
 */
const { cancelNotice } = proxySinks<CancelNoticeSinks>();

/**
 * Tells every worker when this task is asked to cancel (a sink: no command, not on replay): the
 * attempt holding its upstream call then heartbeats at once and often, and hears Temporal's cancel
 * within a second, though it beats quietly otherwise (activities/heartbeats.ts).
 */
export function noticeCancel(taskId: string): void {
  CancellationScope.current().cancelRequested.catch(() => cancelNotice.requested(taskId));
}

export function cancelable<O extends ActivityOptions | LocalActivityOptions>(options: O): O {
  return { ...options, cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED };
}

/**
 * Whether `err` ends the task as canceled by its owner: a cancellation, or an attempt that died
 * (timed out) after the cancel was requested. An attempt's own outcome (a task failure code,
 * uncertain) stays the task's. Call it in the workflow's own scope, not a non-cancellable one.
 */
export function canceledByOwner(err: unknown): boolean {
  return isCancellation(err) || (CancellationScope.current().consideredCancelled && !endedByActivity(err));
}

/**
 * The task was canceled (its owner through Kiln's API, or an operator in the Web UI or CLI): it ends
 * failed / canceled, and the message says who, and whether a non-idempotent upstream may have the
 * request (and may still bill for it). A history an older release recorded holds the bare reach,
 * without who canceled: those cancels were the owner's.
 */
export function canceled(answer: Reach | ReachAnswer, w: CallWording): Outcome {
  const { reach, who } =
    typeof answer === 'string'
      ? { reach: answer, who: 'Canceled by its owner' }
      : { ...answer, who: endedBy(answer.closing) };
  return { status: 'failed', error: canceledError(who, reach, w) };
}

/** A stop whose retries ran out: whether the upstream stopped, and who canceled, are not known. */
export const STOP_UNKNOWN = { stopped: false, closing: { how: 'canceled', by: 'unknown' } } as const;

/** A task canceled once the upstream had its job: `stopped` when the upstream agreed to stop it. */
export function canceledJob(answer: boolean | { stopped: boolean; closing: Closing }): Outcome {
  const { stopped, who } =
    typeof answer === 'boolean'
      ? { stopped: answer, who: 'Canceled by its owner' }
      : { stopped: answer.stopped, who: endedBy(answer.closing) };
  const message = stopped
    ? `${who} after the upstream had started the job; the upstream was asked to stop it, ` +
      'but the work done may still be billed.'
    : `${who} after the upstream had started the job, which may keep running there ` +
      '(Kiln could not ask it to stop): the work may still be billed.';
  return { status: 'failed', error: { code: 'canceled', message } };
}

const kilnStatus = (): readonly unknown[] | undefined => workflowInfo().searchAttributes?.[SEARCH_ATTRIBUTES.status];

/**
 * What sets KilnStatus at a task's end; call it when the workflow starts. Every task's workflow
 * completes, so KilnStatus names the outcomes ExecutionStatus does not tell apart: `failed` (with
 * canceled) and `uncertain`. A succeeded task leaves it unset (`ExecutionStatus = "Completed" AND
 * KilnStatus IS NULL`), which saves an image task its one search-attribute upsert: a history event
 * and a visibility write. A workflow an older release started (KilnStatus `accepted` from its
 * start) upserts every outcome, as that release's code did, so its history replays.
 */
export function endStatus(): (status: TaskStatus) => void {
  const previousRelease = kilnStatus()?.[0] === 'accepted';
  return (status) => {
    if (status !== 'succeeded' || previousRelease) upsertSearchAttributes({ [SEARCH_ATTRIBUTES.status]: [status] });
    // A video's `running` is taken back.
    else if (kilnStatus()?.length) upsertSearchAttributes({ [SEARCH_ATTRIBUTES.status]: [] });
  };
}
