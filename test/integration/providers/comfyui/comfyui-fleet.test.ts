// A fleet of ComfyUI boxes as channels of one model: each box takes one create at a time
// (`concurrency: 1`, the comfyui default), tasks spread over the boxes, and a box that is down
// (connection refused on its health check, before anything is sent) or fails its health check
// moves the task to another box; no prompt runs twice.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { closedPortUrl } from '../../../support/fake-server.js';
import { startFakeComfy, type FakeComfy } from './fake-comfyui.js';
import { imageSteps, startKiln, submitBody, type Kiln } from '../../../support/kiln.js';
import { IMAGE_NODES, IMAGE_WORKFLOW } from './workflows.js';

let boxes: FakeComfy[];
let kiln: Kiln;

beforeAll(async () => {
  boxes = await Promise.all([1, 2, 3].map((n) => startFakeComfy('127.0.0.1', `box${n}`)));
  const dead = await closedPortUrl();
  const model = {
    provider: 'comfyui',
    workflowFile: IMAGE_WORKFLOW,
    nodes: IMAGE_NODES,
    credential: 'none',
    pollIntervalMs: 100,
    heartbeatTimeoutMs: 1000,
    timeoutMs: 10_000,
    overallTimeoutMs: 60_000,
  };
  kiln = await startKiln({
    models: [
      { ...model, id: 'fleet', channels: boxes.map((b, i) => ({ id: `box${i + 1}`, baseUrl: b.baseUrl })) },
      {
        ...model,
        id: 'fleet-dead',
        channels: [
          // Tried first: refused connections, every time.
          { id: 'dead', baseUrl: dead, priority: 10 },
          { id: 'box1', baseUrl: boxes[0]!.baseUrl },
        ],
      },
      {
        ...model,
        id: 'fleet-unwell',
        channels: [
          { id: 'box2', baseUrl: boxes[1]!.baseUrl, priority: 10 },
          { id: 'box3', baseUrl: boxes[2]!.baseUrl },
        ],
      },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  for (const b of boxes ?? []) await b.close();
});
beforeEach(() => boxes.forEach((b) => b.reset()));

const { submit, finish } = imageSteps(() => kiln.baseUrl);
const prompts = (b: FakeComfy) => b.prompts().map((p) => p.body.prompt_id as string);

describe('a fleet of ComfyUI boxes', () => {
  it('spreads tasks over three boxes, one create at a time on each; each prompt runs once', async () => {
    // A slow health check holds each box's one slot for a while: the next task takes another box.
    for (const b of boxes) b.statsDelayMs = 300;
    const ids = await Promise.all(Array.from({ length: 9 }, (_, i) => submit('fleet', submitBody(`frame ${i}`))));
    const done = await Promise.all(ids.map((id) => finish(id)));
    expect(done.map((t) => t.status)).toEqual(ids.map(() => 'succeeded'));
    const per = boxes.map((b) => prompts(b).length);
    expect(per.reduce((a, b) => a + b, 0)).toBe(9);
    for (const n of per) expect(n).toBeGreaterThan(0);
    const all = boxes.flatMap(prompts);
    expect(new Set(all)).toEqual(new Set(ids));
    for (const b of boxes) for (const n of b.executions().values()) expect(n).toBe(1);
    // The channel a task ran on is the box that has its prompt.
    for (const t of done) expect(prompts(boxes[Number(t.channel.slice(3)) - 1]!)).toContain(t.id);
  });

  it('a dead box (connection refused before anything is sent) fails over to a live one', async () => {
    const ids = await Promise.all([1, 2, 3].map((i) => submit('fleet-dead', submitBody(`dead ${i}`))));
    const done = await Promise.all(ids.map((id) => finish(id)));
    expect(done.map((t) => [t.status, t.channel])).toEqual(ids.map(() => ['succeeded', 'box1']));
    expect(prompts(boxes[0]!).sort()).toEqual([...ids].sort());
  });

  it('a box failing its health check is refused without a send; the task moves on', async () => {
    boxes[1]!.statsStatus = 500;
    const done = await finish(await submit('fleet-unwell', submitBody('unwell')));
    expect([done.status, done.channel]).toEqual(['succeeded', 'box3']);
    expect(boxes[1]!.prompts()).toHaveLength(0);
    expect(boxes[2]!.prompts()).toHaveLength(1);
  });
});
