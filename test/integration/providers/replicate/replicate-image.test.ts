// The replicate image provider through Kiln's public API (generateContent and OpenAI Images)
// against a fake Replicate predictions API: the request mapped into `input` (by model and by
// version), outputs copied into the blob store, submit-time refusals of what a model cannot take,
// every error class, a cancel that reaches Replicate's cancel call, the job budget, and a lost
// create answer (uncertain, exactly one create).
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FakeImageHost } from '../../../support/fake-images.js';
import { eventually, http, imageSteps, KEY_A, startKiln, submitBody, type Kiln } from '../../../support/kiln.js';
import { TINY_PNG } from '../gemini/fake-gemini.js';
import { drop, ok, problem, startFakeReplicate, type FakeReplicate, type ReplicateFault } from './fake-replicate.js';

const VERSION = 'a'.repeat(8) + '0123456789abcdef'.repeat(3) + 'b'.repeat(8);
let fake: FakeReplicate;
let host: FakeImageHost;
let kiln: Kiln;
const steps = imageSteps(() => kiln.baseUrl);

beforeAll(async () => {
  [fake, host] = await Promise.all([startFakeReplicate(), new FakeImageHost().start('127.0.0.2')]);
  const rep = {
    provider: 'replicate',
    baseUrl: fake.baseUrl,
    pollIntervalMs: 100,
    heartbeatTimeoutMs: 1000,
    timeoutMs: 5000,
    maxAttempts: 3,
    rateLimitRetries: 0,
    queueTimeoutMs: 0,
    overallTimeoutMs: 60_000,
    imageSizes: [],
  };
  kiln = await startKiln({
    env: { REFERENCE_FETCH_ALLOW: '127.0.0.2' },
    models: [
      { ...rep, id: 'flux', upstreamModel: 'black-forest-labs/flux-schnell' },
      { ...rep, id: 'sdxl', upstreamModel: `stability-ai/sdxl:${VERSION}`, inputDefaults: { scheduler: 'K_EULER' } },
      {
        ...rep,
        id: 'kontext',
        upstreamModel: 'black-forest-labs/flux-kontext-pro',
        inputNames: { image: 'input_image' },
      },
      {
        ...rep,
        id: 'seedream',
        upstreamModel: 'bytedance/seedream-4',
        inlineReferences: true,
        imageSizes: ['1K', '2K', '4K'],
        inputNames: { image: 'image_input', imageList: true, imageSize: 'size', count: null },
      },
      { ...rep, id: 'flux-slow', upstreamModel: 'black-forest-labs/flux-dev', overallTimeoutMs: 2500 },
    ],
  });
}, 120_000);
afterAll(async () => {
  await kiln?.stop();
  await Promise.all([fake?.close(), host?.close()]);
});
beforeEach(() => {
  fake.reset();
  host.requests.length = 0;
});

const api = (key = KEY_A) => http(kiln.baseUrl, key);
const promptOf = (r: { body: any }) => r.body?.input?.prompt as string | undefined;
const withRefs = (prompt: string, urls: string[], extra: Record<string, unknown> = {}) =>
  submitBody(prompt, {
    contents: [
      {
        role: 'user',
        parts: [{ text: prompt }, ...urls.map((u) => ({ inlineData: { mimeType: 'image/png', data: u } }))],
      },
    ],
    ...extra,
  });

