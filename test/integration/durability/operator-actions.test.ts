// Operator actions in the Temporal Web UI or CLI on real Temporal and Redis: terminate, a run that
// times out, and cancel. No workflow code runs on a terminate or a time-out; reconciliation (in the
// worker) gives the task its truthful end: `uncertain` when a non-idempotent upstream may have the
// request, else failed / canceled naming the operator's action and reason. A cancel says whose it was.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { binary } from '../../../scripts/services.js';
import { ownerOfKey } from '../../../src/infra/callers.js';
import { modelTaskQueue } from '../../../src/config/models.js';
import { newImageRecord } from '../../../src/shared/image-task.js';
import { delayed, ok, startFakeGemini, fakeGeminiModel, type FakeGemini } from '../providers/gemini/fake-gemini.js';
import { http, KEY_A, startKiln, submitBody, waitForStatus, TERMINAL, type Kiln } from '../../support/kiln.js';
import { RECEIVER_HOST, startReceiver, webhookEnv, type Receiver } from '../webhooks/webhook-receiver.js';

const run = promisify(execFile);
const temporalCli = (...args: string[]) =>
  run(binary('temporal', 'TEMPORAL_BIN'), [...args, '--address', inject('temporalAddress')]);

let kiln: Kiln;
let gemini: FakeGemini;
let receiver: Receiver;
const api = () => http(kiln.baseUrl, KEY_A);

async function submit(model: string, prompt: string, query = ''): Promise<string> {
  const res = await api()(`/v1beta/models/${model}:generateContent${query}`, {
    method: 'POST',
    json: submitBody(prompt),
  });
  expect(res.status, res.text).toBe(202);
  return res.json.id;
}

/** The task's end as its owner sees it, and how long after `t0` it showed. */
async function endOf(id: string, t0: number) {
  const task = await waitForStatus(() => api()(`/v1/tasks/${id}`), TERMINAL, 60_000);
  return { task, afterMs: Date.now() - t0 };
}

