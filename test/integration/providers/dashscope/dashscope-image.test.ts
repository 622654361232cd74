// The dashscope image provider through Kiln's public API (generateContent and OpenAI Images)
// against a fake DashScope speaking its async-task protocol: the body each model family takes
// (Qwen-Image's sizes, Wan's W*H and n, i2i's images), outputs copied into Kiln's blob store,
// submit-time refusals, every error class (create answers and FAILED tasks), a cancel that reaches
// DashScope's cancel call, the job's budget, and a lost create answer (uncertain, one create).
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { drop, fail, ok, startFakeDashScope, type DsFault, type FakeDashScope } from './fake-dashscope.js';
import { eventually, imageSteps, KEY_A, startKiln, submitBody, type Kiln } from '../../../support/kiln.js';

let fake: FakeDashScope;
let kiln: Kiln;

beforeAll(async () => {
  fake = await startFakeDashScope();
  const quick = {
    provider: 'dashscope',
    baseUrl: fake.baseUrl,
    pollIntervalMs: 100,
    heartbeatTimeoutMs: 1000,
    timeoutMs: 5000,
    maxAttempts: 3,
    queueTimeoutMs: 0,
    overallTimeoutMs: 60_000,
  };
  kiln = await startKiln({
    models: [
      { ...quick, id: 'qwen', upstreamModel: 'qwen-image-plus', imageSizes: ['1K'] },
      { ...quick, id: 'wan', upstreamModel: 'wan2.2-t2i-flash', imageSizes: ['1K', '2K'] },
      { ...quick, id: 'wan-edit', upstreamModel: 'wan2.5-i2i-preview' },
      { ...quick, id: 'qwen-brief', upstreamModel: 'qwen-image', overallTimeoutMs: 1500 },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await fake?.close();
});
beforeEach(() => fake.reset());

const steps = imageSteps(() => kiln.baseUrl);
const promptOf = (r: { body: any }) => r.body?.input?.prompt as string | undefined;
const imagesOf = (task: any): string[] =>
  task.candidates.flatMap((c: any) => c.content.parts.map((p: any) => p.inlineData?.data)).filter(Boolean);

describe('dashscope images', () => {
  it('generateContent: one async create, checks until SUCCEEDED, the image copied into Kiln', async () => {
    fake.key = KEY_A;
    const task = await steps.finish(await steps.submit('qwen', submitBody('a poster of three puppies')));
    expect(task, JSON.stringify(task)).toMatchObject({ status: 'succeeded', model_version: 'qwen-image-plus' });
    const [sent] = fake.creates();
    expect(sent!.path).toBe('/api/v1/services/aigc/text2image/image-synthesis');
    expect(sent!.headers['x-dashscope-async']).toBe('enable');
    expect(sent!.headers.authorization).toBe(`Bearer ${KEY_A}`);
    expect(sent!.body).toEqual({
      model: 'qwen-image-plus',
      input: { prompt: 'a poster of three puppies' },
      parameters: { size: '1328*1328' },
    });
    expect(fake.reads().length).toBeGreaterThanOrEqual(3);
    const [url] = imagesOf(task);
    expect(url!.startsWith(kiln.baseUrl)).toBe(true);
    expect(Buffer.from(await (await fetch(url!)).arrayBuffer()).equals(fake.image)).toBe(true);
    expect(fake.downloads()).toHaveLength(1);
    expect(fake.creates()).toHaveLength(1);
  });

  it('OpenAI Images: size and quality become W*H within Wan’s area; the SDK gets Kiln’s URL', async () => {
    const sdk = new OpenAI({ apiKey: KEY_A, baseURL: `${kiln.baseUrl}/v1`, maxRetries: 0 });
    const res = await sdk.images.generate({ model: 'wan', prompt: 'a fox', size: '1536x1024', quality: 'medium' });
    expect(res.data).toHaveLength(1);
    expect(res.data![0]!.url!.startsWith(kiln.baseUrl)).toBe(true);
    expect(fake.creates()[0]!.body).toEqual({
      model: 'wan2.2-t2i-flash',
      input: { prompt: 'a fox' },
      parameters: { size: '1760*1168' },
    });
  });

  it('candidateCount is n: every image is copied, and one that failed alone is left out', async () => {
    const body = submitBody('two foxes');
    (body.generationConfig as any).candidateCount = 3;
    const task = await steps.finish(await steps.submit('wan', body));
    expect(task.status).toBe('succeeded');
    expect(fake.creates()[0]!.body.parameters).toEqual({ size: '1024*1024', n: 3 });
    expect(imagesOf(task)).toHaveLength(3);
    fake.reset();
    fake.setScript(['running', 'partial']);
    const partial = await steps.finish(await steps.submit('wan', body));
    expect(partial.status).toBe('succeeded');
    expect(imagesOf(partial)).toHaveLength(2);
  });

  it('wan2.5-i2i: the reference images go to image2image as input.images', async () => {
    const body = {
      contents: [
        {
          role: 'user',
          parts: [
            { text: 'make it snow' },
            { inlineData: { mimeType: 'image/png', data: 'https://img.example.com/a.png' } },
          ],
        },
      ],
      generationConfig: { imageConfig: { output: 'url' } },
    };
    const task = await steps.finish(await steps.submit('wan-edit', body));
    expect(task.status).toBe('succeeded');
    expect(fake.creates()[0]!.path).toBe('/api/v1/services/aigc/image2image/image-synthesis');
    expect(fake.creates()[0]!.body.input).toEqual({
      prompt: 'make it snow',
      images: ['https://img.example.com/a.png'],
    });
  });

  it('refuses at submit what DashScope cannot express, naming the field and the allowed values', async () => {
    const gc = (extra: Record<string, unknown>) => {
      const b = submitBody('x');
      Object.assign(b.generationConfig as any, extra);
      return b;
    };
    const cases: [string, unknown, RegExp][] = [
      ['qwen', gc({ imageConfig: { aspectRatio: '21:9', output: 'url' } }), /aspectRatio "21:9".*allowed: 1:1, 16:9/],
      ['qwen', gc({ candidateCount: 2 }), /candidateCount "2".*allowed: 1/],
      [
        'wan',
        gc({ imageConfig: { aspectRatio: '1:1', imageSize: '2K', output: 'url' }, temperature: 1 }),
        /temperature/,
      ],
      ['wan', submitBody('x', { tools: [{ googleSearch: {} }] }), /tools/],
      [
        'qwen',
        submitBody('x', {
          contents: [
            { role: 'user', parts: [{ text: 'x' }, { inlineData: { data: 'https://img.example.com/a.png' } }] },
          ],
        }),
        /reference images "1".*text-to-image/,
      ],
      ['wan-edit', submitBody('no picture'), /reference images "0".*allowed: 1 to 3/],
    ];
    for (const [model, body, message] of cases) {
      const res = await steps.api()(`/v1beta/models/${model}:generateContent`, { method: 'POST', json: body });
      expect([res.status, res.json.error.code], res.text).toEqual([400, 'invalid_request']);
      expect(res.json.error.message).toMatch(message);
    }
    expect(fake.requests).toHaveLength(0);
  });

  it("maps DashScope's errors: create answers and tasks that ended FAILED", async () => {
    const creates: [string, DsFault, string][] = [
      ['c401', fail(401, 'InvalidApiKey', 'Invalid API-key provided.'), 'auth_failed'],
      [
        'c-arrears',
        fail(400, 'Arrearage', 'Access denied, please make sure your account is in good standing.'),
        'insufficient_balance',
      ],
      [
        'c-unpurchased',
        fail(403, 'AccessDenied.Unpurchased', 'Access to model denied. Please make sure you are eligible.'),
        'insufficient_balance',
      ],
      [
        'c-inspect',
        fail(400, 'DataInspectionFailed', 'Input data may contain inappropriate content.'),
        'invalid_request',
      ],
      [
        'c-ip',
        fail(400, 'IPInfringementSuspect', 'Input data is suspected of being involved in IP infringement.'),
        'invalid_request',
      ],
      [
        'c-throttle',
        fail(429, 'Throttling.RateQuota', 'Requests rate limit exceeded, please try again later.'),
        'upstream_rate_limited',
      ],
      ['c-param', fail(400, 'InvalidParameter', 'The size is not match the allowed size.'), 'invalid_request'],
      ['c-busy', fail(503, 'ServiceUnavailable', 'System is busy, please try again later.'), 'upstream_error'],
      ['c500', fail(500, 'InternalError', 'An internal error has occured, please try again later.'), 'upstream_error'],
    ];
    const tasks: [string, string, string][] = [
      ['t-inspect', 'failed:DataInspectionFailed:Output data may contain inappropriate content.', 'invalid_request'],
      [
        't-arrears',
        'failed:Arrearage:Access denied, please make sure your account is in good standing.',
        'insufficient_balance',
      ],
      ['t-throttle', 'failed:Throttling:Requests throttling triggered.', 'upstream_rate_limited'],
      ['t-internal', 'failed:InternalError.Algo:Algorithm process error.', 'upstream_error'],
      ['t-timeout', 'failed:InternalError.Timeout:An internal timeout error has occured.', 'upstream_timeout'],
    ];
    fake.onCreate = (c) => creates.find(([p]) => p === promptOf(c))?.[1];
    fake.scriptFor = (c) => {
      const step = tasks.find(([p]) => p === promptOf(c))?.[1];
      return step ? ['running', step] : undefined;
    };
    const all = [...creates, ...tasks].map(([prompt, , code]) => ({ prompt, code }));
    const ids = await Promise.all(all.map(({ prompt }) => steps.submit('wan', submitBody(prompt))));
    const ended = await Promise.all(ids.map((id) => steps.finish(id)));
    expect(ended.map((t, i) => [all[i]!.prompt, t.status, t.error?.code])).toEqual(
      all.map(({ prompt, code }) => [prompt, 'failed', code]),
    );
    const byPrompt = (p: string) => ended[all.findIndex((a) => a.prompt === p)]!;
    expect(byPrompt('c-param').error.message).toMatch(/400 InvalidParameter: The size is not match/);
    expect(byPrompt('t-inspect').error.message).toMatch(/task failed \(DataInspectionFailed\): Output data/);
    // A create answer is the answer: never sent again on a non-idempotent channel.
    for (const [prompt] of creates) expect(fake.creates().filter((r) => promptOf(r) === prompt)).toHaveLength(1);
  });

  it('a task query answered 503 is retried; the job goes on', async () => {
    fake.enqueueRead(fail(503, 'ServiceUnavailable', 'System is busy.'), drop());
    const task = await steps.finish(await steps.submit('wan', submitBody('a read retried')));
    expect(task.status).toBe('succeeded');
    expect(fake.creates()).toHaveLength(1);
  });

  it('a cancel while the task is PENDING reaches DashScope’s cancel call; Kiln stops checking', async () => {
    fake.setScript(['pending']);
    const id = await steps.submit('wan', submitBody('never mind'));
    await eventually(
      async () => fake.reads().length,
      (n) => n > 0,
    );
    const res = await steps.api()(`/v1/tasks/${id}/cancel`, { method: 'POST' });
    expect(res.status).toBe(202);
    const task = await steps.finish(id);
    expect(task).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    expect(task.error.message).toMatch(/the upstream was asked to stop it/);
    expect(fake.cancels()).toHaveLength(1);
    expect(fake.cancels()[0]!.path).toBe(`${fake.reads()[0]!.path}/cancel`);
    expect(fake.cancels()[0]!.headers.authorization).toBe(`Bearer ${KEY_A}`);
    const reads = fake.reads().length;
    await new Promise((r) => setTimeout(r, 800));
    expect(fake.reads()).toHaveLength(reads);
  });

  it('a cancel once the task RUNS: DashScope refuses to cancel it, and the task says it may run on', async () => {
    fake.setScript(['running']);
    const id = await steps.submit('wan', submitBody('too late'));
    await eventually(
      async () => fake.reads().length,
      (n) => n > 0,
    );
    await steps.api()(`/v1/tasks/${id}/cancel`, { method: 'POST' });
    const task = await steps.finish(id);
    expect(task).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    expect(task.error.message).toMatch(/may keep running there/);
    expect(fake.cancels()).toHaveLength(1);
  });

  it('a job past overallTimeoutMs ends upstream_timeout, and DashScope is asked to cancel it', async () => {
    fake.setScript(['pending']);
    const task = await steps.finish(await steps.submit('qwen-brief', submitBody('forever queued')));
    expect(task).toMatchObject({ status: 'failed', error: { code: 'upstream_timeout' } });
    await eventually(
      async () => fake.cancels().length,
      (n) => n === 1,
    );
    expect(fake.creates()).toHaveLength(1);
  });

  it('a create whose answer is lost ends uncertain, with exactly one create', async () => {
    fake.enqueueCreate(drop());
    const task = await steps.finish(await steps.submit('wan', submitBody('a dropped create')));
    expect(task.status).toBe('uncertain');
    await new Promise((r) => setTimeout(r, 1000));
    expect(fake.creates()).toHaveLength(1);
    expect(fake.reads()).toHaveLength(0);
  });

  it('a slow create inside the call budget still succeeds', async () => {
    fake.enqueueCreate(ok(1200));
    const task = await steps.finish(await steps.submit('wan', submitBody('a slow create')));
    expect(task).toMatchObject({ status: 'succeeded' });
  });
});
