// Starting a task's workflow, shared by image and video submits: claim a place among unfinished
// tasks (queue_full), start the workflow with the owner/model/status search attributes, and give
// the place back if Temporal did not take the task.
import type { Client } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Config } from '../config.js';
import { KilnError } from '../shared/errors.js';
import type { TaskStore } from '../infra/store.js';
import { SA } from './search-attributes.js';
// Types only: the API process never loads workflow code, yet a wrong input fails type checking.
import type { imageTaskWorkflow } from '../../workflows/image-task.js';
import type { videoTaskWorkflow } from '../../workflows/video-task.js';

interface TaskWorkflows {
  imageTaskWorkflow: typeof imageTaskWorkflow;
  videoTaskWorkflow: typeof videoTaskWorkflow;
}

/** One workflow type with the input its function takes. */
type WorkflowStart = {
  [K in keyof TaskWorkflows]: { workflowType: K; input: Parameters<TaskWorkflows[K]>[0] };
}[keyof TaskWorkflows];

export type StartTask = WorkflowStart & {
  id: string;
  owner: string;
  model: string;
  summary: string;
  memo?: Record<string, unknown>;
};

export async function startTask(
  deps: { config: Config; store: TaskStore; temporal: Client },
  t: StartTask,
): Promise<void> {
  const { config, store, temporal } = deps;
  const reserved = await store.reserve(t.id, config.maxUnfinishedTasks).catch(() => {
    throw new KilnError('service_unavailable', 'Task storage is unavailable for a moment; retry shortly.', 1);
  });
  if (!reserved)
    throw new KilnError('queue_full', 'The task queue is full; retry the submission later.', config.pollAfterSeconds);
  const options = {
    workflowId: t.id,
    taskQueue: config.temporal.taskQueue,
    typedSearchAttributes: [
      { key: SA.owner, value: t.owner },
      { key: SA.model, value: t.model },
      { key: SA.status, value: 'accepted' },
    ],
    ...(t.memo ? { memo: t.memo } : {}),
    staticSummary: t.summary,
  };
  try {
    // One call per type, so each is checked against its own function's parameters.
    if (t.workflowType === 'imageTaskWorkflow')
      await temporal.workflow.start<typeof imageTaskWorkflow>(t.workflowType, { ...options, args: [t.input] });
    else await temporal.workflow.start<typeof videoTaskWorkflow>(t.workflowType, { ...options, args: [t.input] });
  } catch (err) {
    await store.release(t.id).catch(() => undefined);
    if (err instanceof WorkflowExecutionAlreadyStartedError) throw err;
    throw new KilnError(
      'service_unavailable',
      'The task could not be queued right now; retry the submission.',
      config.pollAfterSeconds,
    );
  }
}