describe('replicate images', () => {
  it('generateContent: a prediction by model, checked until done, its image copied into Kiln', async () => {
    fake.key = KEY_A;
    const id = await steps.submit('flux', submitBody('a red fox in the snow'));
    const task = await steps.finish(id);
    expect(task, JSON.stringify(task)).toMatchObject({ status: 'succeeded', channel: 'default' });
    const part = task.candidates[0].content.parts[0];
    expect(part.inlineData.mimeType).toBe('image/png');
    expect(part.inlineData.data.startsWith(`${kiln.baseUrl}/v1/files/`)).toBe(true);
    expect(Buffer.from(await (await fetch(part.inlineData.data)).arrayBuffer()).equals(TINY_PNG)).toBe(true);
    expect(task.response_id).toBe(fake.predictions.keys().next().value);

    const [sent] = fake.creates();
    expect(sent!.path).toBe('/v1/models/black-forest-labs/flux-schnell/predictions');
    expect(sent!.body).toEqual({ input: { prompt: 'a red fox in the snow', aspect_ratio: '1:1' } });
    expect(sent!.headers.authorization).toBe(`Bearer ${KEY_A}`);
    expect(sent!.headers.prefer).toBeUndefined();
    expect(sent!.headers['idempotency-key']).toBeUndefined();
    expect(fake.reads().length).toBeGreaterThanOrEqual(3);
    // Files come from the delivery host: it gets no key.
    expect(fake.downloads()).toHaveLength(1);
    expect(fake.downloads()[0]!.headers.authorization).toBeUndefined();
  });

  it('OpenAI Images: n=2 is two predictions; the size reaches the model as aspect_ratio; Kiln URLs only', async () => {
    const sdk = new OpenAI({ apiKey: KEY_A, baseURL: `${kiln.baseUrl}/v1`, maxRetries: 0 });
    const res = await sdk.images.generate({ model: 'flux', prompt: 'two herons', n: 2, size: '1536x1024' });
    expect(res.data).toHaveLength(2);
    for (const d of res.data!) {
      expect(d.url!.startsWith(`${kiln.baseUrl}/v1/files/`)).toBe(true);
      expect(Buffer.from(await (await fetch(d.url!)).arrayBuffer()).equals(TINY_PNG)).toBe(true);
    }
    expect(fake.creates().map((c) => c.body)).toEqual([
      { input: { prompt: 'two herons', aspect_ratio: '3:2' } },
      { input: { prompt: 'two herons', aspect_ratio: '3:2' } },
    ]);
  });

  it('by version: POST /v1/predictions with the version id; the channel inputDefaults under the request', async () => {
    const task = await steps.finish(await steps.submit('sdxl', submitBody('a lighthouse')));
    expect(task.status).toBe('succeeded');
    expect(task.model_version).toBe(`stability-ai/sdxl:${VERSION}`);
    const [sent] = fake.creates();
    expect(sent!.path).toBe('/v1/predictions');
    expect(sent!.body).toEqual({
      version: VERSION,
      input: { scheduler: 'K_EULER', prompt: 'a lighthouse', aspect_ratio: '1:1' },
    });
  });

  it('reference images under the model input names; candidateCount as num_outputs, one candidate per output', async () => {
    const a = await steps.submit('kontext', withRefs('make it night', ['https://img.example/a.png']));
    const b = await steps.submit(
      'seedream',
      withRefs('blend them', [`${host.baseUrl}/ok.png`, `${host.baseUrl}/ok.png?second`], {
        generationConfig: { imageConfig: { aspectRatio: '16:9', imageSize: '2K', output: 'url' } },
      }),
    );
    const c = await steps.submit(
      'flux',
      submitBody('three cats', {
        generationConfig: { candidateCount: 3, seed: 7, imageConfig: { aspectRatio: '4:3', output: 'url' } },
      }),
    );
    const [ta, tb, tc] = await Promise.all([a, b, c].map((id) => steps.finish(id)));
    expect([ta.status, tb.status, tc.status]).toEqual(['succeeded', 'succeeded', 'succeeded']);
    const body = (p: string) => fake.creates().find((r) => promptOf(r) === p)!.body;
    expect(body('make it night')).toEqual({
      input: { prompt: 'make it night', input_image: 'https://img.example/a.png', aspect_ratio: '1:1' },
    });
    // inlineReferences: downloaded through the guard and sent as data URIs, as a list.
    const dataUri = `data:image/png;base64,${TINY_PNG.toString('base64')}`;
    expect(body('blend them')).toEqual({
      input: { prompt: 'blend them', image_input: [dataUri, dataUri], aspect_ratio: '16:9', size: '2K' },
    });
    expect(host.requests).toHaveLength(2);
    expect(body('three cats')).toEqual({
      input: { prompt: 'three cats', aspect_ratio: '4:3', num_outputs: 3, seed: 7 },
    });
    expect(tc.candidates.map((x: any) => x.index)).toEqual([0, 1, 2]);
    expect(new Set(tc.candidates.map((x: any) => x.content.parts[0].inlineData.data)).size).toBe(3);
  });

  it('refuses at submit what a model cannot take, naming the field, before anything is sent', async () => {
    const cases: [string, unknown, RegExp][] = [
      ['flux', withRefs('p', ['https://img.example/a.png']), /reference images .*inputNames\.image/],
      ['kontext', withRefs('p', ['https://img.example/a.png', 'https://img.example/b.png']), /at most 1/],
      [
        'flux',
        submitBody('p', { generationConfig: { topP: 0.5, imageConfig: { output: 'url' } } }),
        /generationConfig\.topP/,
      ],
      ['seedream', submitBody('p', { generationConfig: { topK: 3, imageConfig: { output: 'url' } } }), /topK/],
      [
        'seedream',
        submitBody('p', { generationConfig: { candidateCount: 2, imageConfig: { output: 'url' } } }),
        /candidateCount "2"/,
      ],
      ['flux', submitBody('p', { tools: [{ googleSearch: {} }] }), /^tools /],
    ];
    for (const [model, body, message] of cases) {
      const res = await api()(`/v1beta/models/${model}:generateContent`, { method: 'POST', json: body });
      expect([res.status, res.json?.error?.code], res.text).toEqual([400, 'invalid_request']);
      expect(res.json.error.message).toMatch(message);
    }
    const sdk = new OpenAI({ apiKey: KEY_A, baseURL: `${kiln.baseUrl}/v1`, maxRetries: 0 });
    await expect(sdk.images.generate({ model: 'flux', prompt: 'p', quality: 'high' })).rejects.toThrow(
      /quality must be one of auto for model flux/,
    );
    expect(fake.requests).toHaveLength(0);
  });

  it("maps Replicate's answers: problem details on create, failed predictions (safety filter, model error)", async () => {
    const creates: [string, ReplicateFault, string][] = [
      ['c401', problem(401, 'Unauthenticated', 'You did not pass a valid authentication token'), 'auth_failed'],
      [
        'c402',
        problem(402, 'Insufficient credit', 'You have insufficient credit to run this model.'),
        'insufficient_balance',
      ],
      [
        'c422',
        problem(422, 'Input validation failed', '- input.width: Must be less than or equal to 1440', {
          invalid_fields: [
            { type: 'less_than_equal', field: 'input.width', description: 'Must be less than or equal to 1440' },
          ],
        }),
        'invalid_request',
      ],
      ['c404', problem(404, 'Not found', 'The requested resource could not be found.'), 'invalid_request'],
      [
        'c429',
        problem(
          429,
          'Request was throttled',
          'Your rate limit resets in ~5s.',
          { retry_after: 5 },
          { 'retry-after': '5' },
        ),
        'upstream_rate_limited',
      ],
      ['c503', problem(503, 'Service Unavailable', 'The service is overloaded, please try again.'), 'upstream_error'],
      ['c500', problem(500, 'Internal Server Error', 'Something went wrong.'), 'upstream_error'],
    ];
    const predictions: [string, string, string][] = [
      ['pnsfw', 'failed:NSFW content detected. Try running it again, or try a different prompt.', 'invalid_request'],
      [
        'pe005',
        'failed:The input or output was flagged as sensitive. Please try again with different inputs. (E005)',
        'invalid_request',
      ],
      ['pcuda', 'failed:CUDA out of memory. Tried to allocate 2.00 GiB', 'upstream_error'],
      ['pcanceled', 'canceled', 'upstream_error'],
      ['paborted', 'aborted', 'upstream_timeout'],
    ];
    fake.onCreate = (c) => creates.find(([p]) => p === promptOf(c))?.[1];
    fake.scriptFor = (c) => {
      const step = predictions.find(([p]) => p === promptOf(c))?.[1];
      return step ? ['starting', step] : undefined;
    };
    const all = [...creates, ...predictions].map(([prompt, , code]) => ({ prompt, code }));
    const ids = await Promise.all(all.map(({ prompt }) => steps.submit('flux', submitBody(prompt))));
    const ended = await Promise.all(ids.map((id) => steps.finish(id)));
    expect(ended.map((t, i) => [all[i]!.prompt, t.status, t.error?.code])).toEqual(
      all.map(({ prompt, code }) => [prompt, 'failed', code]),
    );
    const message = (p: string) => ended[all.findIndex((a) => a.prompt === p)].error.message as string;
    expect(message('c422')).toMatch(/422: Input validation failed: input\.width: Must be less than/);
    expect(message('c402')).toMatch(/402: Insufficient credit/);
    expect(message('pnsfw')).toMatch(/safety filter.*NSFW content detected/);
    expect(message('pcuda')).toMatch(/prediction failed: CUDA out of memory/);
    // Answers that were not refusals are final: one create each.
    for (const p of ['c422', 'c404', 'c500', 'pnsfw', 'pcuda'])
      expect(fake.creates().filter((r) => promptOf(r) === p)).toHaveLength(1);
  });

  it('a prediction read answered 503 and a download answered 503 are retried (reads)', async () => {
    fake.enqueueRead(problem(503, 'Service Unavailable', 'busy'));
    fake.enqueueDownload(problem(503, 'Service Unavailable', 'busy'), drop());
    const task = await steps.finish(await steps.submit('flux', submitBody('stubborn')));
    expect(task).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(fake.creates()).toHaveLength(1);
    expect(fake.downloads()).toHaveLength(3);
  });

  it("a cancel mid-job reaches Replicate's cancel call; the task ends canceled", async () => {
    fake.setScript(['starting', 'processing']);
    const id = await steps.submit('flux', submitBody('an endless render'));
    await steps.until(id, 'running');
    await eventually(
      async () => fake.reads().length,
      (n) => n > 0,
    );
    expect((await api()(`/v1/tasks/${id}/cancel`, { method: 'POST' })).status).toBe(202);
    const task = await steps.finish(id);
    expect(task).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    expect(task.error.message).toMatch(/the upstream was asked to stop it/);
    const [predictionId] = fake.predictions.keys();
    expect(fake.cancels().map((c) => c.path)).toEqual([`/v1/predictions/${predictionId}/cancel`]);
    expect(fake.cancels()[0]!.headers.authorization).toBe(`Bearer ${KEY_A}`);
  });

  it('a prediction that never finishes ends upstream_timeout at overallTimeoutMs, and is canceled there', async () => {
    fake.setScript(['processing']);
    const task = await steps.finish(await steps.submit('flux-slow', submitBody('forever')));
    expect(task).toMatchObject({ status: 'failed', error: { code: 'upstream_timeout' } });
    await eventually(
      async () => fake.cancels().length,
      (n) => n === 1,
    );
    expect(fake.cancels()).toHaveLength(1);
  });

  it('a create whose answer is lost ends uncertain, with exactly one create', async () => {
    fake.enqueueCreate(drop());
    const task = await steps.finish(await steps.submit('flux', submitBody('a dropped create')));
    expect(task).toMatchObject({ status: 'uncertain' });
    await new Promise((r) => setTimeout(r, 1500));
    expect(fake.creates()).toHaveLength(1);
    expect(fake.reads()).toHaveLength(0);
  });

  it('a slow create inside the budget still succeeds', async () => {
    fake.enqueueCreate(ok(1500));
    const task = await steps.finish(await steps.submit('flux', submitBody('a slow create')));
    expect(task).toMatchObject({ status: 'succeeded', attempts: 1 });
  });
});
