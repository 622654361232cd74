// The gemini provider against a fake upstream (a real HTTP server): results, the forwarded request,
// credentials, every upstream failure code, timeouts, `uncertain` and retries.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import proto from '@temporalio/proto';
import {
  closedPortUrl,
  delayed,
  drop,
  fail,
  ok,
  startFakeGemini,
  fakeGeminiModel,
  TINY_PNG,
  type FakeGemini,
} from '../providers/gemini/fake-gemini.js';
import { startKiln, submitBody, imageSteps, KEY_A, type Kiln } from '../../support/kiln.js';

const CONFIGURED_KEY = 'configured-upstream-key-5b1f0c9e7d';

let fake: FakeGemini;
let kiln: Kiln;
let refusedUrl: string;

beforeAll(async () => {
  fake = await startFakeGemini();
  refusedUrl = await closedPortUrl();
  const gemini = fakeGeminiModel(fake);
  kiln = await startKiln({
    env: { FAKE_KEY: CONFIGURED_KEY },
    models: [
      // Non-idempotent: anything after dispatch without an answer is uncertain. queueTimeoutMs 0 (here
      // and g-refused): a refusal ends the task at once, so each answer's mapping is read (the wait
      // and resend: refusal-wait.test.ts).
      {
        ...gemini,
        id: 'g-main',
        upstreamModel: 'gemini-fake-image',
        maxAttempts: 3,
        idempotent: false,
        queueTimeoutMs: 0,
      },
      { ...gemini, id: 'g-idem', maxAttempts: 3, idempotent: true },
      { ...gemini, id: 'g-env', credential: { env: 'FAKE_KEY' }, maxAttempts: 1 },
      { ...gemini, id: 'g-once', maxAttempts: 1, idempotent: false },
      { ...gemini, id: 'g-slow', timeoutMs: 1000, maxAttempts: 3 },
      { ...gemini, id: 'g-refused', baseUrl: refusedUrl, maxAttempts: 2, idempotent: false, queueTimeoutMs: 0 },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await fake?.close();
});
beforeEach(() => fake.reset());

const { api, submit, finish } = imageSteps(() => kiln.baseUrl);

interface TaskBody {
  status: string;
  created_at: number;
  finished_at: number | null;
  candidates: unknown;
  error: { code: string; message: string } | null;
}

function expectFailed(task: TaskBody, code: string, upstreamMessage?: string) {
  expect(task.status).toBe('failed');
  expect(task.candidates).toBeNull();
  expect(Number.isInteger(task.finished_at)).toBe(true);
  expect(task.finished_at).toBeGreaterThanOrEqual(task.created_at);
  expect(task.error?.code).toBe(code);
  expect(typeof task.error?.message).toBe('string');
  if (upstreamMessage) expect(task.error?.message).toContain(upstreamMessage);
}

/** Every key and value Kiln wrote under this instance's Redis prefix, as text. */
async function redisDump(): Promise<string[]> {
  const redis = kiln.api.redis;
  const out: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${kiln.config.redisPrefix}*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      out.push(key);
      const type = await redis.type(key);
      if (type === 'string') out.push(String(await redis.get(key)));
      else if (type === 'hash') out.push(JSON.stringify(await redis.hgetall(key)));
      else if (type === 'zset') out.push(JSON.stringify(await redis.zrange(key, '0', '-1', 'WITHSCORES')));
      else if (type === 'set') out.push(JSON.stringify(await redis.smembers(key)));
      else if (type === 'list') out.push(JSON.stringify(await redis.lrange(key, 0, -1)));
      else out.push(`<${type}>`);
    }
  } while (cursor !== '0');
  return out;
}

/** The attempt number of the last ActivityTaskStarted event of the task's workflow. */
async function lastActivityAttempt(id: string): Promise<number | null | undefined> {
  const handle = kiln.api.client.workflow.getHandle(id);
  // The activity writes the task's end before Temporal records its attempt (with the completion):
  // the history is read once the workflow has completed, as every task's workflow does.
  await handle.result();
  const { events } = await handle.fetchHistory();
  const started = (events ?? []).filter((e) => e.activityTaskStartedEventAttributes);
  return started.at(-1)?.activityTaskStartedEventAttributes?.attempt;
}

describe('gemini provider: success', () => {
  it('stores a base64 image in the blob store, keeps text parts in order, passes URL images through', async () => {
    const remote = 'http://images.example.test/out/remote-image.png';
    fake.enqueue(
      ok(
        [
          { text: 'Here is your fox.' },
          { inlineData: { mimeType: 'image/png', data: TINY_PNG.toString('base64') } },
          { text: 'And another one:' },
          { inlineData: { mimeType: 'image/png', data: remote } },
        ],
        { responseId: 'resp-abc-123', modelVersion: 'gemini-fake-image-001' },
      ),
    );
    const id = await submit('g-main');
    const task = await finish(id);

    expect(task).toMatchObject({
      id,
      object: 'image.task',
      model: 'g-main',
      status: 'succeeded',
      error: null,
      response_id: 'resp-abc-123',
      model_version: 'gemini-fake-image-001',
    });
    expect(Number.isInteger(task.finished_at)).toBe(true);
    expect(task.candidates).toHaveLength(1);
    expect(task.candidates[0].finishReason).toBe('STOP');
    const parts = task.candidates[0].content.parts;
    expect(parts).toHaveLength(4);
    expect(parts[0]).toEqual({ text: 'Here is your fox.' });
    expect(parts[1].inlineData.mimeType).toBe('image/png');
    const stored: string = parts[1].inlineData.data;
    expect(stored).toMatch(new RegExp(`^${kiln.baseUrl}/v1/files/[a-f0-9]{32}\\.png$`));
    expect(parts[2]).toEqual({ text: 'And another one:' });
    expect(parts[3]).toEqual({ inlineData: { mimeType: 'image/png', data: remote } });

    const img = await fetch(stored);
    expect(img.status).toBe(200);
    expect(img.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await img.arrayBuffer()).equals(TINY_PNG)).toBe(true);

    const content = await api()(`/v1/tasks/${id}/content`);
    expect(content.status).toBe(302);
    expect(content.headers.get('location')).toBe(stored);
    expect(fake.requests).toHaveLength(1);
  });

  it('passes an http image URL through as is, and the content redirect points at it', async () => {
    const remote = 'https://cdn.example.test/generated/abc.png';
    fake.enqueue(ok([{ text: 'done' }, { inlineData: { mimeType: 'image/png', data: remote } }]));
    const id = await submit('g-main');
    const task = await finish(id);
    expect(task.status).toBe('succeeded');
    expect(task.candidates[0].content.parts).toEqual([
      { text: 'done' },
      { inlineData: { mimeType: 'image/png', data: remote } },
    ]);
    expect(task.response_id).toBe('fake-response-1');
    const content = await api()(`/v1/tasks/${id}/content`);
    expect(content.status).toBe(302);
    expect(content.headers.get('location')).toBe(remote);
  });

  it('fails with upstream_error when the upstream answers 200 without any image', async () => {
    fake.enqueue(ok([{ text: 'I cannot draw that.' }]));
    const id = await submit('g-main');
    expectFailed(await finish(id), 'upstream_error');
  });
});

