// One workflow per image task; workflow id = task id. It owns the state machine
// accepted → queued → running → succeeded | failed | uncertain and records every transition
// through the worker (never Redis from here). History of a successful task: 11 events (README,
// "How it works"): `queued` goes through a sink, `succeeded` is written by the upstream activity
// itself and leaves KilnStatus unset, so the only commands are the activity and completion. An
// inline model's call is a local activity instead: 6 events, one workflow task.
import {
  CancellationScope,
  defineQuery,
  proxyActivities,
  proxyLocalActivities,
  proxySinks,
  setHandler,
} from '@temporalio/workflow';
import type { Activities } from '../activities/image/index.js';
import type { ReadModelSinks } from '../activities/read-model.js';
import { IMAGE_CALL } from '../src/shared/call-wording.js';
import { inlineUpstreamActivity, LOCAL_ACTIVITY, upstreamActivity } from './activity-policy.js';
import {
  canceled,
  canceledByOwner,
  cancelable,
  classify,
  endStatus,
  inlineBusy,
  lostAfterSending,
  noticeCancel,
  overChannels,
} from './task-outcome.js';
import { startWebhookDelivery } from './webhook-delivery.js';
import { imageJob, JobEnded } from './image-job.js';
import { newImageRecord, type ImageTaskInput, type ImageTaskRecord } from '../src/shared/image-task.js';
import type { ActivityPolicy } from '../src/shared/task.js';

export const getTaskQuery = defineQuery<ImageTaskRecord>('getTask');

export interface ImageTaskWorkflowInput {
  task: ImageTaskInput;
  policy: ActivityPolicy;
  /** The model's activity task queue: upstream concurrency and rate are set per queue. */
  activityQueue: string;
}

const { recordTransition, recordOutcome, mayHaveReachedUpstream, upstreamReach } =
  proxyLocalActivities<Activities>(LOCAL_ACTIVITY);
const { readModel } = proxySinks<ReadModelSinks>();

export async function imageTaskWorkflow({
  task,
  policy,
  activityQueue,
}: ImageTaskWorkflowInput): Promise<ImageTaskRecord> {
  let record: ImageTaskRecord = newImageRecord(task, 'queued');
  setHandler(getTaskQuery, () => record);
  noticeCancel(task.id);
  const setEndStatus = endStatus();
  // Written by the worker before this workflow task completes, so before the upstream activity can
  // start; no marker in history (see activities/read-model.ts).
  readModel.queued(record);

  const queued = proxyActivities<Activities>(cancelable(upstreamActivity(policy, activityQueue))).generateImage;
  // An inline model calls its upstream in this workflow task (no activity events, one workflow
  // task) when its worker has a slot free, and on the model's queue otherwise.
  const inline = policy.inline
    ? proxyLocalActivities<Activities>(cancelable(inlineUpstreamActivity(policy))).generateImage
    : undefined;
  // A model that is not inline calls the queue's proxy itself: every promise a workflow makes costs
  // the SDK's stack-trace hook a capture, and this path is every task's.
  const generateImage = inline
    ? async (input: ImageTaskInput) => {
        try {
          return await inline(input);
        } catch (err) {
          if (!inlineBusy(err)) throw err;
        }
        return queued(input);
      }
    : queued;

  const finished = (): Pick<ImageTaskRecord, 'finished_at'> => ({ finished_at: Math.floor(Date.now() / 1000) });
  try {
    if (task.webhook?.events === 'all') {
      // Only tasks that asked for every event: `running` is recorded here (the activity writes it
      // again), so its delivery can start once the read model shows it.
      await startWebhookDelivery(task.webhook, record);
      record = { ...record, status: 'running' };
      await recordTransition(record);
      await startWebhookDelivery(task.webhook, record, 'queued');
    }
    // The activity records `running`, then `succeeded` with its image: the read model has it
    // before the answer reaches this workflow.
    const done = policy.job
      ? await imageJob(task, { ...policy, job: policy.job }, activityQueue)
      : await overChannels(task, generateImage, policy.queueMs);
    record = done.record;
    // Redis failed the activity's write. The image exists: a cancel arriving now must not lose it.
    if (!done.recorded) await CancellationScope.nonCancellable(() => recordTransition(record));
  } catch (err) {
    // The owner canceled (POST /v1/tasks/{id}/cancel): the attempt was aborted through its heartbeat.
    // Asked here: inside the non-cancellable scope below nothing counts as canceled.
    const byOwner = canceledByOwner(err);
    // Non-cancellable (no command of its own): a cancel must not keep the outcome from Redis.
    record = await CancellationScope.nonCancellable(async () => {
      const outcome =
        err instanceof JobEnded
          ? err.outcome
          : byOwner
            ? canceled(await upstreamReach(task), IMAGE_CALL)
            : ((await lostAfterSending(err, IMAGE_CALL, () => mayHaveReachedUpstream(task))) ?? classify(err));
      const ended: ImageTaskRecord =
        outcome.status === 'uncertain'
          ? {
              ...record,
              ...finished(),
              status: 'uncertain',
              candidates: null,
              error: null,
              uncertain_reason: outcome.error.message,
            }
          : { ...record, ...finished(), status: 'failed', candidates: null, error: outcome.error };
      // An attempt that recorded its image and then lost its answer leaves `succeeded` in Redis:
      // that record is the task's outcome, here too.
      return (await recordOutcome(ended)).record;
    });
  }
  setEndStatus(record.status);
  if (task.webhook)
    await startWebhookDelivery(task.webhook, record, task.webhook.events === 'all' ? 'running' : undefined);
  return record;
}
