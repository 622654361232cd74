// ComfyUI jobs survive their worker: a worker process killed with SIGKILL while a box runs an image
// and a video prompt; another worker picks the tasks up, checks the same prompts by their ids and
// finishes them, and the box never sees a second POST /prompt (each prompt runs once). A worker
// killed after its POST left but before the answer: the next attempt looks the prompt up first.
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeComfy, type FakeComfy } from './fake-comfyui.js';
import { IMAGE_NODES, IMAGE_WORKFLOW, VIDEO_NODES, VIDEO_WORKFLOW } from './workflows.js';
import { http, startKiln, TERMINAL, waitForStatus, submitBody, type Kiln } from '../../../support/kiln.js';
import { killChild, workerChild } from '../../../support/worker-child.js';
import { DONE } from '../../video/video-kiln.js';

let fake: FakeComfy;
let kiln: Kiln;
const children: ChildProcess[] = [];

beforeAll(async () => {
  fake = await startFakeComfy();
  const box = { provider: 'comfyui', baseUrl: fake.baseUrl, heartbeatTimeoutMs: 1000, pollIntervalMs: 200 };
  kiln = await startKiln({
    workers: false,
    models: [
      { ...box, id: 'c-img', workflowFile: IMAGE_WORKFLOW, nodes: IMAGE_NODES, overallTimeoutMs: 120_000 },
      {
        ...box,
        id: 'c-vid',
        kind: 'video',
        workflowFile: VIDEO_WORKFLOW,
        nodes: VIDEO_NODES,
        seconds: ['2'],
        sizes: ['320x180'],
      },
    ],
  });
});
afterAll(async () => {
  for (const c of children) await killChild(c);
  await kiln?.stop();
  await fake?.close();
});

describe('comfyui durability', () => {
  it('a worker killed mid-job: the jobs resume on another worker, with one prompt each', async () => {
    const api = http(kiln.baseUrl);
    fake.scriptFor = () => ({ run: 'hold' });
    const first = await workerChild(kiln.env, (c) => children.push(c));
    const img = await api('/v1beta/models/c-img:generateContent', { method: 'POST', json: submitBody('kept') });
    const vid = await api('/v1/videos', { method: 'POST', json: { model: 'c-vid', prompt: 'kept too' } });
    expect([img.status, vid.status]).toEqual([202, 200]);
    // Both prompts are on the box (one running, one pending) and have been checked.
    await waitForStatus(
      async () => ({
        json: { status: String(fake.requests.filter((r) => r.path.startsWith('/history/')).length) },
      }),
      (n) => Number(n) >= 4,
    );
    expect(fake.queued()).toHaveLength(2);
    await killChild(first);
    expect((await api(`/v1/tasks/${img.json.id}`)).json.status).toBe('running');
    fake.release();
    await workerChild(kiln.env, (c) => children.push(c));
    const image = await waitForStatus(() => api(`/v1/tasks/${img.json.id}`), TERMINAL, 45_000);
    const video = await waitForStatus(() => api(`/v1/videos/${vid.json.id}`), DONE, 45_000);
    expect(image.status, JSON.stringify(image.error)).toBe('succeeded');
    expect(video.status, JSON.stringify(video.error)).toBe('completed');
    expect(
      fake
        .prompts()
        .map((p) => p.body.prompt_id)
        .sort(),
    ).toEqual([img.json.id, vid.json.id].sort());
    expect([...fake.executions().values()]).toEqual([1, 1]);
  }, 90_000);

  it('a worker killed after sending, before the answer: the next one looks the prompt up, no second POST', async () => {
    fake.reset();
    // The first test's surviving worker must not be the one that takes this create.
    for (const c of children.splice(0)) await killChild(c);
    const api = http(kiln.baseUrl);
    // The box queues the prompt and owes the answer; the worker dies waiting for it.
    fake.onPrompt = () => ({ kind: 'hang-after' });
    const first = await workerChild(kiln.env, (c) => children.push(c));
    const img = await api('/v1beta/models/c-img:generateContent', {
      method: 'POST',
      json: submitBody('sent, unanswered'),
    });
    expect(img.status).toBe(202);
    await waitForStatus(
      async () => ({ json: { status: String(fake.prompts().length) } }),
      (n) => n === '1',
    );
    await killChild(first);
    fake.onPrompt = undefined;
    await workerChild(kiln.env, (c) => children.push(c));
    const image = await waitForStatus(() => api(`/v1/tasks/${img.json.id}`), TERMINAL, 45_000);
    expect(image.status, JSON.stringify(image)).toBe('succeeded');
    expect(fake.prompts()).toHaveLength(1);
    expect(fake.lookups().length).toBeGreaterThanOrEqual(1);
    expect([...fake.executions().entries()]).toEqual([[img.json.id, 1]]);
  }, 90_000);
});
