// Starting a task's workflow, shared by image and video submits: claim a place among unfinished
// tasks (queue_full), start the workflow with the owner/model/status search attributes, and give
// the place back if Temporal did not take the task.
import type { Client } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Config } from '../config.js';
import { KilnError } from '../shared/errors.js';
import type { TaskStore } from '../infra/store.js';
import { SA } from './search-attributes.js';

export interface StartTask {
  id: string;
  workflowType: 'imageTaskWorkflow' | 'videoTaskWorkflow';
  input: unknown;
  owner: string;
  model: string;
  summary: string;
  memo?: Record<string, unknown>;
}

export async function startTask(deps: { config: Config; store: TaskStore; temporal: Client }, t: StartTask): Promise<void> {
  const { config, store, temporal } = deps;
  const reserved = await store.reserve(t.id, config.maxUnfinishedTasks).catch(() => {
    throw new KilnError('service_unavailable', 'Task storage is unavailable for a moment; retry shortly.', 1);
  });
  if (!reserved) throw new KilnError('queue_full', 'The task queue is full; retry the submission later.', config.pollAfterSeconds);
  try {
    await temporal.workflow.start(t.workflowType, {
      workflowId: t.id,
      taskQueue: config.temporal.taskQueue,
      args: [t.input],
      typedSearchAttributes: [
        { key: SA.owner, value: t.owner },
        { key: SA.model, value: t.model },
        { key: SA.status, value: 'accepted' },
      ],
      ...(t.memo ? { memo: t.memo } : {}),
      staticSummary: t.summary,
    });
  } catch (err) {
    await store.release(t.id).catch(() => undefined);
    if (err instanceof WorkflowExecutionAlreadyStartedError) throw err;
    throw new KilnError('service_unavailable', 'The task could not be queued right now; retry the submission.', config.pollAfterSeconds);
  }
}
