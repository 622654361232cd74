// A worker killed with SIGKILL while a Kling task runs: the next worker picks the job up where the
// workflow's history left it, queries the same Kling task id and finishes it, and Kling never sees
// a second create.
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeKling, type FakeKling } from './fake-kling.js';
import { eventually, http, startKiln, waitForStatus, type Kiln } from '../../../support/kiln.js';
import { killChild, workerChild } from '../../../support/worker-child.js';
import { DONE } from '../../video/video-kiln.js';

let fake: FakeKling;
let kiln: Kiln;
const children: ChildProcess[] = [];

beforeAll(async () => {
  fake = await startFakeKling();
  kiln = await startKiln({
    workers: false,
    env: { KLING_KEYS: `${fake.accessKey}:${fake.secretKey}` },
    models: [
      {
        id: 'kling',
        kind: 'video',
        provider: 'kling',
        baseUrl: fake.baseUrl,
        upstreamModel: 'kling-v2-1-master',
        credential: { env: 'KLING_KEYS' },
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

describe('kling jobs survive a worker killed with SIGKILL', () => {
  it('the job resumes on the next worker, querying the same task, with one create', async () => {
    // The task runs until the test lets it finish: the script array is read live by the fake.
    const script = ['processing'];
    fake.setScript(script);
    const first = await worker();
    const call = http(kiln.baseUrl);
    const video = await call('/v1/videos', { method: 'POST', json: { model: 'kling', prompt: 'a durable heron' } });
    expect(video.status, video.text).toBe(200);
    await eventually(
      async () => fake.queries().length,
      (n) => n > 0,
    );
    await killChild(first);
    const queriesBefore = fake.queries().length;
    await worker();
    await eventually(
      async () => fake.queries().length,
      (n) => n > queriesBefore,
    );
    script.push('succeed');
    const done = await waitForStatus(() => call(`/v1/videos/${video.json.id}`), DONE, 45_000);
    expect(done.status, JSON.stringify(done.error)).toBe('completed');
    expect(fake.creates()).toHaveLength(1);
    expect(new Set(fake.queries().map((q) => q.path)).size).toBe(1);
  }, 120_000);
});
