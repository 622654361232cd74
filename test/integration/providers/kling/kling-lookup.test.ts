// A Kling create whose answer never came back, found again by the external_task_id Kiln gave it
// (its task id), through the lookup kernel (activities/lookup.ts):
//   - found (Kling made the task): the task goes on with it, one create, not uncertain;
//   - absent (Kling never received the create): created once more, Kling holds one task;
//   - Kling unreachable for the lookups: `uncertain` after a bound, still one create;
//   - a worker killed with SIGKILL while its create was in flight: the next one finds the task.
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { drop, fail, ok, startFakeKling, type FakeKling } from './fake-kling.js';
import { eventually, startKiln, type Kiln } from '../../../support/kiln.js';
import { killChild, workerChild } from '../../../support/worker-child.js';
import { videoApi } from '../../video/video-kiln.js';

let fake: FakeKling;
/** `timeoutMs` bounds one attempt, lookups included: the patient one outlasts the lookup's retries (about 8 s). */
const kling = (id: string, timeoutMs: number) => ({
  id,
  kind: 'video',
  provider: 'kling',
  baseUrl: fake.baseUrl,
  upstreamModel: 'kling-v2-1-master',
  credential: { env: 'KLING_KEYS' },
  pollIntervalMs: 100,
  heartbeatTimeoutMs: 1000,
  timeoutMs,
  maxAttempts: 3,
  queueTimeoutMs: 0,
});
let kiln: Kiln;
const children: ChildProcess[] = [];

beforeAll(async () => {
  fake = await startFakeKling();
  kiln = await startKiln({
    workers: false,
    env: { KLING_KEYS: `${fake.accessKey}:${fake.secretKey}` },
    models: [kling('kling', 5000), kling('kling-patient', 20_000)],
  });
  await worker();
});
afterAll(async () => {
  for (const c of children) await killChild(c);
  await kiln?.stop();
  await fake?.close();
});
beforeEach(() => fake.reset());

const worker = () => workerChild(kiln.env, (c) => children.push(c));
const v = () => videoApi(kiln);
const isLookup = (path: string) => /^\/v1\/videos\/\w+\/video_/.test(path);

describe('kling lost create answers, looked up by external_task_id', () => {
  it('found: the task goes on with the task Kling made; one create, not uncertain', async () => {
    const before = fake.taskCount();
    fake.enqueueCreate(drop(true));
    const id = await v().createOk({ model: 'kling', prompt: 'a lost answer' });
    const done = await v().finish(id, 60_000);
    expect(done, JSON.stringify(done.error)).toMatchObject({ status: 'completed' });
    expect(fake.creates()).toHaveLength(1);
    expect(fake.taskCount() - before).toBe(1);
    expect(fake.lookups().map((q) => q.path)).toContain(`/v1/videos/text2video/${id}`);
  }, 90_000);

  it('absent: a create Kling never received is sent once more; Kling holds one task', async () => {
    const before = fake.taskCount();
    fake.enqueueCreate(drop(false));
    const id = await v().createOk({ model: 'kling', prompt: 'never received' });
    const done = await v().finish(id, 60_000);
    expect(done, JSON.stringify(done.error)).toMatchObject({ status: 'completed' });
    expect(fake.creates()).toHaveLength(2);
    expect(fake.creates().every((c) => c.body.external_task_id === id)).toBe(true);
    expect(fake.taskCount() - before).toBe(1);
    expect(fake.lookups().length).toBeGreaterThanOrEqual(2);
  }, 90_000);

  it('Kling unreachable for the lookups: uncertain after a bound, with one create', async () => {
    fake.enqueueCreate(drop(true));
    fake.onQuery = (q) => (isLookup(q.path) ? fail(500, 5000, 'Server internal error') : undefined);
    const done = await v().finish(await v().createOk({ model: 'kling-patient', prompt: 'lookups fail' }), 90_000);
    expect(done).toMatchObject({ status: 'failed', error: { code: 'uncertain' } });
    expect(fake.creates()).toHaveLength(1);
    expect(fake.lookups().length).toBeGreaterThanOrEqual(1);
  }, 120_000);

  it('a worker killed with SIGKILL while its create was in flight: the next worker finds the task', async () => {
    fake.enqueueCreate(ok(5000));
    const id = await v().createOk({ model: 'kling', prompt: 'killed while sending' });
    await eventually(
      async () => fake.creates().length,
      (n) => n === 1,
    );
    for (const c of children) await killChild(c);
    await worker();
    const done = await v().finish(id, 60_000);
    expect(done, JSON.stringify(done.error)).toMatchObject({ status: 'completed' });
    expect(fake.creates()).toHaveLength(1);
    expect(fake.lookups().length).toBeGreaterThanOrEqual(1);
  }, 120_000);
});
