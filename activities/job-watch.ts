// Watching an upstream job (a video, an image job of fal, Replicate, DashScope) from one activity:
// it checks every pollIntervalMs in this process and heartbeats quietly meanwhile, so a job costs
// Temporal a few writes a minute, not a durable timer, an activity and two workflow tasks (~7
// writes) per check. It hands the job back to the workflow when the job completes, the task's
// budget runs out, its window closes, or this worker begins to stop (another worker goes on).
import { ApplicationFailure, Context } from '@temporalio/activity';
import { WATCH_WINDOW_MS, type JobCheck, type WatchPlan, type Watched } from '../src/shared/upstream-job.js';
import type { CancelFeed } from './cancel-notices.js';
import { heartbeating } from './heartbeats.js';

/** The wait before a check that failed on a passing fault is sent again (as Temporal's retry policy). */
const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 30_000;

export interface WatchDeps {
  taskId: string;
  feed?: CancelFeed | undefined;
  /** Aborts when the worker begins to stop: the watch hands back at once instead of being cut off. */
  stopping?: AbortSignal | undefined;
  /** One look at the job, as the one-check activity makes it (its timeout and failure mapping). */
  check: () => Promise<JobCheck>;
  /** The job's progress moved (a whole number below 100): best effort, never fails the watch. */
  progressed?: (progress: number) => Promise<void>;
  /** How long the watch lasts at most (tests shorten it). */
  windowMs?: number;
}

/** Heartbeat details, shown on the pending activity in the Web UI and read back by a retried attempt. */
interface WatchBeat {
  progress: number;
  checks: number;
}

export async function watchJob(plan: WatchPlan, deps: WatchDeps): Promise<Watched> {
  const ctx = Context.current();
  const started = Date.now();
  const before = ctx.info.heartbeatDetails as Partial<WatchBeat> | undefined;
  // A retried attempt starts from what the last one reached: progress never moves back.
  let progress = Math.max(plan.progress ?? 0, Number(before?.progress) || 0);
  let checks = 0;
  const stop = heartbeating(ctx, deps.taskId, deps.feed, (): WatchBeat => ({ progress, checks }));
  try {
    for (;;) {
      const left = plan.deadlineMs - Date.now();
      if (left <= 0) return { state: 'running', progress, timedOut: true };
      if (deps.stopping?.aborted || Date.now() - started >= (deps.windowMs ?? WATCH_WINDOW_MS))
        return { state: 'running', progress };
      if (!(await pause(ctx, Math.min(plan.pollIntervalMs, left), deps.stopping))) continue;
      const state = await checkWithRetries(ctx, plan.attempts, deps);
      checks++;
      if (state.state === 'completed') return state;
      // Progress only moves forward, and 100 means done.
      const next = Math.min(99, Math.max(progress, Math.floor(state.progress ?? 0)));
      if (next !== progress) {
        progress = next;
        await deps.progressed?.(progress).catch(() => undefined);
      }
    }
  } finally {
    stop();
  }
}

/** Waits `ms`; false when the worker began to stop meanwhile. A cancel throws (CancelledFailure). */
async function pause(ctx: Context, ms: number, stopping: AbortSignal | undefined): Promise<boolean> {
  if (!stopping) {
    await ctx.sleep(ms);
    return true;
  }
  let onStop: (() => void) | undefined;
  const stopped = new Promise<false>((resolve) => {
    onStop = () => resolve(false);
    stopping.addEventListener('abort', onStop, { once: true });
  });
  try {
    return await Promise.race([ctx.sleep(ms).then(() => true as const), stopped]);
  } finally {
    stopping.removeEventListener('abort', onStop!);
  }
}

/**
 * One check, sent again after a passing fault as Temporal would resend the one-check activity:
 * `attempts` in a row at most, waits doubling from 1 s. A failure that ends the task (a task
 * failure code, a timeout, the job failed upstream) or a cancel goes to the workflow at once.
 */
async function checkWithRetries(ctx: Context, attempts: number, deps: WatchDeps): Promise<JobCheck> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await deps.check();
    } catch (err) {
      if (ctx.cancellationSignal.aborted) throw err;
      if (err instanceof ApplicationFailure && err.nonRetryable) throw err;
      if (attempt >= Math.max(1, attempts)) {
        // The workflow reads it as it read a check whose retries ran out: upstream_error, with the cause.
        const type = err instanceof ApplicationFailure ? err.type : (err as Error)?.name;
        throw ApplicationFailure.nonRetryable(String((err as Error)?.message ?? err), type ?? 'Error');
      }
      await ctx.sleep(Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** (attempt - 1)));
    }
  }
}
