// Channel health and capacity are the deployment's (Redis), seen the same by every worker process:
// a failing channel cools down and later tasks skip it without a request, then one task probes it
// and it is used again; a 429's Retry-After cools it for that long; a channel's concurrency holds
// across two worker processes; a task waiting for room stays queued and is canceled at once; with
// every channel cooling down a task waits at most the model's queue timeout; and a worker killed
// mid-call on a non-idempotent channel leaves the task uncertain without calling another channel.
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { RedisChannelState } from '../../../src/channels/redis-state.js';
import { fail, ok, startFakeGemini, type FakeGemini } from '../providers/gemini/fake-gemini.js';
import { eventually, imageSteps, startKiln, type Kiln } from '../../support/kiln.js';
import { killChild, workerChild } from '../../support/worker-child.js';

const fakes: Record<string, FakeGemini> = {};
const children: ChildProcess[] = [];
let kiln: Kiln;

const channel = (id: string, priority: number, over: Record<string, unknown> = {}) => ({
  id,
  provider: 'gemini',
  baseUrl: fakes[id]!.baseUrl,
  priority,
  ...over,
});
const model = (id: string, channels: unknown[], over: Record<string, unknown> = {}) => ({
  id,
  kind: 'image',
  timeoutMs: 5000,
  heartbeatTimeoutMs: 1000,
  ...over,
  channels,
});

beforeAll(async () => {
  for (const id of ['cool', 'ra', 'spare', 'cap', 'one', 'e1', 'e2']) fakes[id] = await startFakeGemini();
  kiln = await startKiln({
    models: [
      model('m-cool', [
        // A minute, so the tasks run while it cools never outlast it; the test then ends it itself.
        channel('cool', 2, { cooldownAfter: 2, cooldownMs: 60_000 }),
        channel('spare', 1, { cooldownAfter: 1000 }),
      ]),
      model('m-ra', [channel('ra', 2, { cooldownAfter: 1000 }), channel('spare', 1, { cooldownAfter: 1000 })]),
      model('m-cap', [channel('cap', 0, { concurrency: 2 })]),
      model('m-one', [channel('one', 0, { concurrency: 1 })], { queueTimeoutMs: 300 }),
      model(
        'm-allcool',
        [
          channel('e1', 2, { cooldownAfter: 1, cooldownMs: 60_000 }),
          channel('e2', 1, { cooldownAfter: 1, cooldownMs: 60_000 }),
        ],
        { queueTimeoutMs: 2000 },
      ),
    ],
  });
  // A second worker process: what one channel allows must hold for both.
  await workerChild(kiln.env, (c) => children.push(c));
}, 60_000);
afterAll(async () => {
  for (const c of children) await killChild(c);
  await kiln?.stop();
  await Promise.all(Object.values(fakes).map((f) => f.close()));
});
beforeEach(() => Object.values(fakes).forEach((f) => f.reset()));

const { submit, finish, until, api } = imageSteps(() => kiln.baseUrl);
const run = async (m: string) => (await finish(await submit(m))) as unknown as { status: string; channel: string };
let channelState: RedisChannelState | undefined;
/** A channel's state hash in Redis (src/channels/redis-state.ts): `until` is its cool-down's end (ms). */
const stateKey = (model: string, ch: string) =>
  (channelState ??= new RedisChannelState(kiln.api.redis, kiln.config.redisPrefix)).keys({ model, channel: ch }).state;
const coolingUntil = async (model: string, ch: string) =>
  Number(await kiln.api.redis.hget(stateKey(model, ch), 'until'));
/** What the end of a cool-down does, brought forward: the next call probes the channel. */
const endCooling = async (model: string, ch: string) =>
  void (await kiln.api.redis.hset(stateKey(model, ch), 'until', Date.now() - 1));

describe('health, shared by every worker', () => {
  it('a channel failing 100 % cools down, later tasks skip it without a request, then it is probed and used again', async () => {
    const cool = fakes.cool!;
    cool.setDefault(fail(503, 'overloaded'));
    expect((await run('m-cool')).channel).toBe('spare');
    expect((await run('m-cool')).channel).toBe('spare');
    expect(cool.requests).toHaveLength(2);
    // Cooling down: the next tasks go straight to the spare channel.
    for (let i = 0; i < 3; i++) expect((await run('m-cool')).channel).toBe('spare');
    expect(cool.requests).toHaveLength(2);
    // It recovers; once its cool-down ends (brought forward here) one task probes it.
    cool.setDefault(ok());
    const until = await coolingUntil('m-cool', 'cool');
    expect(until).toBeGreaterThan(Date.now() + 30_000);
    await endCooling('m-cool', 'cool');
    expect((await run('m-cool')).channel).toBe('cool');
    expect((await run('m-cool')).channel).toBe('cool');
    expect(cool.requests).toHaveLength(4);
  });

  it("a 429's Retry-After cools the channel for exactly that long, whatever the count", async () => {
    const ra = fakes.ra!;
    ra.enqueue(fail(429, 'slow down', { retryAfter: '60' }));
    expect((await run('m-ra')).channel).toBe('spare');
    const answered = ra.requests[0].at;
    expect((await run('m-ra')).channel).toBe('spare');
    expect(ra.requests).toHaveLength(1);
    // Cooling until a minute after the 429 (give or take the task's own steps), not the count's 1 s.
    const until = await coolingUntil('m-ra', 'ra');
    expect(until).toBeGreaterThanOrEqual(answered + 60_000);
    expect(until).toBeLessThan(Date.now() + 60_000);
    await endCooling('m-ra', 'ra');
    expect((await run('m-ra')).channel).toBe('ra');
  });
});

