// TEMPORAL_UPSTREAM_QUEUE=workflow: upstream calls on the workflow's own task queue (what eager
// activity execution needs), image and video; tasks started on a model's queue before the switch
// still finish; a cancel still reaches a running call. TEMPORAL_EAGER_START: the API refuses it.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import proto from '@temporalio/proto';
import { loadConfig } from '../../../src/config/env.js';
import { modelTaskQueue } from '../../../src/config/models.js';
import { createApi } from '../../../src/api/runtime.js';
import type { ImageTaskWorkflowInput } from '../../../workflows/image-task.js';
import { http, imageSteps, silent, startKiln, type Kiln } from '../../support/kiln.js';
import { videoApi } from '../video/video-kiln.js';
import { watchQueue } from '../../../src/shared/upstream-job.js';

let kiln: Kiln;
beforeAll(async () => {
  kiln = await startKiln({
    env: { TEMPORAL_UPSTREAM_QUEUE: 'workflow' },
    models: [
      { id: 'img', provider: 'local', latencyMs: 0, idempotent: true },
      { id: 'img-slow', provider: 'local', latencyMs: 20_000, idempotent: true, heartbeatTimeoutMs: 2000 },
      {
        id: 'vid',
        kind: 'video',
        provider: 'local',
        latencyMs: 0,
        idempotent: true,
        pollIntervalMs: 100,
        timeoutMs: 30_000,
      },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
});

const EventType = proto.temporal.api.enums.v1.EventType;
/** The task queue of each activity the workflow scheduled. */
async function activityQueues(id: string): Promise<string[]> {
  const { events } = await kiln.api.client.workflow.getHandle(id).fetchHistory();
  return (events ?? [])
    .filter((e) => e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
    .map((e) => e.activityTaskScheduledEventAttributes?.taskQueue?.name ?? '');
}

describe('TEMPORAL_UPSTREAM_QUEUE=workflow', () => {
  it("an image task's upstream call runs on the workflow's queue", async () => {
    const { submit, finish } = imageSteps(() => kiln.baseUrl);
    const id = await submit('img');
    expect((await finish(id)).status).toBe('succeeded');
    expect(await activityQueues(id)).toEqual([kiln.config.temporal.taskQueue]);
  });

  it("a video task's calls run on the workflow's queue", async () => {
    const calls = videoApi(kiln);
    const id = await calls.createOk({ model: 'vid', prompt: 'a fox' });
    expect((await calls.finish(id)).status).toBe('completed');
    const queues = await activityQueues(id);
    expect(queues.length).toBeGreaterThan(0);
    // The calls run on the workflow's queue; the job's watch on its own in either mode, as it holds
    // its slot while the job runs.
    const q = kiln.config.temporal.taskQueue;
    expect(new Set(queues)).toEqual(new Set([q, watchQueue(q)]));
  });

  it("a task started on the model's queue (before the switch) still finishes there", async () => {
    const id = `task_${randomBytes(16).toString('hex')}`;
    const input: ImageTaskWorkflowInput = {
      task: {
        id,
        owner: 'before-the-switch',
        model: 'img',
        created_at: Math.floor(Date.now() / 1000),
        request: { contents: [{ parts: [{ text: 'p' }] }] },
      },
      policy: { timeoutMs: 30_000, heartbeatTimeoutMs: 10_000, maxAttempts: 3 },
      activityQueue: modelTaskQueue(kiln.config.temporal.taskQueue, 'img'),
    };
    const handle = await kiln.api.client.workflow.start('imageTaskWorkflow', {
      workflowId: id,
      taskQueue: kiln.config.temporal.taskQueue,
      args: [input],
    });
    expect(((await handle.result()) as { status: string }).status).toBe('succeeded');
    expect(await activityQueues(id)).toEqual([modelTaskQueue(kiln.config.temporal.taskQueue, 'img')]);
  });

  it('a cancel reaches a running call on the shared queue', async () => {
    const { submit, until, finish } = imageSteps(() => kiln.baseUrl);
    const id = await submit('img-slow');
    await until(id, 'running');
    const t0 = Date.now();
    expect((await http(kiln.baseUrl)(`/v1/tasks/${id}/cancel`, { method: 'POST' })).status).toBeLessThan(300);
    const done = await finish(id);
    expect(done).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    expect(Date.now() - t0).toBeLessThan(10_000);
  });
});

describe('TEMPORAL_EAGER_START', () => {
  it('the API refuses it: it runs no workflow worker to take the first workflow task', async () => {
    const config = loadConfig({ ...kiln.env, TEMPORAL_EAGER_START: '1' });
    await expect(createApi(config, silent)).rejects.toThrow(/TEMPORAL_EAGER_START=1 needs a workflow worker/);
  });
});