beforeAll(async () => {
  gemini = await startFakeGemini();
  receiver = await startReceiver();
  const held = { ...fakeGeminiModel(gemini), timeoutMs: 120_000 };
  kiln = await startKiln({
    env: { ...webhookEnv(), RECONCILE_EVERY_MS: '1000' },
    models: [
      { ...held, id: 'once', idempotent: false },
      { ...held, id: 'idem', idempotent: true },
      // One call at a time: a second task waits queued, its request not sent.
      { ...held, id: 'single', idempotent: false, concurrency: 1 },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await gemini?.close();
  await receiver?.close();
});
beforeEach(() => gemini.reset());

describe('terminate (temporal workflow terminate, the Web UI)', () => {
  it('during a non-idempotent call: uncertain, naming the operator and reason; no second request', async () => {
    gemini.setDefault(delayed(120_000, ok()));
    const id = await submit('once', 'terminate me');
    await gemini.waitForRequests(1);
    const t0 = Date.now();
    await temporalCli('workflow', 'terminate', '--workflow-id', id, '--reason', 'stuck upstream');
    const { task, afterMs } = await endOf(id, t0);
    expect(task.status).toBe('uncertain');
    expect(task.error).toBeNull();
    expect(task.uncertain_reason).toMatch(/^Terminated by an operator \(.*stuck upstream\) after its request was sent/);
    expect(task.finished_at).toEqual(expect.any(Number));
    expect(afterMs).toBeLessThan(60_000);
    const listed = (await api()('/v1/tasks?limit=100')).json.items.find((t: { id: string }) => t.id === id);
    expect(listed.status).toBe('uncertain');
    expect(gemini.requests).toHaveLength(1);
    // Ended: it holds no place among unfinished tasks.
    expect((await kiln.api.store.unfinishedIds(Number.MAX_SAFE_INTEGER, null, 1000)).map((u) => u.id)).not.toContain(
      id,
    );
  });

  it('during an idempotent call: failed / canceled with the reason', async () => {
    gemini.setDefault(delayed(120_000, ok()));
    const id = await submit('idem', 'terminate idempotent');
    await gemini.waitForRequests(1);
    await temporalCli('workflow', 'terminate', '--workflow-id', id, '--reason', 'maintenance');
    const { task } = await endOf(id, Date.now());
    expect(task.status).toBe('failed');
    expect(task.error.code).toBe('canceled');
    expect(task.error.message).toMatch(
      /^Terminated by an operator \(.*maintenance\) after its request was sent; .* idempotent/,
    );
  });

  it('before its request was sent: failed / canceled, the upstream never called for it', async () => {
    gemini.setDefault(delayed(120_000, ok()));
    const first = await submit('single', 'holds the only slot');
    await gemini.waitForRequests(1);
    const second = await submit('single', 'waits for the slot');
    await waitForStatus(() => api()(`/v1/tasks/${second}`), 'queued');
    await temporalCli('workflow', 'terminate', '--workflow-id', second, '--reason', 'not needed');
    const { task } = await endOf(second, Date.now());
    expect(task.status).toBe('failed');
    expect(task.error).toEqual({
      code: 'canceled',
      message: expect.stringMatching(/^Terminated by an operator \(.*not needed\) before its request was sent/),
    });
    await temporalCli('workflow', 'terminate', '--workflow-id', first, '--reason', 'cleanup');
    await endOf(first, Date.now());
    expect(gemini.requests).toHaveLength(1);
  });

  it('a record Redis then lost is answered the same from Temporal', async () => {
    gemini.setDefault(delayed(120_000, ok()));
    const id = await submit('once', 'terminate, then lose the record');
    await gemini.waitForRequests(1);
    await temporalCli('workflow', 'terminate', '--workflow-id', id, '--reason', 'then redis lost it');
    const { task } = await endOf(id, Date.now());
    expect(task.status).toBe('uncertain');
    await kiln.api.redis.del(kiln.api.store.taskKey(id));
    kiln.api.store.finished?.clear();
    // The dispatch mark went with the record: the history's started call is the evidence now.
    const again = await api()(`/v1/tasks/${id}`);
    expect(again.json).toMatchObject({ id, status: 'uncertain', uncertain_reason: task.uncertain_reason, error: null });
  });

  it('sends the webhook of the end', async () => {
    gemini.setDefault(delayed(120_000, ok()));
    const before = receiver.received.length;
    const id = await submit('once', 'terminate with a webhook', `?webhook=${encodeURIComponent(receiver.url())}`);
    await gemini.waitForRequests(1);
    await temporalCli('workflow', 'terminate', '--workflow-id', id, '--reason', 'webhook drill');
    await endOf(id, Date.now());
    const got = await receiver.waitFor(before + 1);
    const body = JSON.parse(got[got.length - 1]!.body);
    expect(body).toMatchObject({ id, status: 'uncertain' });
    expect(RECEIVER_HOST).toBe('127.0.0.2');
  });
});

it('a workflow run that times out ends failed / canceled, saying so', async () => {
  gemini.setDefault(delayed(120_000, ok()));
  const model = kiln.config.models.find((m) => m.id === 'idem')!;
  const id = `task_${randomUUID().replaceAll('-', '')}`;
  const owner = ownerOfKey(kiln.config.ownerKey, KEY_A);
  const task = {
    id,
    owner,
    model: 'idem',
    created_at: Math.floor(Date.now() / 1000),
    request: submitBody('times out'),
  };
  // What a submit writes, then its workflow with a run timeout an operator's tooling might set.
  await kiln.api.store.reserve(id, 1000);
  await kiln.api.store.transition(newImageRecord(task, 'accepted'));
  await kiln.api.client.workflow.start('imageTaskWorkflow', {
    taskQueue: kiln.config.temporal.taskQueue,
    workflowId: id,
    workflowRunTimeout: '2s',
    args: [
      {
        task,
        policy: { timeoutMs: model.timeoutMs, heartbeatTimeoutMs: 1000, maxAttempts: 1 },
        activityQueue: modelTaskQueue(kiln.config.temporal.taskQueue, 'idem'),
      },
    ],
  });
  const { task: ended } = await endOf(id, Date.now());
  expect(ended.status).toBe('failed');
  expect(ended.error.code).toBe('canceled');
  expect(ended.error.message).toMatch(/^Ended by Temporal: the task's workflow timed out after its request was sent/);
});

describe('cancel: whose it was', () => {
  it('from the Web UI (an operator identity and reason): failed / canceled by an operator', async () => {
    gemini.setDefault(delayed(120_000, ok()));
    const id = await submit('once', 'operator cancel');
    await gemini.waitForRequests(1);
    await kiln.api.client.workflowService.requestCancelWorkflowExecution({
      namespace: kiln.config.temporal.namespace,
      workflowExecution: { workflowId: id },
      identity: 'ops@example.com (Temporal Web UI)',
      reason: 'customer asked support to stop it',
      requestId: randomUUID(),
    });
    const { task } = await endOf(id, Date.now());
    expect(task.status).toBe('failed');
    expect(task.error.code).toBe('canceled');
    expect(task.error.message).toMatch(
      /^Canceled by an operator \(ops@example\.com \(Temporal Web UI\): customer asked support to stop it\) after/,
    );
    // The workflow's result, what the Web UI shows, says the same.
    expect(await kiln.api.client.workflow.getHandle(id).result()).toMatchObject({ error: task.error });
  });

  it('from the CLI: by an operator', async () => {
    gemini.setDefault(delayed(120_000, ok()));
    const id = await submit('idem', 'cli cancel');
    await gemini.waitForRequests(1);
    await temporalCli('workflow', 'cancel', '--workflow-id', id);
    const { task } = await endOf(id, Date.now());
    expect(task.error.message).toMatch(/^Canceled by an operator/);
  });

  it("through Kiln's API: by its owner", async () => {
    gemini.setDefault(delayed(120_000, ok()));
    const id = await submit('idem', 'owner cancel');
    await gemini.waitForRequests(1);
    expect((await api()(`/v1/tasks/${id}/cancel`, { method: 'POST' })).status).toBe(202);
    const { task } = await endOf(id, Date.now());
    expect(task.error.message).toMatch(/^Canceled by its owner after/);
  });
});

describe('Redis loses a task mid-call', () => {
  it('a non-idempotent retry without its record (the dispatch mark lost with it) ends uncertain; one request', async () => {
    gemini.setDefault(delayed(120_000, ok()));
    const id = await submit('once', 'lose my record mid-call');
    await gemini.waitForRequests(1);
    await kiln.api.redis.del(kiln.api.store.taskKey(id));
    // The worker goes away mid-call (its shutdown cuts the call off): Temporal retries the attempt.
    await kiln.stopWorker();
    await kiln.startWorker();
    const { task } = await endOf(id, Date.now());
    expect(task.status).toBe('uncertain');
    expect(task.uncertain_reason).toMatch(/record .* was lost from the read model/);
    expect(gemini.requests).toHaveLength(1);
  });
});
