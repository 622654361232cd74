// How a failed upstream activity ends a task (image or video): pure workflow-side classification.
import { ActivityFailure, ApplicationFailure, TimeoutFailure } from '@temporalio/workflow';
import { TASK_FAILURE_CODES, UNCERTAIN_FAILURE_TYPE, type ErrorBody } from '../src/shared/errors.js';
import { notResent, type CallWording } from '../src/shared/upstream.js';

export interface Outcome {
  status: 'failed' | 'uncertain';
  error: ErrorBody;
}

/** Whether the activity itself ended the task with a known outcome (a task failure code or uncertain). */
export function endedByActivity(err: unknown): boolean {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return (
    cause instanceof ApplicationFailure &&
    (cause.type === UNCERTAIN_FAILURE_TYPE || (TASK_FAILURE_CODES as readonly string[]).includes(cause.type ?? ''))
  );
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
