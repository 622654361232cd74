// A worker killed with SIGKILL while a MiniMax video task runs: the next worker picks the job up
// where the workflow's history left it, queries the same task id and finishes it, and MiniMax never
// sees a second create.
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeMinimax, type FakeMinimax } from './fake-minimax.js';
import { eventually, http, startKiln, waitForStatus, type Kiln } from '../../../support/kiln.js';
import { killChild, workerChild } from '../../../support/worker-child.js';

let fake: FakeMinimax;
let kiln: Kiln;
const children: ChildProcess[] = [];

beforeAll(async () => {
  fake = await startFakeMinimax();
  kiln = await startKiln({
    workers: false,
    models: [
      {
        id: 'hailuo',
        kind: 'video',
        provider: 'minimax',
        baseUrl: fake.baseUrl,
        upstreamModel: 'MiniMax-Hailuo-2.3',
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

describe('minimax jobs survive a worker killed with SIGKILL', () => {
  it('the job resumes on the next worker, with one create', async () => {
    // The task runs until the test lets it finish: the script array is read live by the fake.
    const script = ['processing'];
    fake.setScript(script);
    const first = await worker();
    const call = http(kiln.baseUrl);
    const video = await call('/v1/videos', { method: 'POST', json: { model: 'hailuo', prompt: 'a durable heron' } });
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
      30_000,
    );
    script.push('success');
    const vid = await waitForStatus(
      () => call(`/v1/videos/${video.json.id}`),
      (s) => s === 'completed' || s === 'failed',
      45_000,
    );
    expect(vid.status, JSON.stringify(vid.error)).toBe('completed');
    expect(fake.creates()).toHaveLength(1);
    expect(new Set(fake.reads().map((r) => r.query.get('task_id'))).size).toBe(1);
    expect(fake.downloads()).toHaveLength(1);
  }, 120_000);
});
