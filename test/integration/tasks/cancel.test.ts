// Cancel (POST /v1/tasks/{id}/cancel, POST /v1/videos/{id}/cancel) and the timing fields
// (started_at, attempts), on real Temporal and Redis with upstreams that are real HTTP servers.
import type { IncomingMessage, ServerResponse } from 'node:http';
import proto from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ownerOfKey } from '../../../src/infra/callers.js';
import { FakeServer, readBody } from '../../support/fake-server.js';
import { fail, ok, startFakeGemini, type FakeGemini } from '../providers/gemini/fake-gemini.js';
import type { FakeOpenAIVideos } from '../providers/openai-videos/fake-openai-videos.js';
import type { FakeWorkflowNode } from '../providers/workflow-node/fake-workflow-node.js';
import { eventually, http, imageSteps, KEY_A, KEY_B, startKiln, submitBody, type Kiln } from '../../support/kiln.js';
import { useVideoKiln, type VideoKilnFile } from '../video/video-kiln.js';

// CommonJS package: read its namespace from the default export.
const EventType = proto.temporal.api.enums.v1.EventType;

interface Held {
  at: number;
  /** When the client's connection closed (Kiln aborted the call); undefined while it is open. */
  closedAt?: number;
}

/** A Gemini-style upstream that never answers: each call stays open until the client goes away. */
class HangingUpstream extends FakeServer<Held> {
  constructor() {
    super('hanging upstream');
  }
  protected handle(req: IncomingMessage, res: ServerResponse): void {
    readBody(req, () => {
      const call: Held = { at: Date.now() };
      res.on('close', () => (call.closedAt = Date.now()));
      this.record(call);
    });
  }
}

let kiln: Kiln;
let hanging: HangingUpstream;
let gemini: FakeGemini;
const steps = imageSteps(() => kiln.baseUrl);
const api = (key = KEY_A) => http(kiln.baseUrl, key);
const cancel = (id: string, key = KEY_A) => api(key)(`/v1/tasks/${id}/cancel`, { method: 'POST' });

