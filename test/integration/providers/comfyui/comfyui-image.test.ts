// The comfyui provider's image models through Kiln's public API (generateContent and OpenAI Images)
// against a fake ComfyUI box written from server.py: the stored workflow with the request's inputs
// set, queued under Kiln's prompt id, the reference uploaded, the saved images copied from /view;
// refusals at submit naming the field; node_errors and execution errors; a cancel reaching
// /interrupt and the queue's delete; a timeout; a box that fails its health check.
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TINY_PNG } from '../gemini/fake-gemini.js';
import { NODE_ERROR_BODY, startFakeComfy, type FakeComfy } from './fake-comfyui.js';
import { IMAGE_NODES, IMAGE_WORKFLOW } from './workflows.js';
import { eventually, imageSteps, KEY_A, startKiln, submitBody, type Kiln } from '../../../support/kiln.js';

const SECRET = 'comfy-proxy-SECRET-77';
let fake: FakeComfy;
let kiln: Kiln;

beforeAll(async () => {
  // On 127.0.0.2: the box also serves the test's reference image, which the SSRF guard lets through there only.
  fake = await startFakeComfy('127.0.0.2');
  const comfy = {
    provider: 'comfyui',
    baseUrl: fake.baseUrl,
    workflowFile: IMAGE_WORKFLOW,
    nodes: IMAGE_NODES,
    credential: { env: 'COMFY_TOKEN' },
  };
  const quick = { pollIntervalMs: 100, heartbeatTimeoutMs: 1000, timeoutMs: 5000, maxAttempts: 3, queueTimeoutMs: 0 };
  kiln = await startKiln({
    env: { COMFY_TOKEN: SECRET, REFERENCE_FETCH_ALLOW: '127.0.0.2' },
    models: [
      { ...quick, ...comfy, id: 'comfy', overallTimeoutMs: 60_000 },
      { ...quick, ...comfy, id: 'comfy-short', overallTimeoutMs: 2500 },
      { ...quick, ...comfy, id: 'comfy-bare', overallTimeoutMs: 60_000, nodes: { prompt: IMAGE_NODES.prompt } },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await fake?.close();
});
beforeEach(() => {
  fake.reset();
  fake.key = SECRET;
});

const { api, submit, finish, until } = imageSteps(() => kiln.baseUrl);
const stored = () => new RegExp(`^${kiln.baseUrl}/v1/files/[a-f0-9]{32}\\.png$`);
const body = (prompt: string, imageConfig: Record<string, unknown> = { aspectRatio: '16:9' }, extra = {}) =>
  submitBody(prompt, {
    generationConfig: { responseModalities: ['IMAGE'], imageConfig: { ...imageConfig, output: 'url' }, ...extra },
  });
const textOf = (p: { body: any }) => p.body?.prompt?.['6']?.inputs?.text as string | undefined;

describe('comfyui images', () => {
  it('generateContent: the workflow with the inputs set, queued under the task id; the images copied', async () => {
    const ref = `${fake.baseUrl}/ref.png`;
    const id = await submit(
      'comfy',
      submitBody('a red fox', {
        contents: [{ parts: [{ text: 'a red fox' }, { inlineData: { mimeType: 'image/png', data: ref } }] }],
        generationConfig: { imageConfig: { aspectRatio: '16:9', output: 'url' }, candidateCount: 2, seed: 7 },
      }),
    );
    const task = await finish(id);
    expect(task.status, JSON.stringify(task.error)).toBe('succeeded');
    expect(task.candidates).toHaveLength(1);
    const url = task.candidates[0].content.parts[0].inlineData.data;
    expect(url).toMatch(stored());
    expect(Buffer.from(await (await fetch(url)).arrayBuffer()).equals(TINY_PNG)).toBe(true);

    const [p] = fake.prompts();
    expect(p!.headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(p!.body.prompt_id).toBe(id);
    expect(p!.body.client_id).toBe('kiln');
    const wf = p!.body.prompt;
    expect(wf['6'].inputs).toEqual({ text: 'a red fox', clip: ['1', 1] });
    expect(wf['3'].inputs).toEqual({ width: 1024, height: 576, batch_size: 2, color: 0 });
    expect(wf['4'].inputs.seed).toBe(7);
    expect(wf['5'].inputs.image).toBe(`kiln/${id}.png`);
    const [up] = fake.uploads();
    expect(up!.upload).toMatchObject({ name: `${id}.png`, type: 'image/png' });
    expect(up!.upload!.fields).toMatchObject({ type: 'input', subfolder: 'kiln', overwrite: 'true' });
    expect(up!.upload!.bytes.equals(TINY_PNG)).toBe(true);
    // The health check, then the upload, then the prompt; the file read from /view on the box.
    const order = fake.requests.map((r) => `${r.method} ${r.path}`);
    expect(order.indexOf('GET /system_stats')).toBeLessThan(order.indexOf('POST /upload/image'));
    expect(order.indexOf('POST /upload/image')).toBeLessThan(order.indexOf('POST /prompt'));
    expect(fake.views().map((v) => [v.query.get('filename'), v.query.get('type')])).toEqual([
      ['kiln_00001_.png', 'output'],
    ]);
    expect(fake.views()[0]!.headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(fake.executions().get(id)).toBe(1);
  });

  it('OpenAI Images: size as width and height (1024x1536 is 2:3 at 2K), b64 from the copied file', async () => {
    const sdk = new OpenAI({ apiKey: KEY_A, baseURL: `${kiln.baseUrl}/v1`, maxRetries: 0 });
    const res = await sdk.images.generate({ model: 'comfy', prompt: 'a lighthouse', size: '1024x1536' });
    expect(res.data?.[0]?.url).toMatch(stored());
    const wf = fake.prompts()[0]!.body.prompt;
    expect(wf['6'].inputs.text).toBe('a lighthouse');
    expect([wf['3'].inputs.width, wf['3'].inputs.height]).toEqual([1368, 2048]);
    const b64 = await sdk.images.generate({ model: 'comfy', prompt: 'a square', response_format: 'b64_json' });
    expect(Buffer.from(b64.data![0]!.b64_json!, 'base64').equals(TINY_PNG)).toBe(true);
  });

  it('refuses at submit what the workflow cannot take, naming the field; nothing reaches the box', async () => {
    const withRef = submitBody('a ref', {
      contents: [
        { parts: [{ text: 'a ref' }, { inlineData: { mimeType: 'image/png', data: 'https://example.test/a.png' } }] },
      ],
    });
    const cases: [string, unknown, RegExp][] = [
      ['comfy-bare', withRef, /reference images "1" .*allowed: 0 \(no nodes.image\)/],
      ['comfy-bare', body('sized'), /aspectRatio "16:9".*no nodes.width/],
      ['comfy-bare', body('n', {}, { candidateCount: 2 }), /candidateCount "2".*no nodes.count/],
      ['comfy-bare', body('s', {}, { seed: 3 }), /seed "3".*no nodes.seed/],
      ['comfy', body('t', undefined, { temperature: 0.5 }), /generationConfig\.temperature/],
    ];
    for (const [model, b, message] of cases) {
      const res = await api()(`/v1beta/models/${model}:generateContent`, { method: 'POST', json: b });
      expect([res.status, res.json?.error?.code], res.text).toEqual([400, 'invalid_request']);
      expect(res.json.error.message).toMatch(message);
      expect(res.json.error.message).toContain('provider comfyui');
    }
    expect(fake.requests).toHaveLength(0);
  });

  it("maps the box's answers: node_errors, an execution error, a 401, a 500", async () => {
    fake.onPrompt = (b) => {
      const t = b.prompt?.['6']?.inputs?.text;
      if (t === 'bad node') return { kind: 'error', status: 400, body: NODE_ERROR_BODY('6', 'CLIPTextEncode', 'clip') };
      if (t === 'a 500') return { kind: 'error', status: 500, body: { error: 'boom' } };
      return undefined;
    };
    fake.scriptFor = (p) =>
      p['6'].inputs.text === 'exec error'
        ? { run: 'error', nodeId: '4', message: 'Expected all tensors to be on the same device' }
        : undefined;
    const all: [string, string, RegExp][] = [
      ['bad node', 'invalid_request', /node 6 \(CLIPTextEncode\) input "clip": Required input is missing/],
      ['exec error', 'upstream_error', /node 4 \(KSampler\) \[RuntimeError\]: Expected all tensors/],
      ['a 500', 'upstream_error', /500: boom/],
    ];
    const ids = await Promise.all(all.map(([p]) => submit('comfy', body(p))));
    const ended = await Promise.all(ids.map((id) => finish(id)));
    expect(ended.map((t) => [t.status, t.error?.code])).toEqual(all.map(([, code]) => ['failed', code]));
    ended.forEach((t, i) => expect(t.error.message).toMatch(all[i]![2]));
    for (const [p] of all) expect(fake.prompts().filter((r) => textOf(r) === p)).toHaveLength(1);
    fake.key = 'another';
    const denied = await finish(await submit('comfy', body('a wrong token')));
    expect(denied).toMatchObject({ status: 'failed', error: { code: 'auth_failed' } });
    expect(fake.prompts()).toHaveLength(3);
  });

  it('a box failing its health check: nothing is sent', async () => {
    fake.statsStatus = 503;
    const t = await finish(await submit('comfy', body('an unwell box')));
    expect(t).toMatchObject({ status: 'failed', error: { code: 'upstream_error' } });
    expect(t.error.message).toMatch(/health check.*nothing was sent/);
    expect(fake.prompts()).toHaveLength(0);
  });

  it('a cancel mid-job deletes the prompt from the queue and interrupts it', async () => {
    fake.scriptFor = () => ({ run: 'hold' });
    const id = await submit('comfy', body('an endless render'));
    await until(id, 'running');
    await eventually(
      async () => fake.executions().get(id) ?? 0,
      (n) => n === 1,
    );
    expect((await api()(`/v1/tasks/${id}/cancel`, { method: 'POST' })).status).toBe(202);
    const t = await finish(id);
    expect(t).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    await eventually(
      async () => fake.interrupts().length,
      (n) => n === 1,
    );
    expect(fake.deletes().map((r) => r.body)).toEqual([{ delete: [id] }]);
    expect(fake.interrupts().map((r) => r.body)).toEqual([{ prompt_id: id }]);
    expect(fake.history.get(id)).toMatchObject({ status: { status_str: 'error' } });
  });

  it('a job past overallTimeoutMs fails upstream_timeout, and the box is asked to stop it', async () => {
    fake.scriptFor = () => ({ run: 'hold' });
    const id = await submit('comfy-short', body('a stuck render'));
    const t = await finish(id);
    expect(t).toMatchObject({ status: 'failed', error: { code: 'upstream_timeout' } });
    await eventually(
      async () => fake.interrupts().length,
      (n) => n === 1,
    );
    expect(fake.interrupts()[0]!.body).toEqual({ prompt_id: id });
    expect(fake.prompts()).toHaveLength(1);
  });
});
