// The bench's baseline workflow (bench/minimal/worker.ts bundles it; the production bundle never
// sees it): one activity on its own task queue, then return. Nothing else a task could cost less.
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { minimalActivities } from './worker.js';

export async function minimalBaselineWorkflow(activityQueue: string): Promise<string> {
  const { noop } = proxyActivities<typeof minimalActivities>({ taskQueue: activityQueue, startToCloseTimeout: '1m' });
  return noop();
}

/** The same activity run as a local activity: no activity task, its result a marker in history. */
export async function minimalLocalWorkflow(): Promise<string> {
  const { noop } = proxyLocalActivities<typeof minimalActivities>({ startToCloseTimeout: '1m' });
  return noop();
}