describe('capacity, cluster-wide', () => {
  it('two worker processes, a channel with concurrency 2, 50 tasks: the upstream never sees more than 2 at once', async () => {
    const cap = fakes.cap!;
    cap.setDefault(ok(undefined, { delayMs: 150 }));
    const ids = await Promise.all(Array.from({ length: 50 }, () => submit('m-cap')));
    const done = await Promise.all(ids.map((id) => finish(id)));
    expect(done.every((t) => t.status === 'succeeded')).toBe(true);
    expect(cap.requests).toHaveLength(50);
    expect(cap.maxInFlight).toBe(2);
  }, 60_000);

  it('a task waiting for room stays queued, and a cancel ends it at once without a request', async () => {
    const cap = fakes.cap!;
    let release!: () => void;
    const hold = new Promise((r) => (release = () => r(undefined)));
    cap.setDefault(ok(undefined, { hold }));
    const busy = [await submit('m-cap'), await submit('m-cap')];
    await cap.waitForRequests(2);
    const waiting = await submit('m-cap');
    expect((await until(waiting, 'queued')).status).toBe('queued');
    const asked = Date.now();
    expect((await api()(`/v1/tasks/${waiting}/cancel`, { method: 'POST' })).status).toBeLessThan(300);
    const ended = await finish(waiting);
    // At once: the channel stays full until release(), so a cancel the wait ignored would never end it.
    expect(Date.now() - asked).toBeLessThan(10_000);
    expect(ended).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    release();
    for (const id of busy) expect((await finish(id)).status).toBe('succeeded');
    expect(cap.requests).toHaveLength(2);
  }, 30_000);

  it('a task waiting for room (not for a cool-down) waits past the queue timeout, then runs', async () => {
    const one = fakes.one!;
    one.setDefault(ok(undefined, { delayMs: 1500 }));
    // Two worker processes: each may take one of the tasks, and the channel's one lease decides.
    const ids = [await submit('m-one'), await submit('m-one')];
    const done = await Promise.all(ids.map((id) => finish(id)));
    expect(done.map((t) => t.status)).toEqual(['succeeded', 'succeeded']);
    expect(one.maxInFlight).toBe(1);
  }, 30_000);

  it("with every channel cooling down a task waits queued at most the model's queue timeout, then fails with the last refusal's code", async () => {
    fakes.e1!.setDefault(fail(503, 'e1 unavailable'));
    fakes.e2!.setDefault(fail(401, 'e2 key revoked'));
    const first = await run('m-allcool');
    expect(first).toMatchObject({ status: 'failed', error: { code: 'auth_failed' } });
    const id = await submit('m-allcool');
    await until(id, 'queued');
    const t0 = Date.now();
    const ended = await finish(id);
    expect(Date.now() - t0).toBeGreaterThan(1000);
    expect(ended).toMatchObject({ status: 'failed', error: { code: 'auth_failed' } });
    expect(ended.error!.message).toMatch(/cooling down/);
    expect([fakes.e1!.requests.length, fakes.e2!.requests.length]).toEqual([1, 1]);
  }, 30_000);
});

describe('a worker killed mid-call', () => {
  let k: Kiln;
  let first: FakeGemini;
  let second: FakeGemini;
  beforeAll(async () => {
    [first, second] = await Promise.all([startFakeGemini(), startFakeGemini()]);
    const ch = (f: FakeGemini, id: string, priority: number) => ({
      id,
      provider: 'gemini',
      baseUrl: f.baseUrl,
      priority,
    });
    k = await startKiln({
      workers: false,
      models: [model('m-kill', [ch(first, 'first', 2), ch(second, 'second', 1)])],
    });
  });
  afterAll(async () => {
    await k?.stop();
    await Promise.all([first?.close(), second?.close()]);
  });

  it('on a non-idempotent channel: the task ends uncertain and no second channel is ever called', async () => {
    first.setDefault(ok(undefined, { hold: new Promise(() => undefined) }));
    const child = await workerChild(k.env, (c) => children.push(c));
    const steps = imageSteps(() => k.baseUrl);
    const id = await steps.submit('m-kill');
    await first.waitForRequests(1);
    await killChild(child);
    await k.startWorker();
    const ended = await steps.finish(id);
    expect(ended.status).toBe('uncertain');
    expect(ended).toMatchObject({ channel: 'first' });
    await eventually(
      async () => second.requests.length + first.requests.length,
      (n) => n === 1,
      2000,
    );
    expect(second.requests).toHaveLength(0);
  }, 60_000);
});
