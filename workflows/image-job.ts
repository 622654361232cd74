// The job path of an image task whose provider answers later (fal, Replicate, DashScope): create
// the upstream job, have one activity watch it (a workflow an older release started checks it on
// durable timers), then fetch the images, which the fetch records `succeeded` itself. A cancel or
// the task's budget running out stops the upstream job.
import { CancellationScope, patched, proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type { Activities, ImageDone } from '../activities/image/index.js';
import type { ImageTaskInput } from '../src/shared/image-task.js';
import type { ActivityPolicy } from '../src/shared/task.js';
import { watchQueue, type UpstreamJob } from '../src/shared/upstream-job.js';
import { stopJobActivity, upstreamActivity, watchActivity } from './activity-policy.js';
import { canceledByOwner, canceledJob, cancelable, overChannels, STOP_UNKNOWN, type Outcome } from './task-outcome.js';

/** How the job ended when it did not succeed: the outcome is known (a cancel, the budget). */
export class JobEnded extends Error {
  constructor(readonly outcome: Outcome) {
    super(outcome.error.message);
  }
}

type JobPolicy = ActivityPolicy & { job: NonNullable<ActivityPolicy['job']> };

export async function imageJob(task: ImageTaskInput, policy: JobPolicy, activityQueue: string): Promise<ImageDone> {
  const { pollIntervalMs, overallTimeoutMs } = policy.job;
  const deadlineMs = Date.now() + overallTimeoutMs;
  const upstream = proxyActivities<Activities>(cancelable(upstreamActivity(policy, activityQueue)));
  // A create that never answered is the caller's to classify (uncertain or not sent).
  const job = await overChannels(task, upstream.createImageJob, policy.queueMs);
  try {
    const watching = patched('watch-job-in-one-activity');
    for (;;) {
      const left = deadlineMs - Date.now();
      if (left <= 0) throw new JobEnded(timedOut(overallTimeoutMs));
      let state;
      if (watching) {
        const { watchImageJob } = proxyActivities<Activities>(
          cancelable(watchActivity(policy, watchQueue(workflowInfo().taskQueue), { leftMs: left, pollIntervalMs })),
        );
        state = await watchImageJob({ task, job, plan: { pollIntervalMs, deadlineMs, attempts: policy.maxAttempts } });
        if (state.state === 'running' && state.timedOut) throw new JobEnded(timedOut(overallTimeoutMs));
      } else {
        await sleep(Math.min(pollIntervalMs, left));
        state = await upstream.checkImageJob({ task, job });
      }
      if (state.state === 'completed') return await upstream.fetchImageJob({ task, job, outputs: state.outputs ?? [] });
    }
  } catch (err) {
    if (err instanceof JobEnded) {
      // Budget spent: the upstream is asked to stop (best effort), so it bills no further work.
      await stopJob(task, policy, activityQueue, job).catch(() => undefined);
      throw err;
    }
    if (canceledByOwner(err)) throw new JobEnded(canceledJob(await stopJob(task, policy, activityQueue, job)));
    throw err;
  }
}

function timedOut(ms: number): Outcome {
  return {
    status: 'failed',
    error: { code: 'upstream_timeout', message: `The upstream did not finish the images within ${ms} ms.` },
  };
}

/** Asks the upstream to stop the job, within a bounded time; retries running out count as not stopped. */
function stopJob(task: ImageTaskInput, policy: JobPolicy, activityQueue: string, job: UpstreamJob) {
  return CancellationScope.nonCancellable(async () => {
    const { cancelImageJob } = proxyActivities<Activities>(stopJobActivity(policy, activityQueue));
    return cancelImageJob({ task, job }).catch(() => STOP_UNKNOWN);
  });
}
