// fal jobs survive their worker: a worker process killed with SIGKILL while fal runs an image and a
// video job; another worker picks the tasks up, checks the same requests at their stored URLs and
// finishes them, and fal never sees a second submit (fal takes no client id: one would be a
// second, billed generation).
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeFal, type FakeFal } from './fake-fal.js';
import { http, startKiln, TERMINAL, waitForStatus, submitBody, type Kiln } from '../../../support/kiln.js';
import { killChild, workerChild } from '../../../support/worker-child.js';
import { DONE } from '../../video/video-kiln.js';

let fake: FakeFal;
let kiln: Kiln;
const children: ChildProcess[] = [];

beforeAll(async () => {
  fake = await startFakeFal();
  const fal = { provider: 'fal', baseUrl: fake.baseUrl, heartbeatTimeoutMs: 1000, pollIntervalMs: 200 };
  kiln = await startKiln({
    workers: false,
    models: [
      { ...fal, id: 'fal-img', upstreamModel: 'fal-ai/flux/dev', overallTimeoutMs: 120_000 },
      { ...fal, id: 'fal-vid', kind: 'video', upstreamModel: 'fal-ai/kling-video/v2/master/text-to-video' },
    ],
  });
});
afterAll(async () => {
  for (const c of children) await killChild(c);
  await kiln?.stop();
  await fake?.close();
});

describe('fal durability', () => {
  it('a worker killed mid-job: the jobs resume on another worker, with one submit each', async () => {
    const api = http(kiln.baseUrl);
    fake.holding = true;
    fake.setScript(['queued', 'hold', 'done']);
    const first = await workerChild(kiln.env, (c) => children.push(c));
    const img = await api('/v1beta/models/fal-img:generateContent', { method: 'POST', json: submitBody('kept') });
    const vid = await api('/v1/videos', { method: 'POST', json: { model: 'fal-vid', prompt: 'kept too' } });
    expect([img.status, vid.status]).toEqual([202, 200]);
    // Both jobs are at fal and have been checked: the kill lands between checks or inside one.
    await waitForStatus(
      async () => ({ json: { status: String(new Set(fake.statusReads().map((r) => r.path)).size) } }),
      (n) => Number(n) >= 2,
    );
    await killChild(first);
    expect((await api(`/v1/tasks/${img.json.id}`)).json.status).toBe('running');
    fake.holding = false;
    await workerChild(kiln.env, (c) => children.push(c));
    const image = await waitForStatus(() => api(`/v1/tasks/${img.json.id}`), TERMINAL, 45_000);
    const video = await waitForStatus(() => api(`/v1/videos/${vid.json.id}`), DONE, 45_000);
    expect(image.status, JSON.stringify(image.error)).toBe('succeeded');
    expect(video.status, JSON.stringify(video.error)).toBe('completed');
    expect(fake.submits()).toHaveLength(2);
    expect(
      fake
        .submits()
        .map((r) => r.path)
        .sort(),
    ).toEqual(['/fal-ai/flux/dev', '/fal-ai/kling-video/v2/master/text-to-video']);
  }, 90_000);
});
