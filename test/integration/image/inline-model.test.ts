// Inline image models: the upstream call as a local activity in the workflow's own workflow task
// (6 history events), on real Temporal and Redis with a fake Gemini upstream (a real HTTP server).
// The guarantees stay those of the activity shape: a dead worker's call is never resent to a
// non-idempotent upstream, an idempotent one is retried, and per-model concurrency holds.
import type { ChildProcess } from 'node:child_process';
import proto from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { dataConverter } from '../../../src/temporal/client.js';
import {
  delayed,
  fail,
  fakeGeminiModel,
  ok,
  startFakeGemini,
  type FakeGemini,
} from '../providers/gemini/fake-gemini.js';
import { http, imageSteps, KEY_A, startKiln, TERMINAL, waitForStatus, type Kiln } from '../../support/kiln.js';
import { killChild, workerChild } from '../../support/worker-child.js';

// CommonJS package: read its namespace from the default export.
const EventType = proto.temporal.api.enums.v1.EventType;

let fake: FakeGemini;
let kiln: Kiln;
const children: ChildProcess[] = [];

const models = () => {
  const inline = (id: string, over: Record<string, unknown>) =>
    fakeGeminiModel(fake, { id, inline: true, timeoutMs: 1000, maxAttempts: 3, ...over });
  return [
    { id: 'fast-local', provider: 'local', latencyMs: 50, idempotent: true, inline: true, timeoutMs: 1000 },
    inline('in-once', { idempotent: false }),
    inline('in-idem', { idempotent: true }),
    inline('in-one-slot', { idempotent: true, concurrency: 1 }),
  ];
};

beforeAll(async () => {
  fake = await startFakeGemini();
  kiln = await startKiln({ models: models() });
});
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await kiln?.stop();
  await fake?.close();
});
beforeEach(() => fake.reset());

const steps = imageSteps(() => kiln.baseUrl);

/** The history once the workflow has completed (Redis shows `succeeded` before the marker is written). */
async function historyOf(k: Kiln, id: string) {
  const handle = k.api.client.workflow.getHandle(id);
  await handle.result();
  const history = await handle.fetchHistory();
  const types = (history.events ?? []).map((e) => String(EventType[e.eventType ?? 0]).replace(/^EVENT_TYPE_/, ''));
  return { history, types };
}

describe('inline image model', () => {
  it('takes 6 history events and one workflow task for a successful task, and replays', async () => {
    const id = await steps.submit('fast-local');
    const task = await steps.finish(id);
    expect(task.status).toBe('succeeded');
    expect(task.attempts).toBe(1);
    const handle = kiln.api.client.workflow.getHandle(id);
    const result = await handle.result();
    const { history, types } = await historyOf(kiln, id);
    expect(types).toEqual([
      'WORKFLOW_EXECUTION_STARTED',
      'WORKFLOW_TASK_SCHEDULED',
      'WORKFLOW_TASK_STARTED',
      'WORKFLOW_TASK_COMPLETED',
      'MARKER_RECORDED',
      'WORKFLOW_EXECUTION_COMPLETED',
    ]);
    // The call recorded `succeeded` itself: Redis holds exactly what the workflow returned.
    expect(await kiln.api.store.get(id)).toEqual(result);
    await Worker.runReplayHistory(
      { workflowBundle: { codePath: inject('workflowBundle') }, dataConverter: dataConverter(kiln.config) },
      history,
      id,
    );
  });

  it("retries an idempotent upstream's 503 after a durable timer, and the record counts both attempts", async () => {
    fake.enqueue(fail(503, 'overloaded'));
    const id = await steps.submit('in-idem');
    const task = await steps.finish(id);
    expect(task.status).toBe('succeeded');
    expect(task.attempts).toBe(2);
    expect(fake.requests).toHaveLength(2);
    expect(fake.requests.map((r) => r.headers['idempotency-key'])).toEqual([id, id]);
    const { types } = await historyOf(kiln, id);
    console.log(`history of an inline task retried once: ${types.join(', ')}`);
    expect(types.filter((t) => t.startsWith('ACTIVITY_'))).toEqual([]);
    // The backoff (1 s) is a timer, so the workflow task ended while the task waited to retry.
    expect(types.filter((t) => t.startsWith('TIMER_'))).toEqual(['TIMER_STARTED', 'TIMER_FIRED']);
    expect(types.at(-2)).toBe('MARKER_RECORDED');
  });

  it('cancels a task waiting to send its refused call again at once; the refusal left nothing upstream', async () => {
    fake.setDefault(fail(503, 'overloaded'));
    const id = await steps.submit('in-idem');
    // The wait before sending again (0.5–1 s) is a workflow timer: cancel once it has started.
    const handle = kiln.api.client.workflow.getHandle(id);
    const types = async () =>
      ((await handle.fetchHistory()).events ?? []).map((e) => String(EventType[e.eventType ?? 0]));
    for (let t = Date.now(); !(await types()).includes('EVENT_TYPE_TIMER_STARTED');) {
      expect(Date.now() - t, 'the retry timer never started').toBeLessThan(30_000);
      await new Promise((r) => setTimeout(r, 20));
    }
    const answer = await http(kiln.baseUrl, KEY_A)(`/v1/tasks/${id}/cancel`, { method: 'POST' });
    expect(answer.status).toBe(202);
    const task = await steps.finish(id);
    expect(task).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    // A 503 is a refusal before processing: nothing is billed, whatever the channel's idempotency.
    expect(task.error.message).not.toMatch(/may have reached|may still be billed/);
    // The cancel ended the wait: the timer was canceled, not fired, so the retry was never sent.
    await handle.result().catch(() => undefined);
    const timers = (await types()).filter((t) => t.startsWith('EVENT_TYPE_TIMER_'));
    expect(timers).toEqual(['EVENT_TYPE_TIMER_STARTED', 'EVENT_TYPE_TIMER_CANCELED']);
    expect(fake.requests).toHaveLength(1);
  });

  it("never resends a non-idempotent upstream's 5xx (upstream_error at once)", async () => {
    fake.enqueue(fail(500, 'boom'));
    const id = await steps.submit('in-once');
    const task = await steps.finish(id);
    expect(task).toMatchObject({ status: 'failed', error: { code: 'upstream_error' } });
    expect(fake.requests).toHaveLength(1);
  });

  it("queues a call on the model's activity queue when its slots are taken, never more at once than `concurrency`", async () => {
    fake.setDefault(delayed(600, ok()));
    const [a, b, c] = await Promise.all([1, 2, 3].map(() => steps.submit('in-one-slot')));
    for (const id of [a, b, c]) expect((await steps.finish(id)).status).toBe('succeeded');
    expect(fake.requests).toHaveLength(3);
    // One slot: each request arrived once the one before had its answer (600 ms later).
    const at = fake.requests.map((r) => r.at).sort((x, y) => x - y);
    expect(at[1] - at[0]).toBeGreaterThanOrEqual(550);
    expect(at[2] - at[1]).toBeGreaterThanOrEqual(550);
    // At least one task ran inline and at least one waited on the queue (an activity in history).
    const shapes = await Promise.all([a, b, c].map(async (id) => (await historyOf(kiln, id)).types));
    expect(shapes.filter((t) => t.length === 6)).not.toHaveLength(0);
    expect(shapes.filter((t) => t.includes('ACTIVITY_TASK_COMPLETED'))).not.toHaveLength(0);
  });

  it('cancels a task waiting for a slot before its upstream is called; a running call keeps its answer', async () => {
    fake.setDefault(delayed(900, ok()));
    const first = await steps.submit('in-one-slot');
    await fake.nextRequest();
    const second = await steps.submit('in-one-slot');
    await steps.until(second, 'queued');
    const api = http(kiln.baseUrl, KEY_A);
    const [firstCancel, secondCancel] = await Promise.all([
      api(`/v1/tasks/${first}/cancel`, { method: 'POST' }),
      api(`/v1/tasks/${second}/cancel`, { method: 'POST' }),
    ]);
    expect([firstCancel.status, secondCancel.status]).not.toContain(500);
    const waited = await steps.finish(second);
    expect(waited).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    expect(waited.error.message).toContain('never called');
    // The running call (under a second) could not be stopped: its answer is the task's outcome,
    // the same in Redis and in the workflow's result.
    const ran = await steps.finish(first);
    expect(ran.status).toBe('succeeded');
    expect(await kiln.api.client.workflow.getHandle(first).result()).toEqual(await kiln.api.store.get(first));
    expect(fake.requests).toHaveLength(1);
  });
});

