// One workflow per video task; workflow id = task id. It creates the upstream job, has one activity
// watch it (checks every pollIntervalMs, progress written to Redis, quiet heartbeats; a workflow an
// older release started checks it on durable timers), and copies the finished video into Kiln's
// blob store. Every transition goes to Redis through an activity.
import {
  CancellationScope,
  ContinueAsNew,
  continueAsNew,
  defineQuery,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { VideoActivities } from '../activities/video/index.js';
import { SEARCH_ATTRIBUTES, type TaskStatus } from '../src/shared/task.js';
import { VIDEO_CALL } from '../src/shared/call-wording.js';
import { watchQueue } from '../src/shared/upstream-job.js';
import {
  newVideoRecord,
  type VideoJob,
  type VideoPolicy,
  type VideoTaskInput,
  type VideoTaskRecord,
} from '../src/shared/video-task.js';
import { LOCAL_ACTIVITY, stopJobActivity, upstreamActivity, watchActivity } from './activity-policy.js';
import {
  canceled,
  canceledByOwner,
  canceledJob,
  cancelable,
  classify,
  endedBefore,
  endStatus,
  lostAfterSending,
  noticeCancel,
  overChannels,
  STOP_UNKNOWN,
  type Outcome,
} from './task-outcome.js';
import { startWebhookDelivery } from './webhook-delivery.js';

export const getVideoTaskQuery = defineQuery<VideoTaskRecord>('getVideoTask');

export interface VideoTaskWorkflowInput {
  task: VideoTaskInput;
  policy: VideoPolicy;
  /** The model's activity task queue: upstream concurrency and rate are set per queue. */
  activityQueue: string;
  /** Workflow-node form: the task carries `results[*].url`. */
  results: boolean;
  /** Set when the workflow continues as new: the job being watched, the record so far, the deadline. */
  resume?: { job: VideoJob; record: VideoTaskRecord; deadlineMs: number };
}

const { recordVideoTransition, videoMayHaveReachedUpstream, videoUpstreamReach } =
  proxyLocalActivities<VideoActivities>(LOCAL_ACTIVITY);

/** The owner canceled: the upstream job is stopped where the provider can, within a bounded time. */
function cancelOutcome(input: VideoTaskWorkflowInput, job: VideoJob | undefined): Promise<Outcome> {
  return CancellationScope.nonCancellable(async () => {
    if (!job) return canceled(await videoUpstreamReach(input.task), VIDEO_CALL);
    const { cancelVideo } = proxyActivities<VideoActivities>(stopJobActivity(input.policy, input.activityQueue));
    return canceledJob(await cancelVideo({ task: input.task, job }).catch(() => STOP_UNKNOWN));
  });
}

/** The overall budget ran out: the task ends failed / upstream_timeout. */
class OverallTimeout extends Error {}

export async function videoTaskWorkflow(input: VideoTaskWorkflowInput): Promise<VideoTaskRecord> {
  const { task, policy } = input;
  const deadlineMs = input.resume?.deadlineMs ?? Date.now() + policy.overallTimeoutMs;
  let record: VideoTaskRecord = input.resume?.record ?? newVideoRecord(task, 'queued');
  setHandler(getVideoTaskQuery, () => record);
  noticeCancel(task.id);
  const write = async (next: VideoTaskRecord) => {
    record = next;
    await recordVideoTransition(record);
  };
  const status = (s: TaskStatus) => upsertSearchAttributes({ [SEARCH_ATTRIBUTES.status]: [s] });
  const setEndStatus = endStatus();
  // Non-cancellable: a cancel already waiting when the first worker runs must not skip `queued`'s
  // write and the outcome's (the try below records it); no command of its own.
  if (!input.resume) await CancellationScope.nonCancellable(() => write(record));
  const everyEvent = task.webhook?.events === 'all' ? task.webhook : undefined;
  if (everyEvent && !input.resume) await startWebhookDelivery(everyEvent, record);

  const upstream = proxyActivities<VideoActivities>(cancelable(upstreamActivity(policy, input.activityQueue)));
  const finished = () => ({ completed_at: Math.floor(Date.now() / 1000) });

  let job = input.resume?.job;
  let outcome: Outcome | null = null;
  try {
    if (!job) {
      if (Date.now() >= deadlineMs) throw new OverallTimeout();
      try {
        job = await overChannels(task, upstream.createVideo, policy.queueMs);
      } catch (err) {
        if (!canceledByOwner(err))
          outcome = await lostAfterSending(err, VIDEO_CALL, () => videoMayHaveReachedUpstream(task));
        throw err;
      }
      // A job in a history an older release recorded may have no timing fields or channel.
      record = { ...record, status: 'running', ...job.timing, ...(job.channel ? { channel: job.channel } : {}) };
      status('running');
      if (everyEvent) {
        // Only tasks that asked for every event: `running` is written now rather than with the
        // first progress, so its delivery can start once the read model shows it.
        await write(record);
        await startWebhookDelivery(everyEvent, record, 'queued');
      }
    }
    // A workflow an older release started goes on checking from here, one timer and activity a check.
    const watching = patched('watch-job-in-one-activity');
    for (;;) {
      const left = deadlineMs - Date.now();
      if (left <= 0) throw new OverallTimeout();
      let state;
      if (watching) {
        const { watchVideo } = proxyActivities<VideoActivities>(
          cancelable(
            watchActivity(policy, watchQueue(workflowInfo().taskQueue), {
              leftMs: left,
              pollIntervalMs: policy.pollIntervalMs,
            }),
          ),
        );
        const plan = { pollIntervalMs: policy.pollIntervalMs, deadlineMs, attempts: policy.maxAttempts };
        state = await watchVideo({ task, job, record, plan });
        if (state.state === 'running' && state.timedOut) {
          record = { ...record, progress: Math.max(record.progress, state.progress) };
          throw new OverallTimeout();
        }
      } else {
        await sleep(Math.min(policy.pollIntervalMs, left));
        state = await upstream.checkVideo({ task, job });
      }
      if (state.state === 'completed') {
        const out = await upstream.fetchVideo({ task, job, outputs: state.outputs ?? [], results: input.results });
        record = { ...record, ...finished(), status: 'succeeded', progress: 100, ...out, error: null };
        break;
      }
      // Progress only moves forward, and 100 means done. A watch has written it to the read model.
      const progress = Math.min(99, Math.max(record.progress, Math.floor(state.progress ?? 0)));
      if (watching) record = { ...record, progress };
      else if (progress !== record.progress) await write({ ...record, progress });
      if (workflowInfo().continueAsNewSuggested) {
        return await continueAsNew<typeof videoTaskWorkflow>({ ...input, resume: { job, record, deadlineMs } });
      }
    }
  } catch (err) {
    if (err instanceof ContinueAsNew) throw err;
    const ended = endedBefore<VideoTaskRecord>(err);
    // The owner canceled (POST /v1/videos/{id}/cancel): timers and activities of this scope stop at once.
    if (!ended && canceledByOwner(err)) outcome = await cancelOutcome(input, job);
    if (err instanceof OverallTimeout) {
      // The upstream is asked to stop the job (best effort), so it bills no further work. Patched:
      // a history recorded before this step replays without it.
      if (job && patched('cancel-job-on-timeout')) await cancelOutcome(input, job);
      outcome = {
        status: 'failed',
        error: {
          code: 'upstream_timeout',
          message: `The upstream did not finish the video within ${policy.overallTimeoutMs} ms.`,
        },
      };
    }
    outcome ??= classify(err);
    if (ended) record = ended;
    else
      record =
        outcome.status === 'uncertain'
          ? { ...record, ...finished(), status: 'uncertain', error: null, uncertain_reason: outcome.error.message }
          : { ...record, ...finished(), status: 'failed', error: outcome.error };
  }
  setEndStatus(record.status);
  // Non-cancellable (no command of its own): a cancel arriving now must not keep the outcome from Redis.
  await CancellationScope.nonCancellable(() => write(record));
  // With every event, the end follows `running` when the upstream job was created, else `queued`.
  if (task.webhook) await startWebhookDelivery(task.webhook, record, everyEvent && (job ? 'running' : 'queued'));
  return record;
}
