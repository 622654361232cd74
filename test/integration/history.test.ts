// The Temporal history of one successful image task stays small: every event is stored by the
// Temporal cluster and replayed by a worker that picks the workflow up.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import proto from '@temporalio/proto';
import { startKiln, imageSteps, type Kiln } from '../support/kiln.js';

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
 * The history of a successful image task, event by event. The floor for a workflow that runs one
 * activity on another task queue is 11 (started, a workflow task, the activity's three events, a
 * second workflow task, completed); the KilnStatus upsert is the twelfth. `queued` is written by a
 * sink and `succeeded` by the activity, so neither costs a marker (README, "How it works").
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
  'UPSERT_WORKFLOW_SEARCH_ATTRIBUTES',
  'WORKFLOW_EXECUTION_COMPLETED',
];

describe('workflow history', () => {
  it(`a successful task takes ${SUCCESSFUL_TASK.length} history events, no marker, two workflow tasks`, async () => {
    const { submit, finish } = imageSteps(() => kiln.baseUrl);
    const id = await submit('kiln-image-1');
    expect((await finish(id)).status).toBe('succeeded');

    const handle = kiln.api.client.workflow.getHandle(id);
    const result = await handle.result();
    const { events } = await handle.fetchHistory();
    const types = (events ?? []).map((e) => String(EventType[e.eventType ?? 0]).replace(/^EVENT_TYPE_/, ''));
    console.log(
      `history of one successful image ` +
        `task: ${types.length} events\n${types.map((t, i) => `  ${i + 1}. ${t}`).join('\n')}`,
    );

    expect(types).toEqual(SUCCESSFUL_TASK);
    expect(types.length).toBeLessThanOrEqual(12);
    // The activity recorded `succeeded`: the read model holds exactly what the workflow returned,
    // and KilnStatus tells the outcome.
    expect(await kiln.api.store.get(id)).toEqual(result);
    expect((await handle.describe()).searchAttributes.KilnStatus).toEqual(['succeeded']);
  });
});
