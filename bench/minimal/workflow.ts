// The bench's baseline workflow (bench/minimal/worker.ts bundles it; the production bundle never
// sees it): one activity on its own task queue, then return. Nothing else a task could cost less.
import { proxyActivities } from '@temporalio/workflow';
import type { minimalActivities } from './worker.js';

export async function minimalBaselineWorkflow(activityQueue: string): Promise<string> {
  const { noop } = proxyActivities<typeof minimalActivities>({ taskQueue: activityQueue, startToCloseTimeout: '1m' });
  return noop();
}
