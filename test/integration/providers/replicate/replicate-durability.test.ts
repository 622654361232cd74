// A worker killed with SIGKILL while a Replicate prediction runs (image and video): the next worker
// resumes checking the same prediction, and Replicate never sees a second create.
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killChild, workerChild } from '../../../support/worker-child.js';
import {
  eventually,
  http,
  KEY_A,
  startKiln,
  submitBody,
  waitForStatus,
  TERMINAL,
  type Kiln,
} from '../../../support/kiln.js';
import { DONE } from '../../video/video-kiln.js';
import { startFakeReplicate, type FakeReplicate } from './fake-replicate.js';

let fake: FakeReplicate;
let kiln: Kiln;
const children: ChildProcess[] = [];

beforeAll(async () => {
  fake = await startFakeReplicate();
  const rep = {
    provider: 'replicate',
    baseUrl: fake.baseUrl,
    pollIntervalMs: 200,
    heartbeatTimeoutMs: 1000,
    timeoutMs: 5000,
  };
  kiln = await startKiln({
    workers: false,
    models: [
      {
        ...rep,
        id: 'flux',
        upstreamModel: 'black-forest-labs/flux-schnell',
        imageSizes: [],
        overallTimeoutMs: 120_000,
      },
      { ...rep, id: 'seedance', kind: 'video', upstreamModel: 'bytedance/seedance-1-pro', overallTimeoutMs: 120_000 },
    ],
  });
}, 120_000);
afterAll(async () => {
  for (const c of children) await killChild(c);
  await kiln?.stop();
  await fake?.close();
});

const worker = () => workerChild(kiln.env, (c) => children.push(c));
const api = () => http(kiln.baseUrl, KEY_A);

/** Kills the worker once the prediction has been read, starts another, and returns when the task ended. */
async function killMidJob(first: ChildProcess, done: () => Promise<{ status: string }>) {
  await eventually(
    async () => fake.reads().length,
    (n) => n > 0,
    20_000,
  );
  await killChild(first);
  const readsAtKill = fake.reads().length;
  await worker();
  const end = await done();
  return { end, readsAtKill };
}

describe('replicate: a worker killed mid-job', () => {
  it('image: the job resumes on the next worker, with one create', async () => {
    fake.reset();
    // Long enough to outlive the kill: each read is one step.
    fake.setScript([...Array<string>(12).fill('processing'), 'succeeded']);
    const first = await worker();
    const res = await api()('/v1beta/models/flux:generateContent', { method: 'POST', json: submitBody('durable fox') });
    expect(res.status).toBe(202);
    const id = res.json.id as string;
    const { end, readsAtKill } = await killMidJob(first, () =>
      waitForStatus(() => api()(`/v1/tasks/${id}`), TERMINAL, 60_000),
    );
    expect(end).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(fake.creates()).toHaveLength(1);
    expect(fake.reads().length).toBeGreaterThan(readsAtKill);
    expect(new Set(fake.reads().map((r) => r.path)).size).toBe(1);
  }, 90_000);

  it('video: the job resumes on the next worker, with one create', async () => {
    fake.reset();
    fake.setScript([...Array<string>(12).fill('processing:50'), 'succeeded']);
    const first = await worker();
    const res = await api()('/v1/videos', { method: 'POST', json: { model: 'seedance', prompt: 'a durable heron' } });
    expect(res.status).toBe(200);
    const id = res.json.id as string;
    const { end, readsAtKill } = await killMidJob(first, () =>
      waitForStatus(() => api()(`/v1/videos/${id}`), DONE, 60_000),
    );
    expect(end).toMatchObject({ status: 'completed' });
    expect(fake.creates()).toHaveLength(1);
    expect(fake.reads().length).toBeGreaterThan(readsAtKill);
  }, 90_000);
});
