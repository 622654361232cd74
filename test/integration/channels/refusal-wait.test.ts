// A refused call waits and is sent again instead of failing the task at once: an upstream that is
// busy (503), rate limited (429) or not reachable did not process the request, so even a
// non-idempotent channel may have it again. The task stays queued meanwhile, and fails with the
// last refusal's code once the model's queueTimeoutMs would pass. Lasting refusals (the channel's
// credential) still fail at once.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  closedPortUrl,
  fail,
  ok,
  startFakeGemini,
  fakeGeminiModel,
  type FakeGemini,
} from '../providers/gemini/fake-gemini.js';
import { startKiln, imageSteps, eventually, type Kiln } from '../../support/kiln.js';

let fake: FakeGemini;
let kiln: Kiln;

beforeAll(async () => {
  fake = await startFakeGemini();
  const gemini = fakeGeminiModel(fake);
  kiln = await startKiln({
    models: [
      { ...gemini, id: 'r-one', idempotent: false, maxAttempts: 1, queueTimeoutMs: 20_000 },
      { ...gemini, id: 'r-short', idempotent: false, maxAttempts: 1, queueTimeoutMs: 2_500 },
      { ...gemini, id: 'r-closed', baseUrl: await closedPortUrl(), idempotent: false, queueTimeoutMs: 2_500 },
      {
        id: 'r-two',
        kind: 'image',
        queueTimeoutMs: 20_000,
        channels: [
          { ...gemini, id: 'a', idempotent: false, cooldownAfter: 1000 },
          { ...gemini, id: 'b', idempotent: false, cooldownAfter: 1000 },
        ],
      },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await fake?.close();
});
beforeEach(() => fake.reset());

const { submit, finish, status, api } = imageSteps(() => kiln.baseUrl);
const gaps = () => fake.requests.slice(1).map((r, i) => r.at - fake.requests[i]!.at);

describe('a refused call waits and is sent again', () => {
  it('503 "overloaded" twice, then an image: the task succeeds, queued while it waits', async () => {
    fake.enqueue(fail(503, 'The model is overloaded. Please try again later.'));
    fake.enqueue(fail(503, 'The model is overloaded. Please try again later.'));
    fake.enqueue(ok());
    const id = await submit('r-one');
    await eventually(
      async () => fake.requests.length,
      (n) => n >= 1,
    );
    // Between the refusal and the next send the task is waiting its turn again.
    expect(
      await eventually(
        () => status(id),
        (s) => s === 'queued',
      ),
    ).toBe('queued');
    const task = await finish(id);
    expect(task.status).toBe('succeeded');
    expect(fake.requests).toHaveLength(3);
    // The capped doubling, jittered over its upper half: 0.5–1 s, then 1–2 s.
    const [first, second] = gaps();
    expect(first).toBeGreaterThanOrEqual(450);
    expect(second).toBeGreaterThanOrEqual(950);
  });

  it("honours a 503's Retry-After", async () => {
    fake.enqueue(fail(503, 'Service unavailable', { retryAfter: '2' }));
    fake.enqueue(ok());
    const task = await finish(await submit('r-one'));
    expect(task.status).toBe('succeeded');
    expect(fake.requests).toHaveLength(2);
    expect(gaps()[0]).toBeGreaterThanOrEqual(1950);
  });

  it('fails with the last refusal’s code once the queue timeout would pass', async () => {
    fake.setDefault(fail(429, 'Resource has been exhausted (e.g. check quota).'));
    const started = Date.now();
    const task = await finish(await submit('r-short'));
    expect(task.status).toBe('failed');
    expect(task.error.code).toBe('upstream_rate_limited');
    expect(task.error.message).toContain('queue timeout');
    expect(fake.requests.length).toBeGreaterThan(1);
    // Never past the queue timeout by more than a send and the bookkeeping.
    expect(Date.now() - started).toBeLessThan(2_500 + 5_000);
  });

  it('a refused connection (nothing sent) waits too, then fails upstream_error', async () => {
    const task = await finish(await submit('r-closed'));
    expect(task.status).toBe('failed');
    expect(task.error.code).toBe('upstream_error');
    expect(task.error.message).toContain('queue timeout');
  });

  it("a lasting refusal (the channel's credential) fails at once, sent once", async () => {
    fake.setDefault(fail(401, 'API key not valid.'));
    const task = await finish(await submit('r-one'));
    expect(task.status).toBe('failed');
    expect(task.error.code).toBe('auth_failed');
    expect(fake.requests).toHaveLength(1);
  });

  it('every channel refusing: the task waits, then goes to whichever channel takes it', async () => {
    fake.enqueue(fail(503, 'overloaded'));
    fake.enqueue(fail(503, 'overloaded'));
    fake.enqueue(ok());
    const task = await finish(await submit('r-two'));
    expect(task.status).toBe('succeeded');
    expect(fake.requests).toHaveLength(3);
    // Both channels were tried before the wait.
    expect(gaps()[0]).toBeLessThan(450);
    expect(gaps()[1]).toBeGreaterThanOrEqual(450);
  });

  it('a cancel while the task waits ends it canceled; the upstream never processed it', async () => {
    fake.setDefault(fail(503, 'overloaded'));
    const id = await submit('r-one');
    await eventually(
      async () => fake.requests.length,
      (n) => n >= 1,
    );
    const res = await api()(`/v1/tasks/${id}/cancel`, { method: 'POST' });
    expect(res.status).toBeLessThan(300);
    const task = await finish(id);
    expect(task.status).toBe('failed');
    expect(task.error.code).toBe('canceled');
    expect(task.error.message).not.toMatch(/may still be billed|may have reached/);
  });
});
