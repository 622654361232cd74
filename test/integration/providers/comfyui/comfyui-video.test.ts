// The comfyui provider's video models through /v1/videos (and the OpenAI SDK's videos resource)
// against a fake ComfyUI box: the video form (prompt, reference image, seconds as frames, size as
// width and height), the workflow-node form (nodeInfoList overriding the stored workflow's inputs
// within allowedInputs; anything else refused with 400 naming node and field), the animated output
// as video_url and every output as results[*].url, errors, a cancel, a timeout, and the models
// file's start-up checks.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseModel, parseModels } from '../../../../src/config/models.js';
import { TINY_PNG } from '../gemini/fake-gemini.js';
import { startFakeComfy, type FakeComfy } from './fake-comfyui.js';
import { VIDEO_NODES, VIDEO_WORKFLOW } from './workflows.js';
import { eventually, KEY_A, startKiln, type Kiln } from '../../../support/kiln.js';
import { videoApi } from '../../video/video-kiln.js';

let fake: FakeComfy;
let kiln: Kiln;

beforeAll(async () => {
  fake = await startFakeComfy('127.0.0.2');
  const comfy = { kind: 'video', provider: 'comfyui', baseUrl: fake.baseUrl, workflowFile: VIDEO_WORKFLOW };
  const quick = { pollIntervalMs: 100, heartbeatTimeoutMs: 1000, timeoutMs: 5000, maxAttempts: 3, queueTimeoutMs: 0 };
  kiln = await startKiln({
    env: { REFERENCE_FETCH_ALLOW: '127.0.0.2' },
    models: [
      { ...quick, ...comfy, id: 'cv', nodes: VIDEO_NODES, seconds: ['2', '4'], sizes: ['320x180', '180x320'] },
      {
        ...quick,
        ...comfy,
        id: 'cv-node',
        form: 'workflow-node',
        seconds: ['2'],
        sizes: ['320x180'],
        nodes: { prompt: VIDEO_NODES.prompt },
        allowedInputs: ['8.seed', '8.cfg', '9.fps'],
      },
      {
        ...quick,
        ...comfy,
        id: 'cv-short',
        nodes: VIDEO_NODES,
        seconds: ['2'],
        sizes: ['320x180'],
        overallTimeoutMs: 2500,
      },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await fake?.close();
});
beforeEach(() => fake.reset());

const v = () => videoApi(kiln);

describe('comfyui videos', () => {
  it('the video form through the OpenAI SDK: inputs on their nodes, the animated output as the video', async () => {
    const client = new OpenAI({ apiKey: KEY_A, baseURL: `${kiln.baseUrl}/v1`, maxRetries: 0 });
    const created = await client.videos.create({
      model: 'cv' as never,
      prompt: 'a wave breaking',
      seconds: '4',
      size: '180x320' as never,
      input_reference: { image_url: `${fake.baseUrl}/ref.png` } as never,
    });
    let got = await client.videos.retrieve(created.id);
    while (got.status !== 'completed' && got.status !== 'failed') {
      await new Promise((r) => setTimeout(r, 50));
      got = await client.videos.retrieve(created.id);
    }
    expect(got, JSON.stringify(got)).toMatchObject({ status: 'completed', seconds: '4', size: '180x320' });
    const content = await client.videos.downloadContent(created.id, { variant: 'video' });
    expect(Buffer.from(await content.arrayBuffer()).equals(TINY_PNG)).toBe(true);
    const [p] = fake.prompts();
    expect(p!.body.prompt_id).toBe(created.id);
    const wf = p!.body.prompt;
    expect(wf['6'].inputs.text).toBe('a wave breaking');
    expect(wf['1'].inputs).toEqual({ width: 180, height: 320, batch_size: 32, color: 0 });
    expect(wf['2'].inputs.image).toBe(`kiln/${created.id}.png`);
    // The SaveAnimatedWEBP output is the video; the SaveImage frame is not copied in this form.
    expect(fake.views().map((r) => r.query.get('filename'))).toEqual(['kiln-video_00001_.webp']);
  });

  it('the workflow-node form: nodeInfoList overrides allowed inputs; every output is in results', async () => {
    const id = await v().createOk({
      model: 'cv-node',
      prompt: 'a lantern',
      nodeInfoList: [
        { nodeId: '8', fieldName: 'seed', fieldValue: '424242' },
        { nodeId: '8', fieldName: 'cfg', fieldValue: 5.5 },
      ],
    });
    const done = await v().finish(id);
    expect(done.status, JSON.stringify(done.error)).toBe('completed');
    expect(done.results.map((r: any) => [r.node_id, r.file_type])).toEqual([
      ['9', 'webp'],
      ['10', 'png'],
    ]);
    expect(done.video_url).toBe(done.results[0].url);
    const wf = fake.prompts()[0]!.body.prompt;
    // A number stays a number: the stored seed is one, so "424242" is sent as 424242.
    expect(wf['8'].inputs).toEqual({ seed: 424242, steps: 4, cfg: 5.5, model: ['1', 0] });
    expect(wf['6'].inputs.text).toBe('a lantern');
  });

  it('refuses nodeInfoList entries outside the workflow or the allow-list, naming node and field', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ nodeId: '99', fieldName: 'seed', fieldValue: 1 }, /nodeInfoList\[0\]: node "99" is not in the workflow/],
      [{ nodeId: '8', fieldName: 'sampler', fieldValue: 'x' }, /node "8" \(KSampler\) has no input "sampler"/],
      [
        { nodeId: '8', fieldName: 'steps', fieldValue: 40 },
        /input "steps" of node "8" is not in the model's allowedInputs/,
      ],
      [{ nodeId: '8', fieldName: 'model', fieldValue: 'x' }, /input "model" of node "8" \(KSampler\) is a link/],
      [{ nodeId: '8', fieldName: 'seed', fieldValue: 'many' }, /input "seed" of node "8" takes a number/],
    ];
    for (const [entry, message] of cases) {
      const res = await v().create({ model: 'cv-node', prompt: 'x', nodeInfoList: [entry] });
      expect([res.status, res.json?.error?.code], res.text).toEqual([400, 'invalid_request']);
      expect(res.json.error.message).toMatch(message);
    }
    const noImage = await v().create({ model: 'cv-node', prompt: 'x', image: 'https://example.test/a.png' });
    expect(noImage.json.error.message).toMatch(/image: the model's workflow takes no reference image/);
    expect(fake.requests).toHaveLength(0);
  });

  it('an execution error fails the task with the node and its message', async () => {
    fake.scriptFor = () => ({ run: 'error', nodeId: '9', message: 'no space left on device' });
    const done = await v().finish(await v().createOk({ model: 'cv', prompt: 'a failing save', seconds: '2' }));
    expect(done).toMatchObject({ status: 'failed', error: { code: 'upstream_error' } });
    expect(done.error.message).toMatch(/node 9 \(SaveAnimatedWEBP\).*no space left on device/);
  });

  it('a cancel mid-job reaches the queue delete and /interrupt', async () => {
    fake.scriptFor = () => ({ run: 'hold' });
    const id = await v().createOk({ model: 'cv', prompt: 'an endless shot' });
    await v().until(id, 'in_progress');
    expect((await v().api()(`/v1/videos/${id}/cancel`, { method: 'POST' })).status).toBe(202);
    const done = await v().finish(id);
    expect(done).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    expect(fake.deletes().map((r) => r.body)).toEqual([{ delete: [id] }]);
    expect(fake.interrupts().map((r) => r.body)).toEqual([{ prompt_id: id }]);
  });

  it('a job past overallTimeoutMs fails upstream_timeout, and the box is asked to stop it', async () => {
    fake.scriptFor = () => ({ run: 'hold' });
    const id = await v().createOk({ model: 'cv-short', prompt: 'a stuck render' });
    const done = await v().finish(id);
    expect(done).toMatchObject({ status: 'failed', error: { code: 'upstream_timeout' } });
    expect(fake.prompts()).toHaveLength(1);
    await eventually(
      async () => fake.interrupts().length,
      (n) => n === 1,
    );
    expect(fake.deletes().map((r) => r.body)).toEqual([{ delete: [id] }]);
    expect(fake.interrupts().map((r) => r.body)).toEqual([{ prompt_id: id }]);
  });

  it('the models file: a missing or invalid workflowFile, and nodes or allowedInputs the workflow lacks, stop start-up', () => {
    const dir = mkdtempSync(join(tmpdir(), 'comfy-models-'));
    writeFileSync(join(dir, 'ui.json'), JSON.stringify({ nodes: [], links: [] }));
    writeFileSync(
      join(dir, 'wf.json'),
      JSON.stringify({ '1': { class_type: 'SaveImage', inputs: { images: ['2', 0], filename_prefix: 'k' } } }),
    );
    const base = {
      kind: 'video',
      id: 'x',
      provider: 'comfyui',
      baseUrl: 'http://box:8188',
      seconds: ['4'],
      sizes: ['1280x720'],
    };
    const parse = (m: Record<string, unknown>) => parseModels({ models: [{ ...base, ...m }] }, 'models.json', dir);
    expect(() => parse({})).toThrow(/workflowFile: comfyui needs workflowFile/);
    expect(() => parse({ workflowFile: 'gone.json' })).toThrow(
      /models\.0\.workflowFile: .*gone\.json cannot be read as JSON \(ENOENT\)/,
    );
    expect(() => parse({ workflowFile: 'ui.json' })).toThrow(/workflowFile: .*editor format/);
    expect(() => parse({ workflowFile: 'wf.json', nodes: { prompt: { nodeId: '6', fieldName: 'text' } } })).toThrow(
      /nodes: nodes.prompt: node "6" is not in the workflow/,
    );
    const ok = { workflowFile: 'wf.json', nodes: { prompt: { nodeId: '1', fieldName: 'filename_prefix' } } };
    expect(() => parse({ ...ok, seconds: ['4', '8'] })).toThrow(
      /nodes: the model accepts seconds 4, 8: set nodes.seconds/,
    );
    expect(() => parse({ ...ok, form: 'workflow-node', allowedInputs: ['1.images'] })).toThrow(
      /allowedInputs: input "images" of node "1" \(SaveImage\) is a link/,
    );
    expect(() => parse({ channels: [{ id: 'a', ...ok, workflowFile: 'nope.json' }] })).toThrow(
      /models\.0\.channels\.0\.workflowFile/,
    );
    expect(() => parse({ nodes: { prompt: { nodeId: '1', fieldName: 'images' } }, workflowFile: 'wf.json' })).toThrow(
      /nodes.prompt: input "images" of node "1" \(SaveImage\) is a link/,
    );
    // workflowFile relative to the models file; comfyui channels default to one prompt at a time.
    expect(parse(ok)[0]!.channels[0]).toMatchObject({ concurrency: 1, workflow: { '1': { class_type: 'SaveImage' } } });
    const fleet = parseModel(
      {
        ...base,
        workflowFile: join(dir, 'wf.json'),
        nodes: {},
        form: 'workflow-node',
        allowedInputs: [],
        channels: [
          { id: 'box1', baseUrl: 'http://box1:8188' },
          { id: 'box2', baseUrl: 'http://box2:8188', concurrency: 2 },
        ],
      },
      dir,
    );
    expect(fleet.channels.map((c) => [c.id, (c as { concurrency?: number }).concurrency])).toEqual([
      ['box1', 1],
      ['box2', 2],
    ]);
  });
});