describe('gemini provider: the forwarded request', () => {
  const body = submitBody('a lighthouse at dusk, oil painting', {
    generationConfig: {
      responseModalities: ['TEXT', 'IMAGE'],
      topP: 0.9,
      imageConfig: { aspectRatio: '16:9', imageSize: '2K', output: 'url' },
    },
    tools: [{ googleSearch: {} }],
    systemInstruction: { parts: [{ text: 'You are a careful illustrator.' }] },
  });

  it(
    'forwards contents, generationConfig without output, tools ' +
      'and systemInstruction; passthrough key as x-goog-api-key',
    async () => {
      const id = await submit('g-main', body);
      expect((await finish(id)).status).toBe('succeeded');
      expect(fake.requests).toHaveLength(1);
      const req = fake.requests[0];
      expect(req.method).toBe('POST');
      expect(req.path).toBe('/v1beta/models/gemini-fake-image:generateContent');
      expect(req.model).toBe('gemini-fake-image');
      expect(req.headers['content-type']).toMatch(/^application\/json/);
      expect(req.headers['x-goog-api-key']).toBe(KEY_A);
      expect(req.headers.authorization).toBeUndefined();
      expect(req.headers['idempotency-key']).toBeUndefined(); // g-main is not idempotent
      expect(req.body).toEqual({
        contents: [{ role: 'user', parts: [{ text: 'a lighthouse at dusk, oil painting' }] }],
        generationConfig: {
          responseModalities: ['TEXT', 'IMAGE'],
          topP: 0.9,
          imageConfig: { aspectRatio: '16:9', imageSize: '2K' },
        },
        tools: [{ googleSearch: {} }],
        systemInstruction: { parts: [{ text: 'You are a careful illustrator.' }] },
      });
      expect(req.raw).not.toContain('"output"');
    },
  );

  it("uses the configured key for a model with an {env} credential, not the caller's", async () => {
    const id = await submit('g-env', body);
    expect((await finish(id)).status).toBe('succeeded');
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0].path).toBe('/v1beta/models/g-env:generateContent');
    expect(fake.requests[0].headers['x-goog-api-key']).toBe(CONFIGURED_KEY);
    expect(fake.requests[0].raw).not.toContain(KEY_A);
  });

  it('masks a key the upstream echoes in its error message', async () => {
    fake.enqueue(fail(400, `API key ${KEY_A} is not valid for this project.`));
    const id = await submit('g-main');
    const task = await finish(id);
    expectFailed(task, 'invalid_request', 'is not valid for this project');
    expect(task.error.message).not.toContain(KEY_A);
    expect(task.error.message).toContain('[redacted]');
  });

  it('never writes an upstream key to Redis', async () => {
    // A passthrough task and a configured-key task of its own (the tests above add more).
    for (const model of ['g-main', 'g-env']) expect((await finish(await submit(model))).status).toBe('succeeded');
    expect(fake.requests.map((r) => r.headers['x-goog-api-key'])).toEqual([KEY_A, CONFIGURED_KEY]);
    const dump = await redisDump();
    expect(dump.length).toBeGreaterThan(0);
    expect(dump.some((v) => v.includes('task_'))).toBe(true);
    for (const v of dump) {
      expect(v).not.toContain(KEY_A);
      expect(v).not.toContain(CONFIGURED_KEY);
    }
  });

  it('keeps the passthrough key out of Temporal history in plain text (encrypted payloads)', async () => {
    const id = await submit('g-main');
    expect((await finish(id)).status).toBe('succeeded');
    expect(fake.requests[0].headers['x-goog-api-key']).toBe(KEY_A);
    // fetchHistory returns the payloads as stored by the server, before the codec decodes them.
    const history = await kiln.api.client.workflow.getHandle(id).fetchHistory();
    const raw = Buffer.from(proto.temporal.api.history.v1.History.encode(history).finish());
    expect(raw.includes('binary/encrypted')).toBe(true); // payloads are there, encrypted
    expect(raw.includes(KEY_A)).toBe(false);
    expect(raw.includes('a red fox in the snow')).toBe(false); // the prompt is encrypted too
  });
});

