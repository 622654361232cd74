// The Temporal history of one successful image task stays small: every event is stored by the
// Temporal cluster and replayed by a worker that picks the workflow up.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import proto from '@temporalio/proto';
import { startKiln, http, submitBody, waitForStatus, KEY_A, type Kiln } from '../support/kiln.js';

let kiln: Kiln;
beforeAll(async () => {
  kiln = await startKiln({ models: [{ id: 'kiln-image-1', provider: 'local', latencyMs: 200, idempotent: true }] });
});
afterAll(async () => {
  await kiln?.stop();
});

// CommonJS package: read its namespace from the default export.
const EventType = proto.temporal.api.enums.v1.EventType;

describe('workflow history', () => {
  it('a successful task takes at most 20 history events', async () => {
    const api = http(kiln.baseUrl, KEY_A);
    const sub = await api('/v1beta/models/kiln-image-1:generateContent', { method: 'POST', json: submitBody() });
    expect(sub.status).toBe(202);
    const id: string = sub.json.id;
    const done = await waitForStatus(
      () => api(`/v1/tasks/${id}`),
      (s) => s === 'succeeded' || s === 'failed' || s === 'uncertain',
    );
    expect(done.status).toBe('succeeded');

    const handle = kiln.api.client.workflow.getHandle(id);
    await handle.result(); // the read model is written just before the workflow completes
    const { events } = await handle.fetchHistory();
    const types = (events ?? []).map((e) => String(EventType[e.eventType ?? 0]).replace(/^EVENT_TYPE_/, ''));
    console.log(
      `history of one successful image task: ${types.length} events\n${types.map((t, i) => `  ${i + 1}. ${t}`).join('\n')}`,
    );

    expect(types[0]).toBe('WORKFLOW_EXECUTION_STARTED');
    expect(types.at(-1)).toBe('WORKFLOW_EXECUTION_COMPLETED');
    expect(types.filter((t) => t === 'ACTIVITY_TASK_SCHEDULED')).toHaveLength(1);
    expect(types.length).toBeLessThanOrEqual(20);
  });
});
