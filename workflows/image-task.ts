// One workflow per image task; workflow id = task id. It owns the state machine
// accepted → queued → running → succeeded | failed | uncertain and records every transition
// through activities (never Redis from here).
import {
  defineQuery,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { Activities } from '../activities/image/index.js';
import { IMAGE_CALL } from '../src/shared/upstream.js';
import { LOCAL_ACTIVITY, upstreamActivity } from './activity-policy.js';
import { classify, lostAfterSending } from './task-outcome.js';
import { SEARCH_ATTRIBUTES, type ActivityPolicy, type ImageTaskInput, type TaskRecord } from '../src/shared/task.js';

export const getTaskQuery = defineQuery<TaskRecord>('getTask');

export interface ImageTaskWorkflowInput {
  task: ImageTaskInput;
  policy: ActivityPolicy;
  /** The model's activity task queue: upstream concurrency and rate are set per queue. */
  activityQueue: string;
}

const { recordTransition, mayHaveReachedUpstream } = proxyLocalActivities<Activities>(LOCAL_ACTIVITY);

export async function imageTaskWorkflow({ task, policy, activityQueue }: ImageTaskWorkflowInput): Promise<TaskRecord> {
  let record: TaskRecord = {
    id: task.id,
    kind: 'image',
    owner: task.owner,
    model: task.model,
    status: 'queued',
    created_at: task.created_at,
    finished_at: null,
    candidates: null,
    error: null,
  };
  setHandler(getTaskQuery, () => record);
  await recordTransition(record);

  const { generateImage } = proxyActivities<Activities>(upstreamActivity(policy, activityQueue));

  const finished = (): Pick<TaskRecord, 'finished_at'> => ({ finished_at: Math.floor(Date.now() / 1000) });
  try {
    const result = await generateImage(task);
    record = { ...record, ...finished(), status: 'succeeded', ...result, error: null };
  } catch (err) {
    const outcome = (await lostAfterSending(err, IMAGE_CALL, () => mayHaveReachedUpstream(task))) ?? classify(err);
    record =
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
  }
  upsertSearchAttributes({ [SEARCH_ATTRIBUTES.status]: [record.status] });
  await recordTransition(record);
  return record;
}
