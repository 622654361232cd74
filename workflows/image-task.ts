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
import { TASK_FAILURE_CODES, UNCERTAIN_FAILURE_TYPE } from '../src/shared/errors.js';
import { classify, endedByActivity, lastAttemptReason } from './task-outcome.js';
import { SEARCH_ATTRIBUTES, type ActivityPolicy, type ImageTaskInput, type TaskRecord } from '../src/shared/task.js';

export const getTaskQuery = defineQuery<TaskRecord>('getTask');

export interface ImageTaskWorkflowInput {
  task: ImageTaskInput;
  policy: ActivityPolicy;
  /** The model's activity task queue: upstream concurrency and rate are set per queue. */
  activityQueue: string;
}

const { recordTransition, mayHaveReachedUpstream } = proxyLocalActivities<Activities>({
  startToCloseTimeout: '10s',
  // The read model must catch up even through a long Redis outage: retry without a limit.
  retry: { initialInterval: '200ms', backoffCoefficient: 2, maximumInterval: '30s' },
});

export async function imageTaskWorkflow({ task, policy, activityQueue }: ImageTaskWorkflowInput): Promise<TaskRecord> {
  let record: TaskRecord = {
    id: task.id, kind: 'image', owner: task.owner, model: task.model, status: 'queued',
    created_at: task.created_at, finished_at: null, candidates: null, error: null,
  };
  setHandler(getTaskQuery, () => record);
  await recordTransition(record);

  const { generateImage } = proxyActivities<Activities>({
    taskQueue: activityQueue,
    // The provider aborts at timeoutMs itself; this bound only catches a worker that vanished.
    startToCloseTimeout: policy.timeoutMs + 15_000,
    heartbeatTimeout: policy.heartbeatTimeoutMs,
    retry: {
      initialInterval: '1s',
      backoffCoefficient: 2,
      maximumAttempts: policy.maxAttempts,
      nonRetryableErrorTypes: [...TASK_FAILURE_CODES, UNCERTAIN_FAILURE_TYPE],
    },
  });

  const finished = (): Pick<TaskRecord, 'finished_at'> => ({ finished_at: Math.floor(Date.now() / 1000) });
  try {
    const result = await generateImage(task);
    record = { ...record, ...finished(), status: 'succeeded', ...result, error: null };
  } catch (err) {
    let outcome = classify(err);
    // No attempt gave an answer of its own (the last one died with its worker, or retries ran out):
    // if the request may have reached a non-idempotent upstream, the result cannot be confirmed.
    if (!endedByActivity(err) && await mayHaveReachedUpstream(task)) {
      outcome = { status: 'uncertain', error: { code: 'uncertain', message: `The request may have reached the upstream generator, but its last attempt ended without an answer (${lastAttemptReason(err)}); it is not resent because the upstream is not idempotent.` } };
    }
    record = outcome.status === 'uncertain'
      ? { ...record, ...finished(), status: 'uncertain', candidates: null, error: null, uncertain_reason: outcome.error.message }
      : { ...record, ...finished(), status: 'failed', candidates: null, error: outcome.error };
  }
  upsertSearchAttributes({ [SEARCH_ATTRIBUTES.status]: [record.status] });
  await recordTransition(record);
  return record;
}
