// A worker killed with SIGKILL while a Runway task runs: the next worker picks the job up where
// the workflow's history left it, checks the same task id and finishes it, and Runway never sees a
// second create (which would be a second paid generation).
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeRunway, type FakeRunway } from './fake-runway.js';
import { eventually, http, startKiln, waitForStatus, type Kiln } from '../../../support/kiln.js';
import { killChild, workerChild } from '../../../support/worker-child.js';

let fake: FakeRunway;
let kiln: Kiln;
const children: ChildProcess[] = [];

beforeAll(async () => {
  fake = await startFakeRunway();
  kiln = await startKiln({
    workers: false,
    models: [
      {
        id: 'gen45',
        kind: 'video',
        provider: 'runway',
        baseUrl: fake.baseUrl,
        upstreamModel: 'gen4.5',
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

describe('runway jobs survive a worker killed with SIGKILL', () => {
  it('the task resumes on the next worker, with one create', async () => {
    // The task runs until the test lets it finish: the script array is read live by the fake.
    const script = ['throttled', 'running:0.3'];
    fake.setScript(script);
    const first = await worker();
    const call = http(kiln.baseUrl);
    const video = await call('/v1/videos', { method: 'POST', json: { model: 'gen45', prompt: 'a durable heron' } });
    expect(video.status, video.text).toBe(200);
    await eventually(
      async () => fake.reads().length,
      (n) => n >= 2,
    );
    await killChild(first);
    const readsBefore = fake.reads().length;
    await worker();
    await eventually(
      async () => fake.reads().length,
      (n) => n > readsBefore,
    );
    script.push('succeeded');
    const v = await waitForStatus(
      () => call(`/v1/videos/${video.json.id}`),
      (s) => s === 'completed' || s === 'failed',
      45_000,
    );
    expect(v.status, JSON.stringify(v.error)).toBe('completed');
    expect(fake.creates()).toHaveLength(1);
    expect(new Set(fake.reads().map((r) => r.path)).size).toBe(1);
  }, 120_000);
});
