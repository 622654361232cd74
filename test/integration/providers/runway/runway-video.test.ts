// The runway provider through Kiln's /v1/videos (and the official OpenAI SDK) against the fake
// Runway: text-to-video and image-to-video (size as ratio, seconds as duration, the image as
// promptImage), the video copied into Kiln's blob store, what is refused at submit and at start,
// every error class, THROTTLED as a queue, a cancel that reaches DELETE /v1/tasks/{id}, the job's
// budget, and a lost create answer (uncertain, one create: Runway takes no id of the caller's).
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseModels } from '../../../../src/config/models.js';
import { drop, fail, noCredits, rateLimited, startFakeRunway, type FakeRunway, type RwFault } from './fake-runway.js';
import { eventually, http, KEY_A, startKiln, waitForStatus, type Kiln } from '../../../support/kiln.js';
import { DONE } from '../../video/video-kiln.js';

let fake: FakeRunway;
let kiln: Kiln;
const UPSTREAM_KEY = 'key_' + 'ab'.repeat(64);

beforeAll(async () => {
  fake = await startFakeRunway();
  const quick = {
    kind: 'video',
    provider: 'runway',
    baseUrl: fake.baseUrl,
    credential: { env: 'RUNWAY_TEST_KEY' },
    pollIntervalMs: 100,
    heartbeatTimeoutMs: 1000,
    timeoutMs: 5000,
    maxAttempts: 3,
    queueTimeoutMs: 0,
  };
  kiln = await startKiln({
    env: { RUNWAY_TEST_KEY: UPSTREAM_KEY },
    models: [
      { ...quick, id: 'gen45', upstreamModel: 'gen4.5', sizes: ['1280x720', '720x1280', '1104x832'] },
      { ...quick, id: 'turbo', upstreamModel: 'gen4_turbo', sizes: ['1104x832', '1280x720'], seconds: ['10', '5'] },
      { ...quick, id: 'veo', upstreamModel: 'veo3.1_fast', sizes: ['1920x1080'] },
      { ...quick, id: 'gen45-patient', upstreamModel: 'gen4.5', queueTimeoutMs: 20_000 },
      { ...quick, id: 'gen45-brief', upstreamModel: 'gen4.5', overallTimeoutMs: 1500 },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await fake?.close();
});
beforeEach(() => {
  fake.reset();
  fake.key = UPSTREAM_KEY;
});

const api = (key: string | null = KEY_A) => http(kiln.baseUrl, key);
const sdk = () => new OpenAI({ apiKey: KEY_A, baseURL: `${kiln.baseUrl}/v1`, maxRetries: 0 });
const createOk = async (body: Record<string, unknown>): Promise<string> => {
  const res = await api()('/v1/videos', { method: 'POST', json: body });
  expect(res.status, res.text).toBe(200);
  return res.json.id;
};
const finish = (id: string) => waitForStatus(() => api()(`/v1/videos/${id}`), DONE, 30_000);
const promptOf = (r: { body: any }) => r.body?.promptText as string | undefined;
const IMAGE = 'https://img.example.com/first-frame.png';

describe('runway videos', () => {
  it('text-to-video through the OpenAI SDK: ratio and duration, key and version headers, bytes from Kiln', async () => {
    fake.setScript(['pending', 'throttled', 'running:0.4', 'running:0.8', 'succeeded']);
    const created = await sdk().videos.create({
      model: 'gen45' as never,
      prompt: 'a kitten running on grass',
      seconds: '10' as never,
      size: '720x1280',
    });
    const v = await finish(created.id);
    expect(v, JSON.stringify(v)).toMatchObject({ status: 'completed', progress: 100 });
    const [sent] = fake.creates();
    expect(sent!.path).toBe('/v1/text_to_video');
    expect(sent!.headers.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    expect(sent!.headers['x-runway-version']).toBe('2024-11-06');
    expect(sent!.body).toEqual({
      model: 'gen4.5',
      promptText: 'a kitten running on grass',
      ratio: '720:1280',
      duration: 10,
    });
    const content = await sdk().videos.downloadContent(created.id);
    expect(Buffer.from(await content.arrayBuffer()).equals(fake.video)).toBe(true);
    expect(fake.downloads()).toHaveLength(1);
    const models = (await api()('/v1/models')).json.data;
    expect(models.find((m: any) => m.id === 'gen45')).toMatchObject({ seconds: ['5', '10'] });
    expect(models.find((m: any) => m.id === 'veo')).toMatchObject({ seconds: ['8', '6', '4'] });
  });

  it('image-to-video: the image as promptImage, the call image_to_video', async () => {
    const v = await finish(
      await createOk({ model: 'turbo', prompt: 'it comes alive', size: '1104x832', image: IMAGE }),
    );
    expect(v.status, JSON.stringify(v.error)).toBe('completed');
    const [sent] = fake.creates();
    expect(sent!.path).toBe('/v1/image_to_video');
    expect(sent!.body).toEqual({
      model: 'gen4_turbo',
      promptText: 'it comes alive',
      ratio: '1104:832',
      duration: 10,
      promptImage: IMAGE,
    });
  });

  it('refuses at submit, naming the field and what is allowed, what the Runway model cannot take', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [
        { model: 'turbo', prompt: 'no frame' },
        /image "none" cannot be sent to model turbo \(provider runway\); allowed: an https image URL/,
      ],
      [{ model: 'turbo', prompt: 'p', image: 'http://img.example.com/a.png' }, /image .*allowed: an https URL/],
      [{ model: 'gen45', prompt: 'x'.repeat(1001) }, /prompt "1001 UTF-16 units" .*allowed: at most 1000/],
      [
        { model: 'gen45', prompt: 'p', size: '1104x832' },
        /size "1104x832" .*allowed: 1280x720, 720x1280, nothing else for gen4.5 without an image/,
      ],
      [{ model: 'gen45', prompt: 'p', seconds: '12' }, /seconds must be one of "5", "10"/],
    ];
    for (const [body, message] of cases) {
      const res = await api()('/v1/videos', { method: 'POST', json: body });
      expect(res.status, res.text).toBe(400);
      expect(res.json.error.code).toBe('invalid_request');
      expect(res.json.error.message).toMatch(message);
    }
    expect(fake.creates()).toHaveLength(0);
  });

  it('refuses a models file at start whose sizes, seconds or form a Runway model cannot take', () => {
    const model = (extra: Record<string, unknown>) => ({
      id: 'x',
      kind: 'video',
      provider: 'runway',
      baseUrl: 'https://api.dev.runwayml.com',
      upstreamModel: 'gen4_turbo',
      ...extra,
    });
    const parse = (extra: Record<string, unknown>) => () => parseModels({ models: [model(extra)] }, 'models.json');
    expect(parse({ sizes: ['1920x1080'] })).toThrow(/sizes: size "1920x1080" cannot be sent to runway gen4_turbo/);
    expect(parse({ seconds: ['12'] })).toThrow(/seconds: seconds "12" cannot be sent to runway gen4_turbo/);
    expect(parse({ form: 'workflow-node' })).toThrow(/form: runway cannot take nodeInfoList/);
    expect(parse({ upstreamModel: undefined })).toThrow(/upstreamModel: runway needs upstreamModel/);
    expect(parse({ upstreamModel: 'veo3.1', sizes: ['1080x1920'] })).not.toThrow();
  });

  it("maps Runway's errors: create answers and tasks that ended FAILED", async () => {
    const creates: [string, RwFault, string, RegExp][] = [
      ['c401', fail(401, { error: 'Invalid API key' }), 'auth_failed', /401/],
      ['c-credits', noCredits(), 'insufficient_balance', /not have enough credits/],
      [
        'c-field',
        fail(400, {
          error: 'Validation of body failed',
          issues: [{ path: ['promptImage'], message: 'Failed to fetch asset.' }],
        }),
        'invalid_request',
        /promptImage: Failed to fetch asset/,
      ],
      ['c429', rateLimited(), 'upstream_rate_limited', /rate limit/],
      ['c502', fail(502, { error: 'Bad gateway' }), 'upstream_error', /502/],
      ['c503', fail(503, { error: 'Service unavailable' }), 'upstream_error', /503/],
      ['c504', fail(504, { error: 'Gateway timeout' }), 'upstream_timeout', /504/],
    ];
    const tasks: [string, string, string, RegExp][] = [
      [
        't-safety',
        'failed:SAFETY.INPUT.TEXT:The prompt was flagged.',
        'invalid_request',
        /content policy.*SAFETY.INPUT.TEXT/,
      ],
      ['t-out', 'failed:SAFETY.OUTPUT.VIDEO:The output was flagged.', 'invalid_request', /content policy/],
      ['t-pre', 'failed:INPUT_PREPROCESSING.SAFETY.TEXT:Flagged.', 'invalid_request', /content policy/],
      ['t-asset', 'failed:ASSET.INVALID:The image could not be read.', 'invalid_request', /could not use an input/],
      ['t-internal', 'failed:INTERNAL.BAD_OUTPUT.CODE01:Bad output.', 'upstream_error', /INTERNAL.BAD_OUTPUT/],
    ];
    fake.onCreate = (c) => creates.find(([p]) => p === promptOf(c))?.[1];
    fake.scriptFor = (c) => {
      const step = tasks.find(([p]) => p === promptOf(c))?.[1];
      return step ? ['running:0.2', step] : undefined;
    };
    const all = [...creates, ...tasks].map(([prompt, , code, message]) => ({ prompt, code, message }));
    const ids = await Promise.all(all.map(({ prompt }) => createOk({ model: 'gen45', prompt })));
    const ended = await Promise.all(ids.map((id) => finish(id)));
    expect(ended.map((v) => [v.prompt, v.status, v.error?.code])).toEqual(
      all.map(({ prompt, code }) => [prompt, 'failed', code]),
    );
    ended.forEach((v, i) => expect(v.error.message).toMatch(all[i]!.message));
    for (const v of ended) expect(v.error.message).not.toContain(UPSTREAM_KEY);
    for (const { prompt } of all) expect(fake.creates().filter((r) => promptOf(r) === prompt)).toHaveLength(1);
  });

  it('a 429 is a refusal: the task waits, sends again, and finishes', async () => {
    fake.enqueueCreate(rateLimited('1'));
    const v = await finish(await createOk({ model: 'gen45-patient', prompt: 'a busy hour' }));
    expect(v, JSON.stringify(v.error)).toMatchObject({ status: 'completed' });
    expect(fake.creates()).toHaveLength(2);
  });

  it('a cancel mid-job reaches DELETE /v1/tasks/{id}; Kiln stops checking', async () => {
    fake.setScript(['running:0.1']);
    const id = await createOk({ model: 'gen45', prompt: 'an endless render' });
    await eventually(
      async () => fake.reads().length,
      (n) => n > 0,
    );
    expect((await api()(`/v1/videos/${id}/cancel`, { method: 'POST' })).status).toBe(202);
    const v = await finish(id);
    expect(v).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    expect(v.error.message).toMatch(/the upstream was asked to stop it/);
    expect(fake.cancels()).toHaveLength(1);
    expect(fake.cancels()[0]!.path).toBe(fake.reads()[0]!.path);
    const reads = fake.reads().length;
    await new Promise((r) => setTimeout(r, 800));
    expect(fake.reads()).toHaveLength(reads);
  });

  it('a job past overallTimeoutMs ends upstream_timeout, and Runway is asked to cancel it', async () => {
    fake.setScript(['throttled']);
    const v = await finish(await createOk({ model: 'gen45-brief', prompt: 'forever throttled' }));
    expect(v).toMatchObject({ status: 'failed', error: { code: 'upstream_timeout' } });
    await eventually(
      async () => fake.cancels().length,
      (n) => n === 1,
    );
    expect(fake.creates()).toHaveLength(1);
  });

  it('a create whose answer is lost ends uncertain, with exactly one create', async () => {
    fake.enqueueCreate(drop());
    const v = await finish(await createOk({ model: 'gen45', prompt: 'a dropped create' }));
    expect(v).toMatchObject({ status: 'failed', error: { code: 'uncertain' } });
    await new Promise((r) => setTimeout(r, 1000));
    expect(fake.creates()).toHaveLength(1);
    expect(fake.reads()).toHaveLength(0);
  });

  it('failed reads and downloads (a 503, a dropped connection) are retried, and the bytes are stored', async () => {
    fake.enqueueRead(fail(503, { error: 'Service unavailable' }), drop());
    fake.enqueueDownload(fail(503, { error: 'busy' }), drop());
    const v = await finish(await createOk({ model: 'gen45', prompt: 'a stubborn file' }));
    expect(v, JSON.stringify(v.error)).toMatchObject({ status: 'completed' });
    expect(fake.downloads()).toHaveLength(3);
    expect(fake.creates()).toHaveLength(1);
  });
});
