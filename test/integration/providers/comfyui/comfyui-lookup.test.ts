// Lookup instead of `uncertain`, against the fake box: a POST /prompt whose answer is lost after the
// box queued the prompt is looked up by Kiln's prompt id (the queue, then the history) and the task
// goes on with it: no second POST, each prompt executed once. A prompt the box never received
// (two lookups 2 s apart find it nowhere) is sent once more. A box that stops before the answer
// and stays down through the lookup leaves the tasks `uncertain`, and nothing runs twice.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeComfy, type FakeComfy } from './fake-comfyui.js';
import { IMAGE_NODES, IMAGE_WORKFLOW, VIDEO_NODES, VIDEO_WORKFLOW } from './workflows.js';
import { http, imageSteps, startKiln, submitBody, TERMINAL, waitForStatus, type Kiln } from '../../../support/kiln.js';
import { videoApi } from '../../video/video-kiln.js';

let fake: FakeComfy;
let kiln: Kiln;

beforeAll(async () => {
  fake = await startFakeComfy();
  const box = {
    provider: 'comfyui',
    baseUrl: fake.baseUrl,
    pollIntervalMs: 100,
    heartbeatTimeoutMs: 2000,
    timeoutMs: 30_000,
    queueTimeoutMs: 0,
  };
  kiln = await startKiln({
    models: [
      { ...box, id: 'c-img', workflowFile: IMAGE_WORKFLOW, nodes: IMAGE_NODES, overallTimeoutMs: 120_000 },
      // Five creates at once: the box can be stopped with every answer still owed.
      {
        ...box,
        id: 'c-img5',
        workflowFile: IMAGE_WORKFLOW,
        nodes: IMAGE_NODES,
        concurrency: 5,
        overallTimeoutMs: 120_000,
      },
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
  await kiln?.stop();
  await fake?.close();
});
beforeEach(() => fake.reset());

const { finish, submit } = imageSteps(() => kiln.baseUrl);
const finishWithin = (id: string, ms: number) =>
  waitForStatus(() => http(kiln.baseUrl)(`/v1/tasks/${id}`), TERMINAL, ms);
const v = () => videoApi(kiln);

describe('comfyui lookup', () => {
  it('50 answers lost after the box queued the prompt: 50 succeed, one POST and one execution each', async () => {
    fake.onPrompt = () => ({ kind: 'drop-after' });
    const started = Date.now();
    const ids = await Promise.all(Array.from({ length: 50 }, (_, i) => submit('c-img', submitBody(`lost ${i}`))));
    const done = await Promise.all(ids.map((id) => finishWithin(id, 120_000)));
    const statuses = done.map((t) => t.status);
    expect(
      statuses.filter((s) => s === 'succeeded'),
      JSON.stringify(done.find((t) => t.error)?.error),
    ).toHaveLength(50);
    expect(statuses.filter((s) => s === 'uncertain')).toHaveLength(0);
    expect(fake.prompts()).toHaveLength(50);
    expect(new Set(fake.prompts().map((p) => p.body.prompt_id))).toEqual(new Set(ids));
    expect([...fake.executions().values()].every((n) => n === 1)).toBe(true);
    expect(fake.executions().size).toBe(50);
    expect(fake.lookups().length).toBeGreaterThanOrEqual(50);
    console.log(`comfyui lookup drill (fake): 50 lost answers, ${Date.now() - started} ms`);
  }, 180_000);

  it('a video whose answer was lost goes on with the prompt the lookup found', async () => {
    fake.onPrompt = () => ({ kind: 'drop-after' });
    const done = await v().finish(await v().createOk({ model: 'c-vid', prompt: 'a lost answer' }));
    expect(done.status, JSON.stringify(done.error)).toBe('completed');
    expect(fake.prompts()).toHaveLength(1);
    expect([...fake.executions().values()]).toEqual([1]);
  });

  it('a prompt the box never received (absent on two lookups) is sent once more, and runs once', async () => {
    let n = 0;
    fake.onPrompt = () => (n++ === 0 ? { kind: 'drop-before' } : undefined);
    const id = await submit('c-img', submitBody('never arrived'));
    const t = await finish(id);
    expect(t.status, JSON.stringify(t.error)).toBe('succeeded');
    expect(fake.prompts()).toHaveLength(2);
    expect(fake.lookups().length).toBeGreaterThanOrEqual(2);
    expect([...fake.executions().entries()]).toEqual([[id, 1]]);
  });

  it('the box stopped before answering and during the lookup: the tasks end uncertain, nothing runs twice', async () => {
    let received = 0;
    fake.onPrompt = () => {
      // Every prompt is queued, its answer owed; once all five are in, the box goes down.
      if (++received === 5) setTimeout(() => void fake.stop(), 50);
      return { kind: 'hang-after' };
    };
    const ids = await Promise.all([1, 2, 3, 4, 5].map((i) => submit('c-img5', submitBody(`stopped ${i}`))));
    const done = await Promise.all(ids.map((id) => finishWithin(id, 60_000)));
    expect(done.map((t) => t.status)).toEqual(ids.map(() => 'uncertain'));
    expect(done[0].uncertain_reason).toMatch(/could not be asked whether it has the request/);
    await fake.restart();
    // The box ran what it had queued, once each; Kiln sent nothing more.
    await new Promise((r) => setTimeout(r, 500));
    expect(fake.prompts()).toHaveLength(5);
    expect([...fake.executions().values()].every((k) => k === 1)).toBe(true);
    expect(fake.executions().size).toBe(5);
  }, 90_000);
});
