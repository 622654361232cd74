// How a failed upstream activity ends a task (image or video): pure workflow-side classification.
import { ActivityFailure, ApplicationFailure, TimeoutFailure } from '@temporalio/workflow';
import { TASK_FAILURE_CODES, UNCERTAIN_FAILURE_TYPE, type ErrorBody } from '../src/shared/errors.js';

/** Whether the activity itself ended the task with a known outcome (a task failure code or uncertain). */
export function endedByActivity(err: unknown): boolean {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return cause instanceof ApplicationFailure
    && (cause.type === UNCERTAIN_FAILURE_TYPE || (TASK_FAILURE_CODES as readonly string[]).includes(cause.type ?? ''));
}

export function lastAttemptReason(err: unknown): string {
  const cause = err instanceof ActivityFailure ? err.cause ?? err : err;
  return cause instanceof Error && cause.message ? cause.message : 'no details';
}

export function classify(err: unknown): { status: 'failed' | 'uncertain'; error: ErrorBody } {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof ApplicationFailure) {
    if (cause.type === UNCERTAIN_FAILURE_TYPE) return { status: 'uncertain', error: { code: 'uncertain', message: cause.message } };
    if ((TASK_FAILURE_CODES as readonly string[]).includes(cause.type ?? '')) {
      return { status: 'failed', error: { code: cause.type!, message: cause.message } };
    }
    return { status: 'failed', error: { code: 'upstream_error', message: `The upstream call failed after retries: ${cause.message}` } };
  }
  if (cause instanceof TimeoutFailure) {
    return { status: 'failed', error: { code: 'upstream_timeout', message: 'The upstream call did not finish in time.' } };
  }
  return { status: 'failed', error: { code: 'upstream_error', message: 'The upstream call failed.' } };
}