describe('gemini provider: upstream error statuses', () => {
  it.each([
    [401, 'auth_failed', 'API key not valid. Please pass a valid API key.'],
    [403, 'auth_failed', 'Permission denied: the caller does not have permission.'],
    [402, 'insufficient_balance', 'Your account balance is too low to run this request.'],
    [429, 'upstream_rate_limited', 'Resource has been exhausted (e.g. check quota).'],
    [500, 'upstream_error', 'An internal error has occurred. Please retry.'],
    [503, 'upstream_error', 'The model is overloaded. Please try again later.'],
    [400, 'invalid_request', 'Request contains an invalid argument: imageConfig.aspectRatio.'],
  ])('%i → failed/%s with the upstream message', async (status, code, message) => {
    fake.setDefault(fail(status, message, status === 429 ? { retryAfter: '30' } : {}));
    const id = await submit('g-main');
    const task = await finish(id);
    expectFailed(task, code, message);
    expect(task.error.message).toContain(String(status));
    // With no time to wait (queueTimeoutMs 0) a refusal is the task's answer: it is not resent.
    expect(fake.requests).toHaveLength(1);
  });
});

describe('gemini provider: timeouts, dropped connections, retries', () => {
  it('ends failed/upstream_timeout when the upstream answers later than timeoutMs', async () => {
    fake.setDefault(delayed(1500, ok()));
    const started = Date.now();
    const id = await submit('g-slow');
    const task = await finish(id);
    expectFailed(task, 'upstream_timeout');
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    // A timeout is final: no second request.
    expect(fake.requests).toHaveLength(1);
  });

  it('keeps a slow answer (longer than heartbeatTimeoutMs, within timeoutMs) alive through heartbeats', async () => {
    fake.setDefault(delayed(2500, ok()));
    const id = await submit('g-main');
    const task = await finish(id);
    expect(task.status).toBe('succeeded');
    expect(fake.requests).toHaveLength(1);
    expect(await lastActivityAttempt(id)).toBe(1);
  });

  it('ends uncertain, never resending, when the worker goes away after a non-idempotent dispatch', async () => {
    fake.setDefault(delayed(4000, ok()));
    const id = await submit('g-main');
    await fake.nextRequest();
    await kiln.stopWorker(); // the attempt in flight is cancelled; its answer is never read
    await kiln.startWorker();
    const task = await finish(id);
    expect(task.status).toBe('uncertain');
    expect(task.error).toBeNull();
    expect(typeof task.uncertain_reason).toBe('string');
    expect(fake.requests).toHaveLength(1);
  });

  it(
    'ends uncertain when the only attempt (maxAttempts 1) is ' + 'lost with its worker after a non-idempotent dispatch',
    async () => {
      fake.setDefault(delayed(4000, ok()));
      const id = await submit('g-once');
      await fake.nextRequest();
      await kiln.stopWorker();
      await kiln.startWorker();
      const task = await finish(id);
      expect(task.status).toBe('uncertain');
      expect(task.error).toBeNull();
      expect(task.candidates).toBeNull();
      expect(task.uncertain_reason).toContain('shutting down');
      expect(fake.requests).toHaveLength(1);
    },
  );

  it(
    'ends uncertain, never resending, when a non-idempotent ' + 'upstream drops the connection after dispatch',
    async () => {
      fake.setDefault(drop());
      const id = await submit('g-main');
      const arrived = await fake.nextRequest();
      expect(arrived.path).toBe('/v1beta/models/gemini-fake-image:generateContent');
      const task = await finish(id);
      expect(task.status).toBe('uncertain');
      expect(task.error).toBeNull();
      expect(task.candidates).toBeNull();
      expect(Number.isInteger(task.finished_at)).toBe(true);
      expect(typeof task.uncertain_reason).toBe('string');
      expect(task.uncertain_reason.length).toBeGreaterThan(0);
      expect(fake.requests).toHaveLength(1);
      expect(await lastActivityAttempt(id)).toBe(1);
      const content = await api()(`/v1/tasks/${id}/content`);
      expect(content.status).toBe(409);
    },
  );

  it('retries an idempotent upstream after a dropped connection, with the task id as idempotency key', async () => {
    fake.enqueue(
      drop(),
      ok([{ inlineData: { mimeType: 'image/png', data: TINY_PNG.toString('base64') } }], { responseId: 'second-try' }),
    );
    const id = await submit('g-idem');
    const task = await finish(id);
    expect(task.status).toBe('succeeded');
    expect(task.response_id).toBe('second-try');
    expect(fake.requests).toHaveLength(2);
    for (const r of fake.requests) expect(r.headers['idempotency-key']).toBe(id);
    expect(fake.requests[1].body).toEqual(fake.requests[0].body);
    expect(await lastActivityAttempt(id)).toBe(2);
  });

  it('a refused connection (nothing dispatched) with no time to wait fails with upstream_error, not uncertain', async () => {
    const id = await submit('g-refused');
    const task = await finish(id);
    expectFailed(task, 'upstream_error', 'ECONNREFUSED');
    // Not Temporal's retry: the workflow decides whether to wait and send again (queueTimeoutMs).
    expect(await lastActivityAttempt(id)).toBe(1);
    expect(fake.requests).toHaveLength(0);
  });
});
