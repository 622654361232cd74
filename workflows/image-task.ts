// One workflow per image task; workflow id = task id. It owns the state machine
// accepted → queued → running → succeeded | failed | uncertain and records every transition
// through the worker (never Redis from here). History of a successful task: 12 events (README,
// "How it works"): `queued` goes through a sink and `succeeded` is written by the upstream
// activity itself, so the only commands are the activity, the KilnStatus upsert and completion.
import {
  defineQuery,
  proxyActivities,
  proxyLocalActivities,
  proxySinks,
  setHandler,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { Activities } from '../activities/image/index.js';
import type { ReadModelSinks } from '../activities/read-model.js';
import { IMAGE_CALL } from '../src/shared/upstream.js';
import { LOCAL_ACTIVITY, upstreamActivity } from './activity-policy.js';
import { classify, lostAfterSending } from './task-outcome.js';
import {
  newImageRecord,
  SEARCH_ATTRIBUTES,
  type ActivityPolicy,
  type ImageTaskInput,
  type TaskRecord,
} from '../src/shared/task.js';

export const getTaskQuery = defineQuery<TaskRecord>('getTask');

export interface ImageTaskWorkflowInput {
  task: ImageTaskInput;
  policy: ActivityPolicy;
  /** The model's activity task queue: upstream concurrency and rate are set per queue. */
  activityQueue: string;
}

const { recordTransition, recordOutcome, mayHaveReachedUpstream } = proxyLocalActivities<Activities>(LOCAL_ACTIVITY);
const { readModel } = proxySinks<ReadModelSinks>();

export async function imageTaskWorkflow({ task, policy, activityQueue }: ImageTaskWorkflowInput): Promise<TaskRecord> {
  let record: TaskRecord = newImageRecord(task, 'queued');
  setHandler(getTaskQuery, () => record);
  // Written by the worker before this workflow task completes, so before the upstream activity can
  // start; no marker in history (see activities/read-model.ts).
  readModel.queued(record);

  const { generateImage } = proxyActivities<Activities>(upstreamActivity(policy, activityQueue));

  const finished = (): Pick<TaskRecord, 'finished_at'> => ({ finished_at: Math.floor(Date.now() / 1000) });
  try {
    // The activity records `running`, then `succeeded` with its image: the read model has it
    // before the answer reaches this workflow.
    const done = await generateImage(task);
    record = done.record;
    if (!done.recorded) await recordTransition(record); // Redis failed the activity's write
  } catch (err) {
    const outcome = (await lostAfterSending(err, IMAGE_CALL, () => mayHaveReachedUpstream(task))) ?? classify(err);
    const ended: TaskRecord =
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
    record = (await recordOutcome(ended)).record;
  }
  upsertSearchAttributes({ [SEARCH_ATTRIBUTES.status]: [record.status] });
  return record;
}
