// A worker killed with SIGKILL while a Seedance task runs: the next worker picks the job up where the
// workflow's history left it, checks the same task id and finishes it, and Ark never sees a second create.
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeSeedance, type FakeSeedance } from './fake-seedance.js';
import { eventually, http, startKiln, waitForStatus, type Kiln } from '../../../support/kiln.js';
import { killChild, workerChild } from '../../../support/worker-child.js';

let fake: FakeSeedance;
let kiln: Kiln;
const children: ChildProcess[] = [];

beforeAll(async () => {
  fake = await startFakeSeedance();
  kiln = await startKiln({
    workers: false,
    models: [
      {
        id: 'sd',
        kind: 'video',
        provider: 'seedance',
        baseUrl: fake.baseUrl,
        upstreamModel: 'doubao-seedance-1-0-pro-250528',
        pollIntervalMs: 100,
        heartbeatTimeoutMs: 1000,
        timeoutMs: 5000,
      },
    ],
  });
});
afterAll(async () => {
  for (const c of children) await killChild(c);
  await kiln?.stop();
  await fake?.close();
});

const worker = () => workerChild(kiln.env, (c) => children.push(c));

describe('seedance jobs survive a worker killed with SIGKILL', () => {
  it('the job resumes on the next worker, with one create', async () => {
    // The task runs until the test lets it finish: the script array is read live by the fake.
    const script = ['running'];
    fake.setScript(script);
    const first = await worker();
    const call = http(kiln.baseUrl);
    const video = await call('/v1/videos', { method: 'POST', json: { model: 'sd', prompt: 'a durable heron' } });
    expect(video.status, video.text).toBe(200);
    await eventually(
      async () => fake.reads().length,
      (n) => n > 0,
    );
    await killChild(first);
    const readsBefore = fake.reads().length;
    await worker();
    await eventually(
      async () => fake.reads().length,
      (n) => n > readsBefore,
    );
    script.push('succeeded');
    const vid = await waitForStatus(
      () => call(`/v1/videos/${video.json.id}`),
      (s) => s === 'completed' || s === 'failed',
      45_000,
    );
    expect(vid.status, JSON.stringify(vid.error)).toBe('completed');
    expect(fake.creates()).toHaveLength(1);
    expect(new Set(fake.reads().map((r) => r.path)).size).toBe(1);
  }, 120_000);
});