describe('inline image model, worker stopped or killed mid-call', () => {
  it('a worker stopped mid-call (a deploy) lets its inline calls finish: no request is lost or sent twice', async () => {
    fake.setDefault(delayed(900, ok()));
    const once = await steps.submit('in-once');
    const idem = await steps.submit('in-idem');
    await fake.waitForRequests(2);
    // startKiln's workers have no shutdown grace: the activity shape's call would be cut off here.
    await kiln.stopWorker();
    await kiln.startWorker();
    const [onceEnd, idemEnd] = [await steps.finish(once), await steps.finish(idem)];
    expect(onceEnd.status).toBe('succeeded');
    expect(idemEnd.status).toBe('succeeded');
    expect(fake.requests).toHaveLength(2);
    for (const id of [once, idem])
      expect(await kiln.api.client.workflow.getHandle(id).result()).toEqual(await kiln.api.store.get(id));
  }, 60_000);

  it('ends a non-idempotent task uncertain with one request, and retries an idempotent one to success', async () => {
    const k = await startKiln({ models: models(), workers: false });
    try {
      const first = await workerChild(k.env, (c) => children.push(c));
      fake.setDefault(delayed(900, ok()));
      const once = await imageSteps(() => k.baseUrl).submit('in-once');
      const idem = await imageSteps(() => k.baseUrl).submit('in-idem');
      await fake.waitForRequests(2);
      await killChild(first);
      await workerChild(k.env, (c) => children.push(c));
      // The workflow task of the dead worker times out (10 s), then the new worker replays it.
      const api = http(k.baseUrl, KEY_A);
      const onceEnd = await waitForStatus(() => api(`/v1/tasks/${once}`), TERMINAL, 45_000);
      const idemEnd = await waitForStatus(() => api(`/v1/tasks/${idem}`), TERMINAL, 45_000);
      expect(onceEnd.status).toBe('uncertain');
      expect(onceEnd.uncertain_reason).toContain('it is not resent because the upstream is not idempotent');
      expect(idemEnd.status).toBe('succeeded');
      expect(idemEnd.attempts).toBe(2);
      // Only the idempotent model sends an Idempotency-Key (its task id): one request without
      // one is the non-idempotent task's only request.
      expect(fake.requests.filter((r) => r.headers['idempotency-key'] === idem)).toHaveLength(2);
      expect(fake.requests.filter((r) => r.headers['idempotency-key'] === undefined)).toHaveLength(1);
    } finally {
      await k.stop();
    }
  }, 90_000);
});