beforeAll(async () => {
  hanging = await new HangingUpstream().start();
  gemini = await startFakeGemini();
  const upstream = { provider: 'gemini', credential: 'passthrough', timeoutMs: 60_000 };
  kiln = await startKiln({
    models: [
      { id: 'kiln-image-1', provider: 'local', latencyMs: 300, idempotent: true },
      // The default heartbeatTimeoutMs (10 s): a cancel must not wait for a slow heartbeat.
      { ...upstream, id: 'hang', baseUrl: hanging.baseUrl, idempotent: false },
      // Heartbeats every 10 s while no cancel is pending (a third of 30 s): only the cancel notice
      // can make its cancel prompt.
      { ...upstream, id: 'hang-quiet', baseUrl: hanging.baseUrl, idempotent: false, heartbeatTimeoutMs: 30_000 },
      { ...upstream, id: 'hang-direct', baseUrl: hanging.baseUrl, idempotent: false, form: 'direct' },
      { ...upstream, id: 'flaky', baseUrl: gemini.baseUrl, idempotent: true, heartbeatTimeoutMs: 1000 },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await hanging?.close();
  await gemini?.close();
});

/** A task of the hanging model whose upstream call is under way (the fake holds its connection). */
async function hangingTask(model = 'hang'): Promise<{ id: string; call: Held }> {
  const before = hanging.requests.length;
  const id = await steps.submit(model);
  const [call] = (await hanging.waitForRequests(before + 1)).slice(before);
  await steps.until(id, 'running');
  return { id, call };
}

async function historyOf(id: string) {
  const { events } = await kiln.api.client.workflow.getHandle(id).fetchHistory();
  return (events ?? []).map((e) => ({ ...e, type: String(EventType[e.eventType ?? 0]).replace(/^EVENT_TYPE_/, '') }));
}

describe('cancel an image task', () => {
  it('aborts a running upstream call promptly; the task ends failed / canceled and names the owner', async () => {
    const { id, call } = await hangingTask();
    const t0 = Date.now();
    const r = await cancel(id);
    expect(r.status, r.text).toBe(202);
    const closedAt = await eventually(
      async () => call.closedAt,
      (t) => t !== undefined,
      30_000,
    );
    console.log(`cancel: the upstream connection closed ${closedAt! - t0} ms after the cancel call`);
    // The cancel rides the next heartbeat (every HEARTBEAT_EVERY_MS, 400 ms): about a second at
    // most. Without that throttle it would wait for the SDK's default one (0.8 × the 10 s heartbeat
    // timeout), about 8 s after the call began; 5 s tells the two apart on a loaded machine.
    expect(closedAt! - t0).toBeLessThan(5000);
    // The answer waited for the workflow's record.
    expect(r.json).toMatchObject({ id, object: 'image.task', status: 'failed', candidates: null, attempts: 1 });
    expect(r.json.error.code).toBe('canceled');
    expect(r.json.error.message).toMatch(/may have reached the upstream generator, which is not idempotent/);
    expect(r.json.started_at).toBeGreaterThanOrEqual(r.json.created_at);
    expect(r.json.finished_at).toBeGreaterThanOrEqual(r.json.started_at);
    expect((await api()(`/v1/tasks/${id}`)).json).toEqual(r.json);

    // Again: the task has finished, so 200 and the same task.
    const again = await cancel(id);
    expect(again.status).toBe(200);
    expect(again.json).toEqual(r.json);

    // The Web UI shows who canceled: the owner id Kiln stores, never the key.
    const owner = ownerOfKey(kiln.config.ownerKey, KEY_A);
    const history = await historyOf(id);
    const requested = history.filter((e) => e.type === 'WORKFLOW_EXECUTION_CANCEL_REQUESTED');
    expect(requested).toHaveLength(1);
    const attrs = requested[0].workflowExecutionCancelRequestedEventAttributes!;
    expect(attrs.identity).toBe(`kiln owner ${owner}`);
    expect(attrs.cause).toContain(`/v1/tasks/${id}/cancel`);
    expect(JSON.stringify(history)).not.toContain(KEY_A);
    const handle = kiln.api.client.workflow.getHandle(id);
    expect((await handle.describe()).status.name).toBe('COMPLETED');
    expect(await handle.result()).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    expect(await kiln.api.store.get(id)).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
  });

  it('a call that heartbeats quietly still closes within seconds of a cancel: the workflow tells the workers', async () => {
    const { id, call } = await hangingTask('hang-quiet');
    const handle = kiln.api.client.workflow.getHandle(id);
    // Quiet: 1.5 s into the call Temporal has had no heartbeat from it (each one is a write of the
    // workflow's state); the old 400 ms beat would have sent three.
    await new Promise((r) => setTimeout(r, 1500 - (Date.now() - call.at)));
    const [pending] = (await handle.describe()).raw.pendingActivities ?? [];
    expect(pending?.activityType?.name).toBe('generateImage');
    expect(pending?.lastHeartbeatTime ?? null).toBeNull();
    const t0 = Date.now();
    expect((await cancel(id)).status).toBe(202);
    const closedAt = await eventually(
      async () => call.closedAt,
      (t) => t !== undefined,
      30_000,
    );
    console.log(`quiet cancel: the upstream connection closed ${closedAt! - t0} ms after the cancel call`);
    // Without the notice the next beat would be up to 10 s away.
    expect(closedAt! - t0).toBeLessThan(2500);
    expect(await kiln.api.store.get(id)).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
  });

  it("an operator's cancel from Temporal (the Web UI's, the CLI's) is as prompt", async () => {
    const { id, call } = await hangingTask('hang-quiet');
    const t0 = Date.now();
    await kiln.api.client.workflow.getHandle(id).cancel();
    const closedAt = await eventually(
      async () => call.closedAt,
      (t) => t !== undefined,
      30_000,
    );
    console.log(`operator cancel: the upstream connection closed ${closedAt! - t0} ms after the cancel`);
    expect(closedAt! - t0).toBeLessThan(2500);
    const done = await steps.until(id, 'failed');
    expect(done.error.code).toBe('canceled');
  });

  it('answers a finished task 200, unchanged, with its timing fields', async () => {
    const id = await steps.submit('kiln-image-1');
    const done = await steps.finish(id);
    expect(done.status).toBe('succeeded');
    expect(done.started_at).toBeGreaterThanOrEqual(done.created_at);
    expect(done.started_at).toBeLessThanOrEqual(done.finished_at);
    expect(done.attempts).toBe(1);
    const r = await cancel(id);
    expect(r.status).toBe(200);
    expect(r.json).toEqual(done);
    expect(r.headers.get('retry-after')).toBeNull();
    expect((await historyOf(id)).some((e) => e.type === 'WORKFLOW_EXECUTION_CANCEL_REQUESTED')).toBe(false);
  });

  it("answers 404 not_found for another owner's task, an unknown id and a malformed one", async () => {
    const { id, call } = await hangingTask();
    for (const [target, key] of [
      [id, KEY_B],
      [`task_${'0'.repeat(32)}`, KEY_A],
      ['task_nope', KEY_A],
    ]) {
      const r = await cancel(target, key);
      expect({ status: r.status, body: r.json }).toEqual({
        status: 404,
        body: { error: { code: 'not_found', message: `Task ${target} was not found.` } },
      });
    }
    // The other owner's attempt changed nothing.
    expect(call.closedAt).toBeUndefined();
    expect((await api()(`/v1/tasks/${id}`)).json.status).toBe('running');
    expect((await historyOf(id)).some((e) => e.type === 'WORKFLOW_EXECUTION_CANCEL_REQUESTED')).toBe(false);
    expect((await cancel(id)).json.error.code).toBe('canceled');
  });

  it('counts a retried attempt: attempts 2, started_at from the first', async () => {
    gemini.reset();
    gemini.enqueue(fail(500, 'try again'), ok());
    const id = await steps.submit('flaky');
    const done = await steps.finish(id);
    expect(done.status).toBe('succeeded');
    expect(done.attempts).toBe(2);
    const [first] = await gemini.waitForRequests(2);
    expect(done.started_at).toBeLessThanOrEqual(Math.ceil(first.at / 1000));
    expect(done.started_at).toBeGreaterThanOrEqual(done.created_at);
  });

  it('a direct-form request whose task is canceled while it waits answers 409 canceled', async () => {
    const before = hanging.requests.length;
    const waiting = api()('/v1beta/models/hang-direct:generateContent', { method: 'POST', json: submitBody() });
    await hanging.waitForRequests(before + 1);
    const listed = await api()('/v1/tasks?limit=100');
    const task = listed.json.items.find(
      (i: { status: string; model: string }) => i.model === 'hang-direct' && i.status === 'running',
    );
    expect(task, listed.text).toBeDefined();
    expect((await cancel(task.id)).json.error.code).toBe('canceled');
    const r = await waiting;
    expect(r.status).toBe(409);
    expect(r.json.error).toMatchObject({ code: 'canceled', message: expect.stringMatching(/may have reached/) });
  });

  it('works through Temporal when Redis lost the record', async () => {
    const { id, call } = await hangingTask();
    await kiln.api.redis.del(kiln.api.store.taskKey(id));
    const r = await cancel(id);
    expect(r.status, r.text).toBe(202);
    expect(r.json).toMatchObject({ id, status: 'failed', error: { code: 'canceled' } });
    // The workflow waited for the attempt to stop before recording the outcome.
    expect(call.closedAt).toBeDefined();
    expect((await kiln.api.store.get(id))?.status).toBe('failed');
  });

  it('cancels a task while no worker runs: it ends canceled once one does, the upstream never called', async () => {
    await kiln.stopWorker();
    const calls = hanging.requests.length;
    let id = '';
    try {
      id = await steps.submit('hang');
      const r = await cancel(id);
      expect(r.status, r.text).toBe(202);
      // Nobody has run the workflow yet: the answer is the task as it is.
      expect(r.json).toMatchObject({ id, status: 'accepted', error: null, started_at: null, attempts: 0 });
      expect(r.headers.get('retry-after')).toBe(String(kiln.config.pollAfterSeconds));
    } finally {
      await kiln.startWorker();
    }
    const done = await steps.finish(id);
    expect(done).toMatchObject({ status: 'failed', started_at: null, attempts: 0 });
    expect(done.error.code).toBe('canceled');
    expect(done.error.message).toMatch(/was never called/);
    expect(hanging.requests.length).toBe(calls);
    expect((await historyOf(id)).some((e) => e.type === 'ACTIVITY_TASK_STARTED')).toBe(false);
  });
});

describe('cancel a video task', () => {
  let file: VideoKilnFile;
  useVideoKiln((f) => (file = f));
  const vcancel = (id: string, key = KEY_A) => file.calls.api(key)(`/v1/videos/${id}/cancel`, { method: 'POST' });

  /** A video whose upstream job exists and never finishes. */
  async function runningVideo(fake: FakeOpenAIVideos | FakeWorkflowNode, model: string): Promise<string> {
    const id = await file.calls.createOk({ model, prompt: 'a slow river' });
    await eventually(
      async () => fake.creates().length,
      (n) => n === 1,
    );
    await file.calls.until(id, 'in_progress');
    return id;
  }

  it('workflow-node: the upstream cancel endpoint gets the job; the task ends failed / canceled', async () => {
    file.node.setWorkflow(['RUNNING']);
    const id = await runningVideo(file.node, 'v-node');
    const r = await vcancel(id);
    expect(r.status, r.text).toBe(202);
    expect(r.json).toMatchObject({ id, object: 'video', status: 'failed', attempts: 1 });
    expect(r.json.error).toMatchObject({ code: 'canceled', message: expect.stringMatching(/asked to stop it/) });
    expect(r.json.started_at).toBeGreaterThanOrEqual(r.json.created_at);
    const cancels = file.node.cancels();
    expect(cancels).toHaveLength(1);
    expect(String(cancels[0]!.body.taskId)).toBe(file.node.creates()[0]!.jobId);
    expect((await vcancel(id)).status).toBe(200);
  });

  it('openai-videos (no cancel call): failed / canceled, saying the job may keep running upstream', async () => {
    file.fake.setScript(['queued']);
    const id = await runningVideo(file.fake, 'v-oa');
    const r = await vcancel(id);
    expect(r.status, r.text).toBe(202);
    expect(r.json).toMatchObject({ id, status: 'failed', error: { code: 'canceled' } });
    expect(r.json.error.message).toMatch(/may keep running there/);
    // Only the create and status reads reached the upstream: OpenAI's videos API has no cancel call.
    expect(file.fake.requests.every((r) => r.method === 'GET' || r.path === '/v1/videos')).toBe(true);
    expect((await vcancel(id, KEY_B)).status).toBe(404);
  });

  it('cancels a video while no worker runs: it ends canceled once one does, no upstream job created', async () => {
    await file.kiln.stopWorker();
    let id = '';
    try {
      id = await file.calls.createOk({ model: 'v-oa', prompt: 'never made' });
      const r = await vcancel(id);
      expect(r.status, r.text).toBe(202);
      expect(r.json).toMatchObject({ id, status: 'queued', error: null, started_at: null, attempts: 0 });
    } finally {
      await file.kiln.startWorker();
    }
    const done = await file.calls.finish(id);
    expect(done).toMatchObject({ status: 'failed', error: { code: 'canceled' }, started_at: null, attempts: 0 });
    expect(done.error.message).toMatch(/the upstream was never called/);
    expect(file.fake.creates()).toHaveLength(0);
  });

  it("answers 404 for another owner's video and a finished video 200 with its timing fields", async () => {
    const id = await file.calls.createOk({ model: 'v-oa-idem', prompt: 'a quick river' });
    expect((await vcancel(id, KEY_B)).json.error.code).toBe('not_found');
    const done = await file.calls.finish(id);
    expect(done.status).toBe('completed');
    expect(done.attempts).toBe(1);
    expect(done.started_at).toBeGreaterThanOrEqual(done.created_at);
    const r = await vcancel(id);
    expect(r.status).toBe(200);
    expect(r.json).toEqual(done);
  });
});
