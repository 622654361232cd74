// Gemini batch mode through the unmodified @google/genai SDK (only its base URL and key set):
// batches.create with inline requests, get until done, cancel, delete, list paging, owner scope and
// the limits at their edges. Each request is a real image task (its own Temporal workflow, listed
// in /v1/tasks) on real Redis and Temporal; a failing upstream is a fake Gemini over HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError, GoogleGenAI, JobState, type BatchJob, type InlinedRequest } from '@google/genai';
import { fail, startFakeGemini, type FakeGemini } from '../providers/gemini/fake-gemini.js';
import { http, KEY_A, KEY_B, startKiln, waitForStatus, type Kiln } from '../../support/kiln.js';

const KEY_C = 'test-key-owner-c-quota-5555';
const KEY_D = 'test-key-owner-d-lists-7777';
const MB4 = 4 * 1024 * 1024;

let kiln: Kiln;
let fake: FakeGemini;

beforeAll(async () => {
  fake = await startFakeGemini();
  fake.setDefault(() => fail(402, 'no credit left'));
  kiln = await startKiln({
    env: { POLL_AFTER_SECONDS: '1', OWNER_DAILY_UNITS: '1500' },
    models: [
      { id: 'kiln-image-1', provider: 'local', latencyMs: 200, idempotent: true },
      { id: 'img-slow', provider: 'local', latencyMs: 20_000, idempotent: true },
      { id: 'img-costly', provider: 'local', latencyMs: 50, units: 1000, idempotent: true },
      {
        id: 'g-broke',
        provider: 'gemini',
        baseUrl: fake.baseUrl,
        maxAttempts: 1,
        timeoutMs: 5000,
        heartbeatTimeoutMs: 1000,
      },
      { id: 'kiln-video-1', kind: 'video', provider: 'local', latencyMs: 100, pollIntervalMs: 100 },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await fake?.close();
});

const sdk = (apiKey = KEY_A) =>
  new GoogleGenAI({ apiKey, httpOptions: { baseUrl: kiln.baseUrl, retryOptions: { attempts: 1 } } });
const api = (key: string | null = KEY_A) => http(kiln.baseUrl, key);
const ask = (text: string, key?: string): InlinedRequest => ({
  contents: [{ role: 'user', parts: [{ text }] }],
  config: { responseModalities: ['IMAGE'] },
  ...(key ? { metadata: { key } } : {}),
});
const DONE: string[] = [JobState.JOB_STATE_SUCCEEDED, JobState.JOB_STATE_FAILED, JobState.JOB_STATE_CANCELLED];

/** What an SDK user writes: batches.get until the state is final. */
async function untilDone(name: string, key = KEY_A, timeoutMs = 30_000): Promise<BatchJob> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = await sdk(key).batches.get({ name });
    if (DONE.includes(job.state!)) return job;
    if (Date.now() > deadline) throw new Error(`batch ${name} not done: ${job.state}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const raw = async (name: string, key = KEY_A) => (await api(key)(`/v1beta/${name}`)).json;
const apiError = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error('expected the SDK to throw');
    },
    (e: unknown) => {
      expect(e).toBeInstanceOf(ApiError);
      const err = e as ApiError;
      return { status: err.status, body: JSON.parse(err.message) as { error: Record<string, any> } };
    },
  );

describe('create, get until done, results in request order', () => {
  it('runs 3 inline requests as 3 image tasks and answers 3 inline responses with images', async () => {
    const created = await sdk().batches.create({
      model: 'kiln-image-1',
      src: [ask('a red fox', 'r0'), ask('a lighthouse', 'r1'), ask('a teapot', 'r2')],
      config: { displayName: 'three foxes' },
    });
    expect(created.name).toMatch(/^batches\/batch_[a-f0-9]{32}$/);
    expect(created.displayName).toBe('three foxes');
    expect(created.model).toBe('models/kiln-image-1');
    expect([JobState.JOB_STATE_PENDING, JobState.JOB_STATE_RUNNING]).toContain(created.state);
    expect(created.createTime).toMatch(/^\d{4}-\d\d-\d\dT/);

    const job = await untilDone(created.name!);
    expect(job.state).toBe(JobState.JOB_STATE_SUCCEEDED);
    expect(job.endTime).toBeDefined();
    const responses = job.dest!.inlinedResponses!;
    expect(responses.map((r) => r.metadata)).toEqual([{ key: 'r0' }, { key: 'r1' }, { key: 'r2' }]);

    // The raw Operation: stats as Google sends them, and each request's task.
    const op = await raw(created.name!);
    expect(op.done).toBe(true);
    expect(op.metadata.batchStats).toEqual({
      requestCount: '3',
      successfulRequestCount: '3',
      failedRequestCount: '0',
      pendingRequestCount: '0',
    });
    const taskIds: string[] = op.metadata.taskIds;
    expect(taskIds).toHaveLength(3);
    const listed = (await api()('/v1/tasks?limit=100')).json.items.map((t: any) => t.id);
    for (const [i, id] of taskIds.entries()) {
      // The image inline, base64: the same bytes as the task's content.
      const part = responses[i]!.response!.candidates![0]!.content!.parts!.find((p) => p.inlineData)!;
      const png = Buffer.from(part.inlineData!.data!, 'base64');
      expect(png.subarray(1, 4).toString()).toBe('PNG');
      const location = (await api()(`/v1/tasks/${id}/content`)).headers.get('location')!;
      expect(Buffer.from(await (await fetch(location)).arrayBuffer()).equals(png)).toBe(true);
      // Its own task, in /v1/tasks, and its own workflow.
      expect((await api()(`/v1/tasks/${id}`)).json.status).toBe('succeeded');
      expect(listed).toContain(id);
      const wf = await kiln.api.client.workflow.getHandle(id).describe();
      expect(wf.type).toBe('imageTaskWorkflow');
    }
  });

  it('answers an invalid request and a failed upstream call as their own errors, the rest as images', async () => {
    const created = await sdk().batches.create({
      model: 'kiln-image-1',
      src: [ask('first'), ask('   '), ask('third')],
    });
    const job = await untilDone(created.name!);
    expect(job.state).toBe(JobState.JOB_STATE_SUCCEEDED);
    const [a, b, c] = job.dest!.inlinedResponses!;
    expect(a!.response!.candidates![0]!.content!.parts![0]!.inlineData!.data).toBeTruthy();
    expect(b!.response).toBeUndefined();
    expect(b!.error).toMatchObject({ code: 3 });
    expect(b!.error!.message).toContain('requests[1]');
    expect(c!.response).toBeDefined();
    const op = await raw(created.name!);
    expect(op.metadata.taskIds[1]).toBeNull();
    expect(op.metadata.batchStats).toMatchObject({ successfulRequestCount: '2', failedRequestCount: '1' });

    // Every request failed upstream: the batch is FAILED, each response says why (google.rpc.Status).
    const broke = await sdk().batches.create({ model: 'g-broke', src: [ask('one')] });
    const failed = await untilDone(broke.name!);
    expect(failed.state).toBe(JobState.JOB_STATE_FAILED);
    expect(failed.dest!.inlinedResponses![0]!.error).toMatchObject({ code: 9 });
    expect((await raw(broke.name!)).error).toMatchObject({ code: 2 });
  });

  it("turns a quota refusal into that request's error; the batch goes on", async () => {
    const created = await sdk(KEY_C).batches.create({ model: 'img-costly', src: [ask('one'), ask('two')] });
    const job = await untilDone(created.name!, KEY_C);
    expect(job.state).toBe(JobState.JOB_STATE_SUCCEEDED);
    const [ok, refused] = job.dest!.inlinedResponses!;
    expect(ok!.response).toBeDefined();
    expect(refused!.error).toMatchObject({ code: 8 });
    expect(refused!.error!.message).toContain('daily_units');
  });

  it('replays a create sent again with the same Idempotency-Key; another body is 422', async () => {
    const body = { batch: { inputConfig: { requests: { requests: [{ request: ask('keyed') }] } } } };
    const headers = { 'idempotency-key': `gb-${Date.now()}` };
    const post = (b: unknown) =>
      api()('/v1beta/models/kiln-image-1:batchGenerateContent', { method: 'POST', json: b, headers });
    const first = await post(body);
    const again = await post(body);
    expect(first.status).toBe(200);
    expect(again.status).toBe(200);
    expect(again.json.name).toBe(first.json.name);
    expect(again.json.metadata.taskIds).toEqual(first.json.metadata.taskIds);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    const other = await post({ batch: { inputConfig: { requests: { requests: [{ request: ask('other') }] } } } });
    expect(other.status).toBe(422);
    expect(other.json.error).toMatchObject({ code: 422, status: 'FAILED_PRECONDITION' });
  });
});

describe('cancel and delete', () => {
  it("cancels the batch's running tasks; the batch ends CANCELLED with each request's error", async () => {
    const created = await sdk().batches.create({ model: 'img-slow', src: [ask('slow one'), ask('slow two')] });
    const [first] = (await raw(created.name!)).metadata.taskIds as string[];
    await waitForStatus(() => api()(`/v1/tasks/${first}`), 'running');
    expect((await sdk().batches.get({ name: created.name! })).state).toBe(JobState.JOB_STATE_RUNNING);
    await sdk().batches.cancel({ name: created.name! });
    const job = await untilDone(created.name!, KEY_A, 15_000);
    expect(job.state).toBe(JobState.JOB_STATE_CANCELLED);
    for (const r of job.dest!.inlinedResponses!) expect(r.error).toMatchObject({ code: 1 });
    const op = await raw(created.name!);
    for (const id of op.metadata.taskIds) {
      const t = (await api()(`/v1/tasks/${id}`)).json;
      expect(t.status).toBe('failed');
      expect(t.error.code).toBe('canceled');
    }
    // A finished batch: cancel again changes nothing.
    await sdk().batches.cancel({ name: created.name! });
    expect((await sdk().batches.get({ name: created.name! })).state).toBe(JobState.JOB_STATE_CANCELLED);
  });

  it('deletes the batch record; its task stays in /v1/tasks', async () => {
    const created = await sdk().batches.create({ model: 'kiln-image-1', src: [ask('to delete')] });
    const [taskId] = (await raw(created.name!)).metadata.taskIds as string[];
    const deleted = await sdk().batches.delete({ name: created.name! });
    expect(deleted.error).toBeUndefined();
    const gone = await apiError(sdk().batches.get({ name: created.name! }));
    expect(gone.status).toBe(404);
    expect(gone.body.error).toMatchObject({ code: 404, status: 'NOT_FOUND' });
    expect((await apiError(sdk().batches.delete({ name: created.name! }))).status).toBe(404);
    expect((await api()(`/v1/tasks/${taskId}`)).status).toBe(200);
  });
});

describe('list', () => {
  it('pages newest first with pageSize and pageToken, as the SDK pager follows them', async () => {
    const names: string[] = [];
    for (const n of [1, 2, 3]) {
      const b = await sdk(KEY_D).batches.create({ model: 'kiln-image-1', src: [ask(`list ${n}`)] });
      names.push(b.name!);
      await new Promise((r) => setTimeout(r, 5));
    }
    const pager = await sdk(KEY_D).batches.list({ config: { pageSize: 2 } });
    expect(pager.page.map((b) => b.name)).toEqual([names[2], names[1]]);
    const all: string[] = [];
    for await (const b of pager) all.push(b.name!);
    expect(all).toEqual([...names].reverse());
    // Raw: the token, and the last page without one.
    const p1 = (await api(KEY_D)('/v1beta/batches?pageSize=2')).json;
    expect(p1.operations).toHaveLength(2);
    expect(p1.operations[0].metadata.output).toBeUndefined();
    const p2 = (await api(KEY_D)(`/v1beta/batches?pageSize=2&pageToken=${p1.nextPageToken}`)).json;
    expect(p2.operations.map((o: any) => o.name)).toEqual([names[0]]);
    expect(p2.nextPageToken).toBeUndefined();
  });

  it('takes pageSize 50, refuses 51 and a token it did not issue with 400 INVALID_ARGUMENT', async () => {
    expect((await api(KEY_D)('/v1beta/batches?pageSize=50')).status).toBe(200);
    for (const q of ['pageSize=51', 'pageSize=-1', 'pageToken=bogus']) {
      const res = await api(KEY_D)(`/v1beta/batches?${q}`);
      expect(res.status, q).toBe(400);
      expect(res.json.error, q).toMatchObject({ code: 400, status: 'INVALID_ARGUMENT' });
    }
  });
});

describe('owner scope and auth', () => {
  it("answers another owner's batch and an unknown one 404 NOT_FOUND, and leaves them out of lists", async () => {
    const mine = await sdk().batches.create({ model: 'kiln-image-1', src: [ask('mine')] });
    const b = sdk(KEY_B);
    for (const call of [
      () => b.batches.get({ name: mine.name! }),
      () => b.batches.cancel({ name: mine.name! }),
      () => b.batches.delete({ name: mine.name! }),
      () => sdk().batches.get({ name: 'batches/batch_0123456789abcdef0123456789abcdef' }),
      () => sdk().batches.get({ name: 'batches/nope' }),
    ]) {
      const e = await apiError(call());
      expect(e.status).toBe(404);
      expect(e.body.error).toMatchObject({ code: 404, status: 'NOT_FOUND' });
    }
    const theirs = (await api(KEY_B)('/v1beta/batches?pageSize=50')).json.operations.map((o: any) => o.name);
    expect(theirs).not.toContain(mine.name);
    expect((await sdk().batches.get({ name: mine.name! })).name).toBe(mine.name);
    // The path also takes the whole resource name, URL-encoded (what a link from the create answer passes).
    const encoded = `/v1beta/batches/${encodeURIComponent(mine.name!)}`;
    expect((await api()(encoded)).json.name).toBe(mine.name);
    expect((await api(KEY_B)(encoded)).status).toBe(404);
  });

  it('takes the key as x-goog-api-key or Bearer; none is 401 UNAUTHENTICATED in Google shape', async () => {
    const bearer = await api()('/v1beta/batches');
    expect(bearer.status).toBe(200);
    const none = await api(null)('/v1beta/batches');
    expect(none.status).toBe(401);
    expect(none.json.error).toMatchObject({ code: 401, status: 'UNAUTHENTICATED' });
    expect(none.json.error.message).toContain('x-goog-api-key');
    // A wrong method is the router's: Kiln's shared 405, as on every path (the video operations' too).
    const put = await api()('/v1beta/batches', { method: 'PUT' });
    expect(put.status).toBe(405);
    expect(put.json.error.code).toBe('method_not_allowed');
  });
});

describe('limits, each at its edge and one past', () => {
  const post = (body: string | unknown, model = 'kiln-image-1') =>
    api()(`/v1beta/models/${model}:batchGenerateContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  // Blank prompts: refused one by one, so the edge costs no image.
  const blanks = (n: number) => Array.from({ length: n }, () => ask(' '));

  it('takes 100 requests and refuses 101 (400 INVALID_ARGUMENT through the SDK)', async () => {
    const hundred = await sdk().batches.create({ model: 'kiln-image-1', src: blanks(100) });
    expect(hundred.state).toBe(JobState.JOB_STATE_FAILED);
    expect(hundred.dest!.inlinedResponses).toHaveLength(100);
    const e = await apiError(sdk().batches.create({ model: 'kiln-image-1', src: blanks(101) }));
    expect(e.status).toBe(400);
    expect(e.body.error).toMatchObject({ code: 400, status: 'INVALID_ARGUMENT' });
    expect(e.body.error.message).toContain('at most 100 requests');
  });

  it('takes a body of exactly 4 MiB and refuses 4 MiB + 1 byte with 413', async () => {
    const json = JSON.stringify({ batch: { inputConfig: { requests: { requests: [{ request: ask(' ') }] } } } });
    const padded = (n: number) => json + ' '.repeat(n - Buffer.byteLength(json));
    expect((await post(padded(MB4))).status).toBe(200);
    const over = await post(padded(MB4 + 1));
    expect(over.status).toBe(413);
    expect(over.json.error).toMatchObject({ code: 413, status: 'INVALID_ARGUMENT' });
    expect(over.json.error.message).toContain('4 MB');
  });

  it("applies generateContent's limits to each request: a 4000-character prompt runs, 4001 is refused", async () => {
    const created = await sdk().batches.create({
      model: 'kiln-image-1',
      src: [ask('p'.repeat(4000)), ask('p'.repeat(4001))],
    });
    const job = await untilDone(created.name!);
    const [ok, refused] = job.dest!.inlinedResponses!;
    expect(ok!.response).toBeDefined();
    expect(refused!.error).toMatchObject({ code: 3, details: [{ reason: 'PROMPT_TOO_LONG' }] });
  });

  it('refuses file input, an unknown or non-image model, and a malformed body clearly', async () => {
    const file = await post({ batch: { inputConfig: { fileName: 'files/abc' } } });
    expect(file.status).toBe(400);
    expect(file.json.error.message).toContain('not supported');
    for (const model of ['no-such-model', 'kiln-video-1']) {
      const e = await apiError(sdk().batches.create({ model, src: [ask('x')] }));
      expect(e.status, model).toBe(404);
      expect(e.body.error.status).toBe('NOT_FOUND');
    }
    const bad = await post('{"batch": ');
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ code: 400, status: 'INVALID_ARGUMENT' });
  });

  it('is in /openapi.json, Google-shaped errors documented', async () => {
    const doc = (await api()('/openapi.json')).json;
    const create = doc.paths['/v1beta/models/{model}:batchGenerateContent'].post;
    expect(create.operationId).toBe('createGeminiBatch');
    expect(create.responses['413']).toBeDefined();
    expect(create.responses['400'].content['application/json'].schema.properties.error.properties.status).toBeDefined();
    expect(doc.paths['/v1beta/batches'].get.operationId).toBe('listGeminiBatches');
    expect(doc.paths['/v1beta/batches/{id}'].get.operationId).toBe('getGeminiBatch');
    expect(doc.paths['/v1beta/batches/{id}'].delete.operationId).toBe('deleteGeminiBatch');
    expect(doc.paths['/v1beta/batches/{id}:cancel'].post.operationId).toBe('cancelGeminiBatch');
    // @google/genai 3 sends these calls to /v1 by default: the same operations are there.
    expect(doc.paths['/v1/models/{model}:batchGenerateContent'].post.operationId).toBe('createGeminiBatchV1');
    expect(doc.paths['/v1/batches/{id}:cancel'].post.operationId).toBe('cancelGeminiBatchV1');
  });
});
