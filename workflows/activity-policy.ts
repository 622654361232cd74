// How image and video workflows run their activities: one retry policy for both kinds of task.
import type { ActivityOptions, LocalActivityOptions } from '@temporalio/workflow';
import { TASK_FAILURE_CODES, UNCERTAIN_FAILURE_TYPE } from '../src/shared/errors.js';
import type { ActivityPolicy } from '../src/shared/task.js';
import { WATCH_WINDOW_MS } from '../src/shared/upstream-job.js';

/** Read-model writes and the may-have-reached question, run as local activities. */
export const LOCAL_ACTIVITY: LocalActivityOptions = {
  startToCloseTimeout: '10s',
  // The read model must catch up even through a long Redis outage: retry without a limit.
  retry: { initialInterval: '200ms', backoffCoefficient: 2, maximumInterval: '30s' },
};

/** The longest an upstream call may wait for a channel with room before Temporal calls it lost. */
const CAPACITY_WAIT_MS = 24 * 3600_000;

/** Upstream calls, on the model's activity queue (where its concurrency and rate are set). */
export function upstreamActivity(policy: ActivityPolicy, taskQueue: string): ActivityOptions {
  return {
    taskQueue,
    // Providers abort at timeoutMs themselves, after the wait for a channel with room, which lasts
    // as long as the deployment is busy (heartbeating, so a dead worker is still noticed at once);
    // this bound only catches a worker that vanished.
    startToCloseTimeout: policy.timeoutMs + (policy.queueMs === undefined ? 0 : CAPACITY_WAIT_MS) + 15_000,
    heartbeatTimeout: policy.heartbeatTimeoutMs,
    retry: {
      initialInterval: '1s',
      backoffCoefficient: 2,
      maximumAttempts: policy.maxAttempts,
      // A task failure code or uncertain is the attempt's answer: resending cannot change it.
      nonRetryableErrorTypes: [...TASK_FAILURE_CODES, UNCERTAIN_FAILURE_TYPE],
    },
  };
}

/**
 * An inline model's upstream call: a local activity in the workflow's own workflow task, with the
 * upstream activity's timeout and retries (the model's queue, heartbeats and rate do not apply).
 */
export function inlineUpstreamActivity(policy: ActivityPolicy): LocalActivityOptions {
  // An inline call never waits for a channel: it runs at once or goes to the queue.
  const { retry } = upstreamActivity(policy, '');
  const startToCloseTimeout = policy.timeoutMs + 15_000;
  // The wait before a retry is a workflow timer, not a sleep inside the workflow task: a cancel
  // (or a signal) arriving meanwhile is taken at once, and the attempt number survives the worker.
  return { startToCloseTimeout, retry, localRetryThreshold: '1ms' };
}

/** The call that asks an upstream to stop a job (a cancel, a spent budget): bounded, as a model queue without a worker must not hold the task's outcome for long. */
export function stopJobActivity(policy: ActivityPolicy, taskQueue: string): ActivityOptions {
  return { ...upstreamActivity(policy, taskQueue), scheduleToCloseTimeout: '1m' };
}

/**
 * A job watch (activities/job-watch.ts), on the workers' watch queue (`watchQueue`): it lasts its
 * window or what is left of the task's budget, and one more wait and check past its window; checks
 * that fail on passing faults may each wait up to 30 s before they go again. Heartbeats notice a
 * worker that died long before this bound.
 */
export function watchActivity(
  policy: ActivityPolicy,
  taskQueue: string,
  watch: { leftMs: number; pollIntervalMs: number },
): ActivityOptions {
  const checks = policy.maxAttempts * (policy.timeoutMs + 30_000);
  const last = Math.min(WATCH_WINDOW_MS, watch.leftMs) + watch.pollIntervalMs;
  return { ...upstreamActivity(policy, taskQueue), startToCloseTimeout: last + checks + 15_000 };
}
