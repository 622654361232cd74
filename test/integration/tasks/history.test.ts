// The Temporal history of one successful image task stays small: every event is stored by the
// Temporal cluster and replayed by a worker that picks the workflow up.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import proto from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { modelTaskQueue } from '../../../src/config/models.js';
import { SA } from '../../../src/temporal/search-attributes.js';
import { dataConverter } from '../../../src/temporal/client.js';
import type { ImageTaskWorkflowInput } from '../../../workflows/image-task.js';
import { startKiln, imageSteps, type Kiln } from '../../support/kiln.js';

let kiln: Kiln;
beforeAll(async () => {
  kiln = await startKiln({ models: [{ id: 'kiln-image-1', provider: 'local', latencyMs: 200, idempotent: true }] });
});
afterAll(async () => {
  await kiln?.stop();
});

// CommonJS package: read its namespace from the default export.
const EventType = proto.temporal.api.enums.v1.EventType;

/**
 * The history of a successful image task, event by event: the floor for a workflow that runs one
 * activity on another task queue (started, a workflow task, the activity's three events, a second
 * workflow task, completed). `queued` is written by a sink and `succeeded` by the activity, so
 * neither costs a marker, and a success leaves KilnStatus unset (docs/architecture.md, "History").
 */
const SUCCESSFUL_TASK = [
  'WORKFLOW_EXECUTION_STARTED',
  'WORKFLOW_TASK_SCHEDULED',
  'WORKFLOW_TASK_STARTED',
  'WORKFLOW_TASK_COMPLETED',
  'ACTIVITY_TASK_SCHEDULED',
  'ACTIVITY_TASK_STARTED',
  'ACTIVITY_TASK_COMPLETED',
  'WORKFLOW_TASK_SCHEDULED',
  'WORKFLOW_TASK_STARTED',
  'WORKFLOW_TASK_COMPLETED',
  'WORKFLOW_EXECUTION_COMPLETED',
];

const typesOf = (events: proto.temporal.api.history.v1.IHistoryEvent[] | null | undefined) =>
  (events ?? []).map((e) => String(EventType[e.eventType ?? 0]).replace(/^EVENT_TYPE_/, ''));

describe('workflow history', () => {
  it(`a successful task takes ${SUCCESSFUL_TASK.length} history events, no marker, two workflow tasks`, async () => {
    const { submit, finish } = imageSteps(() => kiln.baseUrl);
    const id = await submit('kiln-image-1');
    expect((await finish(id)).status).toBe('succeeded');

    const handle = kiln.api.client.workflow.getHandle(id);
    const result = await handle.result();
    const types = typesOf((await handle.fetchHistory()).events);
    console.log(
      `history of one successful image ` +
        `task: ${types.length} events\n${types.map((t, i) => `  ${i + 1}. ${t}`).join('\n')}`,
    );

    expect(types).toEqual(SUCCESSFUL_TASK);
    expect(types.length).toBeLessThanOrEqual(11);
    // The activity recorded `succeeded`: the read model holds exactly what the workflow returned.
    // The workflow completed and KilnStatus is unset: that is how operators find successes.
    expect(await kiln.api.store.get(id)).toEqual(result);
    const described = await handle.describe();
    expect(described.status.name).toBe('COMPLETED');
    expect(described.typedSearchAttributes.get(SA.status)).toBeUndefined();
  });

  it("a task an older release started (KilnStatus `accepted` at start) keeps that release's upsert and replays", async () => {
    const { client } = kiln.api;
    const config = kiln.config;
    const id = `task_${randomBytes(16).toString('hex')}`;
    const input: ImageTaskWorkflowInput = {
      task: {
        id,
        owner: 'previous-release',
        model: 'kiln-image-1',
        created_at: Math.floor(Date.now() / 1000),
        request: { contents: [{ parts: [{ text: 'p' }] }] },
      },
      policy: { timeoutMs: 30_000, heartbeatTimeoutMs: 10_000, maxAttempts: 3 },
      activityQueue: modelTaskQueue(config.temporal.taskQueue, 'kiln-image-1'),
    };
    // What an older release's API starts: KilnStatus `accepted` among the search attributes.
    const handle = await client.workflow.start('imageTaskWorkflow', {
      workflowId: id,
      taskQueue: config.temporal.taskQueue,
      args: [input],
      typedSearchAttributes: [
        { key: SA.owner, value: 'previous-release' },
        { key: SA.model, value: 'kiln-image-1' },
        { key: SA.status, value: 'accepted' },
      ],
    });
    expect(((await handle.result()) as { status: string }).status).toBe('succeeded');
    const history = await handle.fetchHistory();
    expect(typesOf(history.events)).toEqual([
      ...SUCCESSFUL_TASK.slice(0, -1),
      'UPSERT_WORKFLOW_SEARCH_ATTRIBUTES',
      'WORKFLOW_EXECUTION_COMPLETED',
    ]);
    expect((await handle.describe()).typedSearchAttributes.get(SA.status)).toBe('succeeded');
    // Both shapes replay on this release's workflow code without a nondeterminism error.
    const fresh = await imageSteps(() => kiln.baseUrl).submit('kiln-image-1');
    await client.workflow.getHandle(fresh).result();
    for (const [workflowId, h] of [
      [id, history],
      [fresh, await client.workflow.getHandle(fresh).fetchHistory()],
    ] as const)
      await Worker.runReplayHistory(
        { workflowBundle: { codePath: inject('workflowBundle') }, dataConverter: dataConverter(config) },
        h,
        workflowId,
      );
  });
});
