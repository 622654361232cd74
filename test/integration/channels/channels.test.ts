// Image models over several channels, each a real fake Gemini server that counts what it received:
// every row of the failover table (README, "Channels and failover"), the attempts the task and the
// Web UI show, and "exactly one request, summed over all channels" wherever the request may have
// been processed.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  closedPortUrl,
  delayed,
  drop,
  fail,
  ok,
  startFakeGemini,
  type FakeGemini,
} from '../providers/gemini/fake-gemini.js';
import { imageSteps, startKiln, type Kiln } from '../../support/kiln.js';

let a: FakeGemini;
let b: FakeGemini;
let kiln: Kiln;

/** A channel on `fake`; health never cools these down (the cool-down has its own test). */
const channel = (fake: FakeGemini | string, id: string, priority: number, over: Record<string, unknown> = {}) => ({
  id,
  provider: 'gemini',
  baseUrl: typeof fake === 'string' ? fake : fake.baseUrl,
  priority,
  cooldownAfter: 1000,
  ...over,
});

beforeAll(async () => {
  [a, b] = await Promise.all([startFakeGemini(), startFakeGemini()]);
  const down = await closedPortUrl();
  const model = (id: string, over: Record<string, unknown>, aOver: Record<string, unknown> = {}) => ({
    id,
    kind: 'image',
    credential: 'passthrough',
    timeoutMs: 3000,
    heartbeatTimeoutMs: 1000,
    maxAttempts: 3,
    ...over,
    channels: [channel(a, 'a', 2, aOver), channel(b, 'b', 1)],
  });
  kiln = await startKiln({
    models: [
      model('m', {}),
      model('m-5xx', {}, { failoverOn5xx: true }),
      model('m-idem', { idempotent: true }),
      model('m-slow', { timeoutMs: 1500 }),
      model('m-direct', { form: 'direct' }),
      model('m-inline', { inline: true, timeoutMs: 1000 }),
      { ...model('m-down', {}), channels: [channel(down, 'a', 2), channel(b, 'b', 1)] },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await Promise.all([a?.close(), b?.close()]);
});
beforeEach(() => {
  a.reset();
  b.reset();
});

const { submit, finish, api } = imageSteps(() => kiln.baseUrl);

interface Task {
  status: string;
  channel: string | null;
  attempts: number;
  error: { code: string; message: string } | null;
  uncertain_reason?: string;
}
const run = async (model: string) => (await finish(await submit(model))) as unknown as Task;

describe('moves to the next channel when the first provably did not take the work', () => {
  it('not sent (connection refused): the next channel serves it', async () => {
    const task = await run('m-down');
    expect(task).toMatchObject({ status: 'succeeded', channel: 'b', attempts: 2 });
    expect(b.requests).toHaveLength(1);
  });

  it.each([
    [429, 'RESOURCE_EXHAUSTED'],
    [503, 'UNAVAILABLE'],
    [401, 'the channel credential'],
    [403, 'the channel credential'],
    [402, 'insufficient balance'],
  ])('refused with %i: the next channel serves it, each got exactly one request', async (status, message) => {
    a.enqueue(fail(status, message));
    const task = await run('m');
    expect(task).toMatchObject({ status: 'succeeded', channel: 'b', attempts: 2 });
    expect([a.requests.length, b.requests.length]).toEqual([1, 1]);
  });

  it('the Web UI shows each attempt: the workflow current details name the channel and what it answered', async () => {
    a.enqueue(fail(429, 'slow down'));
    const id = await submit('m');
    await finish(id);
    const meta = (await kiln.api.client.workflow.getHandle(id).query('__temporal_workflow_metadata')) as {
      currentDetails?: string;
    };
    expect(meta.currentDetails).toMatch(/^attempt 1 a: upstream_rate_limited .*slow down/);
  });

  it('every channel refused: the task fails with the code of the last refusal', async () => {
    a.enqueue(fail(429, 'rate'));
    b.enqueue(fail(402, 'no balance left'));
    const task = await run('m');
    expect(task.status).toBe('failed');
    expect(task.error).toMatchObject({ code: 'insufficient_balance' });
    expect(task.error!.message).toContain('no balance left');
    expect([a.requests.length, b.requests.length]).toEqual([1, 1]);
    expect(task).toMatchObject({ channel: 'b', attempts: 2 });
  });
});

describe('stays on the channel when the request may have been processed', () => {
  it('a 500 from a non-idempotent channel fails the task; no other channel is called', async () => {
    a.enqueue(fail(500, 'internal'));
    const task = await run('m');
    expect(task).toMatchObject({ status: 'failed', channel: 'a' });
    expect(task.error?.code).toBe('upstream_error');
    expect([a.requests.length, b.requests.length]).toEqual([1, 0]);
  });

  it.each([502, 504])('%i likewise', async (status) => {
    a.enqueue(fail(status, 'gateway'));
    const task = await run('m');
    expect(task.status).toBe('failed');
    expect([a.requests.length, b.requests.length]).toEqual([1, 0]);
  });

  it("failoverOn5xx (the operator's choice, may bill twice): a 500 moves to the next channel", async () => {
    a.enqueue(fail(500, 'internal'));
    const task = await run('m-5xx');
    expect(task).toMatchObject({ status: 'succeeded', channel: 'b', attempts: 2 });
    expect([a.requests.length, b.requests.length]).toEqual([1, 1]);
  });

  it('an idempotent channel answering 500 is retried on itself with the same Idempotency-Key', async () => {
    a.enqueue(fail(500, 'internal'));
    const id = await submit('m-idem');
    const task = (await finish(id)) as unknown as Task;
    expect(task).toMatchObject({ status: 'succeeded', channel: 'a', attempts: 2 });
    expect([a.requests.length, b.requests.length]).toEqual([2, 0]);
    expect(a.requests.map((r) => r.headers['idempotency-key'])).toEqual([id, id]);
  });

  it("the caller's fault (400): the task fails invalid_request; no other channel is called", async () => {
    a.enqueue(fail(400, 'bad prompt'));
    const task = await run('m');
    expect(task).toMatchObject({ status: 'failed', error: { code: 'invalid_request' } });
    expect([a.requests.length, b.requests.length]).toEqual([1, 0]);
  });

  it('ambiguous on a non-idempotent channel (dropped after sending): uncertain, exactly one request in all', async () => {
    a.enqueue(drop());
    const task = await run('m');
    expect(task).toMatchObject({ status: 'uncertain', channel: 'a' });
    expect(a.requests.length + b.requests.length).toBe(1);
  });

  it('ambiguous on a non-idempotent channel (timeout): failed upstream_timeout, exactly one request in all', async () => {
    a.enqueue(delayed(4000, ok()));
    const task = await run('m-slow');
    expect(task).toMatchObject({ status: 'failed', error: { code: 'upstream_timeout' }, channel: 'a' });
    expect(a.requests.length + b.requests.length).toBe(1);
  });

  it('ambiguous on an idempotent channel: resent on that channel only, with the same Idempotency-Key', async () => {
    a.enqueue(drop());
    const id = await submit('m-idem');
    const task = (await finish(id)) as unknown as Task;
    expect(task).toMatchObject({ status: 'succeeded', channel: 'a' });
    expect([a.requests.length, b.requests.length]).toEqual([2, 0]);
    expect(a.requests.map((r) => r.headers['idempotency-key'])).toEqual([id, id]);
  });
});

describe('an inline model (the call a local activity of the workflow task)', () => {
  it('moves to the next channel the same way, and a lost answer is not resent elsewhere', async () => {
    a.enqueue(fail(429, 'slow down'));
    expect(await run('m-inline')).toMatchObject({ status: 'succeeded', channel: 'b', attempts: 2 });
    expect([a.requests.length, b.requests.length]).toEqual([1, 1]);
    a.reset();
    b.reset();
    a.enqueue(drop());
    expect(await run('m-inline')).toMatchObject({ status: 'uncertain', channel: 'a' });
    expect(a.requests.length + b.requests.length).toBe(1);
  });
});

describe('the direct form', () => {
  it('fails over before the first byte of its answer: a refused channel, then the answer from the next', async () => {
    a.enqueue(fail(503, 'unavailable'));
    const res = await api()('/v1beta/models/m-direct:generateContent', {
      method: 'POST',
      json: { contents: [{ parts: [{ text: 'a heron' }] }] },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.json.candidates[0].content.parts.some((p: { inlineData?: unknown }) => p.inlineData)).toBe(true);
    expect([a.requests.length, b.requests.length]).toEqual([1, 1]);
  });

  it('a dropped answer on a non-idempotent channel is not resent elsewhere: exactly one request in all', async () => {
    a.enqueue(drop());
    const res = await api()('/v1beta/models/m-direct:generateContent', {
      method: 'POST',
      json: { contents: [{ parts: [{ text: 'a crane' }] }] },
    });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(a.requests.length + b.requests.length).toBe(1);
  });
});
