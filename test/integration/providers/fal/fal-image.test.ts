// The fal provider's image jobs through Kiln's public API (generateContent and OpenAI Images),
// against a fake fal queue (a real HTTP server speaking submit, status_url, response_url and
// cancel_url): the request as fal's apps take it, the answered URLs followed (never rebuilt, never
// on another origin), every error class, the content checker, a cancel and a timeout reaching
// cancel_url, a lost submit answer ending uncertain with one submit, and the key kept to fal.
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TINY_PNG } from '../gemini/fake-gemini.js';
import { BODIES, drop, fail, startFakeFal, type FakeFal, type FalFault } from './fake-fal.js';
import { eventually, imageSteps, KEY_A, startKiln, submitBody, type Kiln } from '../../../support/kiln.js';

const SECRET = 'fal-key-id:fal-SECRET-5551234';
const APP = 'fal-ai/flux/dev';
let fake: FakeFal;
let kiln: Kiln;

beforeAll(async () => {
  fake = await startFakeFal();
  const fal = { provider: 'fal', baseUrl: fake.baseUrl, upstreamModel: APP, credential: { env: 'FAL_KEY' } };
  // queueTimeoutMs 0: a refusal (429, 503) ends the task at once rather than waiting for the channel.
  const quick = { pollIntervalMs: 100, heartbeatTimeoutMs: 1000, timeoutMs: 5000, maxAttempts: 3, queueTimeoutMs: 0 };
  kiln = await startKiln({
    env: { FAL_KEY: SECRET },
    models: [
      { ...quick, ...fal, id: 'fal', overallTimeoutMs: 60_000 },
      { ...quick, ...fal, id: 'fal-short', overallTimeoutMs: 2500 },
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
const promptOf = (r: { body: any }) => r.body?.prompt as string | undefined;
const stored = () => new RegExp(`^${kiln.baseUrl}/v1/files/[a-f0-9]{32}\\.png$`);
const body = (prompt: string, imageConfig: Record<string, unknown> = { aspectRatio: '16:9' }, extra = {}) =>
  submitBody(prompt, {
    generationConfig: { responseModalities: ['IMAGE'], imageConfig: { ...imageConfig, output: 'url' }, ...extra },
  });

describe('fal images', () => {
  it('generateContent: the input as fal takes it, the answered URLs followed, the images copied', async () => {
    const ref = `${fake.cdnOrigin}/cdn/00ff.png`;
    const id = await submit(
      'fal',
      submitBody('a red fox', {
        contents: [{ parts: [{ text: 'a red fox' }, { inlineData: { mimeType: 'image/png', data: ref } }] }],
        generationConfig: { imageConfig: { aspectRatio: '16:9', output: 'url' }, candidateCount: 2, seed: 7 },
      }),
    );
    const task = await finish(id);
    expect(task.status, JSON.stringify(task.error)).toBe('succeeded');
    expect(task.candidates).toHaveLength(2);
    for (const c of task.candidates) expect(c.content.parts[0].inlineData.data).toMatch(stored());
    const file = await fetch(task.candidates[0].content.parts[0].inlineData.data);
    expect(Buffer.from(await file.arrayBuffer()).equals(TINY_PNG)).toBe(true);

    const [sub] = fake.submits();
    expect(sub!.path).toBe(`/${APP}`);
    expect(sub!.headers.authorization).toBe(`Key ${SECRET}`);
    expect(sub!.body).toEqual({
      prompt: 'a red fox',
      image_size: 'landscape_16_9',
      num_images: 2,
      seed: 7,
      image_url: ref,
    });
    // Status and result at the URLs fal answered: owner/app, without the endpoint path.
    expect(fake.statusReads().every((r) => /^\/fal-ai\/flux\/requests\/[^/]+\/status$/.test(r.path))).toBe(true);
    expect(fake.resultReads().map((r) => r.path)).toEqual([`/fal-ai/flux/requests/${task.response_id}`]);
    expect(fake.files().filter((f) => f.path !== '/cdn/00ff.png')).toHaveLength(2);
    expect(fake.files().every((f) => f.headers.authorization === undefined)).toBe(true);
    expect(fake.submits()).toHaveLength(1);
    expect(fake.cancels()).toHaveLength(0);
  });

  it('OpenAI Images: size and quality as fal image_size, b64 from the copied file', async () => {
    const sdk = new OpenAI({ apiKey: KEY_A, baseURL: `${kiln.baseUrl}/v1`, maxRetries: 0 });
    const res = await sdk.images.generate({ model: 'fal', prompt: 'a lighthouse', size: '1536x1024', quality: 'hd' });
    expect(res.data?.[0]?.url).toMatch(stored());
    expect(fake.submits()[0]!.body).toEqual({ prompt: 'a lighthouse', image_size: { width: 2048, height: 1360 } });
    const b64 = await sdk.images.generate({ model: 'fal', prompt: 'a square', response_format: 'b64_json' });
    expect(Buffer.from(b64.data![0]!.b64_json!, 'base64').equals(TINY_PNG)).toBe(true);
  });

  it('refuses at submit what fal cannot express, naming the field; nothing reaches fal', async () => {
    const two = submitBody('two refs', {
      contents: [
        {
          parts: [
            { text: 'mix' },
            { inlineData: { mimeType: 'image/png', data: 'https://example.test/a.png' } },
            { inlineData: { mimeType: 'image/png', data: 'https://example.test/b.png' } },
          ],
        },
      ],
    });
    const cases: [unknown, RegExp][] = [
      [two, /reference images "2" .*allowed: 0, 1/],
      [body('t', undefined, { temperature: 0.5 }), /generationConfig\.temperature/],
      [body('n', undefined, { candidateCount: 5 }), /candidateCount "5".*allowed: 1, 2, 3, 4/],
      [{ ...body('tools'), tools: [{ googleSearch: {} }] }, /tools/],
      [body('text', undefined, { responseModalities: ['TEXT'] }), /responseModalities.*allowed: IMAGE/],
    ];
    for (const [b, message] of cases) {
      const res = await api()('/v1beta/models/fal:generateContent', { method: 'POST', json: b });
      expect([res.status, res.json?.error?.code], res.text).toEqual([400, 'invalid_request']);
      expect(res.json.error.message).toMatch(message);
      expect(res.json.error.message).toContain('provider fal');
    }
    expect(fake.requests).toHaveLength(0);
  });

  it("maps fal's errors: submit answers, a model error, the safety checker, a failed request", async () => {
    const submits: [string, FalFault, string][] = [
      ['s401', fail(401, BODIES.unauthorized), 'auth_failed'],
      ['s403', fail(403, { detail: 'Forbidden' }), 'auth_failed'],
      ['sbalance', fail(403, BODIES.balance), 'insufficient_balance'],
      ['s402', fail(402, { detail: 'Payment required' }), 'insufficient_balance'],
      ['s429', fail(429, BODIES.rateLimited, { 'retry-after': '1' }), 'upstream_rate_limited'],
      ['s503', fail(503, BODIES.unavailable, { 'x-fal-error-type': 'runner_scheduling_failure' }), 'upstream_error'],
      ['s500', fail(500, BODIES.internal), 'upstream_error'],
    ];
    const scripts: [string, string, string][] = [
      ['rpolicy', 'policy', 'invalid_request'],
      ['rnsfw', 'nsfw', 'invalid_request'],
      ['rtimeout', 'failed:request_timeout', 'upstream_timeout'],
    ];
    fake.onSubmit = (c) => submits.find(([p]) => p === promptOf(c))?.[1];
    fake.scriptFor = (c) => {
      const step = scripts.find(([p]) => p === promptOf(c))?.[1];
      return step ? ['running', step] : undefined;
    };
    const all = [...submits, ...scripts].map(([prompt, , code]) => ({ prompt, code }));
    const ids = await Promise.all(all.map(({ prompt }) => submit('fal', body(prompt))));
    const ended = await Promise.all(ids.map((id) => finish(id)));
    expect(ended.map((t, i) => [all[i]!.prompt, t.status, t.error?.code])).toEqual(
      all.map(({ prompt, code }) => [prompt, 'failed', code]),
    );
    const msg = (p: string) => ended[all.findIndex((a) => a.prompt === p)]!.error.message as string;
    expect(msg('sbalance')).toMatch(/403: User is locked\. Reason: Exhausted balance/);
    expect(msg('s503')).toMatch(/503 runner_scheduling_failure: No runner/);
    expect(msg('rpolicy')).toMatch(/422: content policy: prompt: The content was flagged/);
    expect(msg('rnsfw')).toMatch(/safety checker flagged the image/);
    for (const [prompt] of submits) expect(fake.submits().filter((r) => promptOf(r) === prompt)).toHaveLength(1);
  });

  it('a 422 from the app names the field', async () => {
    fake.enqueue(
      'submit',
      fail(422, {
        detail: [{ loc: ['body', 'image_size'], msg: 'Input should be a valid ImageSize', type: 'value_error' }],
      }),
    );
    const t = await finish(await submit('fal', body('a rejected size')));
    expect(t).toMatchObject({ status: 'failed', error: { code: 'invalid_request' } });
    expect(t.error.message).toMatch(/fal answered 422: image_size: Input should be a valid ImageSize/);
  });

  it('a status read answered 503 or dropped is retried; the job is not submitted again', async () => {
    fake.enqueue('status', fail(503, BODIES.unavailable), drop());
    fake.enqueue('result', fail(502, { detail: 'Bad gateway' }));
    const t = await finish(await submit('fal', body('a retried read')));
    expect(t.status).toBe('succeeded');
    expect(fake.submits()).toHaveLength(1);
    expect(fake.resultReads()).toHaveLength(2);
  });

  it('URLs answered on another origin are not followed: the task fails and nothing goes there', async () => {
    fake.answerOrigin = fake.cdnOrigin;
    const t = await finish(await submit('fal', body('elsewhere')));
    expect(t).toMatchObject({ status: 'failed', error: { code: 'upstream_error' } });
    expect(t.error.message).toMatch(/status_url on http:\/\/localhost:\d+, not on the channel's/);
    await new Promise((r) => setTimeout(r, 500));
    expect(fake.requests.map((r) => r.method)).toEqual(['POST']);
  });

  it('a submit dropped after sending ends uncertain, with exactly one submit', async () => {
    fake.enqueue('submit', drop());
    const t = await finish(await submit('fal', body('a lost answer')));
    expect(t.status).toBe('uncertain');
    await new Promise((r) => setTimeout(r, 1000));
    expect(fake.submits()).toHaveLength(1);
    expect(fake.statusReads()).toHaveLength(0);
  });

  it('a cancel mid-job reaches cancel_url; the task ends canceled', async () => {
    fake.setScript(['running']);
    const id = await submit('fal', body('an endless render'));
    await until(id, 'running');
    await eventually(
      async () => fake.statusReads().length,
      (n) => n > 0,
    );
    expect((await api()(`/v1/tasks/${id}/cancel`, { method: 'POST' })).status).toBe(202);
    const t = await finish(id);
    expect(t).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    expect(fake.cancels().map((r) => r.path)).toEqual([`/fal-ai/flux/requests/${lastId()}/cancel`]);
    expect(fake.cancels()[0]!.headers.authorization).toBe(`Key ${SECRET}`);
  });

  it('a job past overallTimeoutMs fails upstream_timeout, and fal is asked to stop it', async () => {
    fake.setScript(['queued']);
    const t = await finish(await submit('fal-short', body('a stuck queue')));
    expect(t).toMatchObject({ status: 'failed', error: { code: 'upstream_timeout' } });
    await eventually(
      async () => fake.cancels().length,
      (n) => n === 1,
    );
    expect(fake.cancels()).toHaveLength(1);
    expect(fake.submits()).toHaveLength(1);
  });
});

/** The request id fal answered to the last submit, read from the status calls that followed it. */
function lastId(): string {
  return /requests\/([^/]+)\/status$/.exec(fake.statusReads().at(-1)!.path)![1]!;
}
