// A worker killed with SIGKILL while a DashScope job runs (image and video): the next worker picks
// the job up where the workflow's history left it, checks the same task id and finishes it, and
// DashScope never sees a second create.
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeDashScope, type FakeDashScope } from './fake-dashscope.js';
import { eventually, http, startKiln, submitBody, TERMINAL, waitForStatus, type Kiln } from '../../../support/kiln.js';
import { killChild, workerChild } from '../../../support/worker-child.js';

let fake: FakeDashScope;
let kiln: Kiln;
const children: ChildProcess[] = [];

beforeAll(async () => {
  fake = await startFakeDashScope();
  const common = {
    provider: 'dashscope',
    baseUrl: fake.baseUrl,
    pollIntervalMs: 100,
    heartbeatTimeoutMs: 1000,
    timeoutMs: 5000,
  };
  kiln = await startKiln({
    workers: false,
    models: [
      { ...common, id: 'wan', upstreamModel: 'wan2.2-t2i-flash', overallTimeoutMs: 120_000 },
      { ...common, id: 'wan-t2v', kind: 'video', upstreamModel: 'wan2.5-t2v-preview' },
    ],
  });
});
afterAll(async () => {
  for (const c of children) await killChild(c);
  await kiln?.stop();
  await fake?.close();
});

const worker = () => workerChild(kiln.env, (c) => children.push(c));

describe('dashscope jobs survive a worker killed with SIGKILL', () => {
  it('image and video: the job resumes on the next worker, with one create each', async () => {
    // Each task runs until the test lets it finish: the script array is read live by the fake.
    const script = ['running'];
    fake.setScript(script);
    const first = await worker();
    const call = http(kiln.baseUrl);
    const image = await call('/v1beta/models/wan:generateContent', {
      method: 'POST',
      json: submitBody('a durable fox'),
    });
    expect(image.status, image.text).toBe(202);
    const video = await call('/v1/videos', { method: 'POST', json: { model: 'wan-t2v', prompt: 'a durable heron' } });
    expect(video.status, video.text).toBe(200);
    await eventually(
      async () => new Set(fake.reads().map((r) => r.path)).size,
      (n) => n === 2,
    );
    await killChild(first);
    const readsBefore = fake.reads().length;
    await worker();
    await eventually(
      async () => fake.reads().length,
      (n) => n > readsBefore,
    );
    script.push('succeeded');
    const img = await waitForStatus(() => call(`/v1/tasks/${image.json.id}`), TERMINAL, 45_000);
    expect(img.status, JSON.stringify(img.error)).toBe('succeeded');
    const vid = await waitForStatus(
      () => call(`/v1/videos/${video.json.id}`),
      (s) => s === 'completed' || s === 'failed',
      45_000,
    );
    expect(vid.status, JSON.stringify(vid.error)).toBe('completed');
    expect(fake.creates()).toHaveLength(2);
  }, 120_000);
});
