// The seedance video provider through Kiln's /v1/videos (and the official OpenAI SDK) against the
// fake Ark: text-to-video and first-frame image-to-video with ratio, resolution and duration as body
// fields, the video copied into Kiln's blob store, every error class, refusals at start-up and submit,
// a cancel that reaches Ark's DELETE (queued: stopped; running: could not stop), the job's budget, and
// a lost create answer (uncertain, one create).
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseModel } from '../../../../src/config/models.js';
import { drop, fail, startFakeSeedance, type FakeSeedance, type SdFault } from './fake-seedance.js';
import { eventually, http, KEY_A, startKiln, waitForStatus, type Kiln } from '../../../support/kiln.js';
import { DONE } from '../../video/video-kiln.js';

let fake: FakeSeedance;
let kiln: Kiln;

const PRO = 'doubao-seedance-1-0-pro-250528';
const T2V = 'doubao-seedance-1-0-lite-t2v-250428';
const I2V = 'doubao-seedance-1-0-lite-i2v-250428';

beforeAll(async () => {
  fake = await startFakeSeedance();
  const quick = {
    kind: 'video',
    provider: 'seedance',
    baseUrl: fake.baseUrl,
    pollIntervalMs: 100,
    heartbeatTimeoutMs: 1000,
    timeoutMs: 5000,
    maxAttempts: 3,
    queueTimeoutMs: 0,
  };
  kiln = await startKiln({
    models: [
      { ...quick, id: 'sd-pro', upstreamModel: PRO, sizes: ['1280x720', '720x1280', '1920x1080'] },
      // The SDKs' base URL form (…/api/v3) is taken as is.
      { ...quick, id: 'sd-t2v', upstreamModel: T2V, baseUrl: `${fake.baseUrl}/api/v3` },
      { ...quick, id: 'sd-i2v', upstreamModel: I2V },
      { ...quick, id: 'sd-wait', upstreamModel: PRO, queueTimeoutMs: 30_000 },
      { ...quick, id: 'sd-brief', upstreamModel: PRO, overallTimeoutMs: 1500 },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await fake?.close();
});
beforeEach(() => fake.reset());

const api = (key: string | null = KEY_A) => http(kiln.baseUrl, key);
const sdk = () => new OpenAI({ apiKey: KEY_A, baseURL: `${kiln.baseUrl}/v1`, maxRetries: 0 });
const create = (body: Record<string, unknown>) => api()('/v1/videos', { method: 'POST', json: body });
const createOk = async (body: Record<string, unknown>): Promise<string> => {
  const res = await create(body);
  expect(res.status, res.text).toBe(200);
  return res.json.id;
};
const finish = (id: string) => waitForStatus(() => api()(`/v1/videos/${id}`), DONE, 30_000);
const promptOf = (r: { body: any }) => r.body?.content?.[0]?.text as string | undefined;

describe('seedance videos', () => {
  it('text-to-video through the OpenAI SDK: ratio, resolution and duration as body fields, the bytes served from Kiln', async () => {
    fake.key = KEY_A;
    const created = await sdk().videos.create({
      model: 'sd-pro' as never,
      prompt: 'a detective enters a dim room',
      seconds: '10' as never,
      size: '1920x1080' as never,
    });
    const v = await finish(created.id);
    expect(v, JSON.stringify(v)).toMatchObject({
      status: 'completed',
      progress: 100,
      seconds: '10',
      size: '1920x1080',
    });
    expect(v.video_url.startsWith(`${kiln.baseUrl}/v1/files/`)).toBe(true);
    const [sent] = fake.creates();
    expect(sent!.path).toBe('/api/v3/contents/generations/tasks');
    expect(sent!.headers.authorization).toBe(`Bearer ${KEY_A}`);
    expect(sent!.headers['idempotency-key']).toBeUndefined();
    expect(sent!.body).toEqual({
      model: PRO,
      content: [{ type: 'text', text: 'a detective enters a dim room' }],
      ratio: '16:9',
      resolution: '1080p',
      duration: 10,
    });
    const content = await sdk().videos.downloadContent(created.id);
    expect(Buffer.from(await content.arrayBuffer()).equals(fake.video)).toBe(true);
    expect(fake.downloads()).toHaveLength(1);
    expect(fake.downloads()[0]!.headers.authorization).toBeUndefined();
    // Seedance models default to 5 and 10 s.
    expect((await api()('/v1/models')).json.data.find((m: any) => m.id === 'sd-pro')).toMatchObject({
      seconds: ['5', '10'],
    });
  });

  it('image-to-video: the image as the first frame; a portrait size as 9:16 at 720p', async () => {
    const v = await finish(
      await createOk({
        model: 'sd-i2v',
        prompt: 'it comes alive',
        size: '720x1280',
        image: 'https://img.example/a.png',
      }),
    );
    expect(v.status).toBe('completed');
    expect(fake.creates()[0]!.path).toBe('/api/v3/contents/generations/tasks');
    expect(fake.creates()[0]!.body).toEqual({
      model: I2V,
      content: [
        { type: 'text', text: 'it comes alive' },
        { type: 'image_url', image_url: { url: 'https://img.example/a.png' }, role: 'first_frame' },
      ],
      ratio: '9:16',
      resolution: '720p',
      duration: 5,
    });
  });

  it('refuses at submit, naming the field, an image a text-to-video model cannot take (and none for image-to-video)', async () => {
    const t2v = await create({ model: 'sd-t2v', prompt: 'p', image: 'https://img.example/a.png' });
    expect([t2v.status, t2v.json.error.code]).toEqual([400, 'invalid_request']);
    expect(t2v.json.error.message).toMatch(/image .*sd-t2v.*text-to-video/);
    const i2v = await create({ model: 'sd-i2v', prompt: 'p' });
    expect([i2v.status, i2v.json.error.code]).toEqual([400, 'invalid_request']);
    expect(i2v.json.error.message).toMatch(/image .*first frame/);
    const seconds = await create({ model: 'sd-pro', prompt: 'p', seconds: '4' });
    expect([seconds.status, seconds.json.error.message]).toEqual([
      400,
      expect.stringMatching(/seconds must be one of "5", "10"/),
    ]);
    expect(fake.requests).toHaveLength(0);
  });

  it('a models file with values Seedance cannot express is refused at start, naming the field', () => {
    const model = {
      kind: 'video',
      id: 'x',
      provider: 'seedance',
      baseUrl: 'https://ark.cn-beijing.volces.com',
      upstreamModel: PRO,
    };
    expect(() => parseModel({ ...model, sizes: ['1792x1024'] })).toThrow(
      /sizes: size "1792x1024" cannot be sent to seedance/,
    );
    expect(() => parseModel({ ...model, seconds: ['15'] })).toThrow(
      /seconds: seconds "15" cannot be sent to seedance .*2 to 12/,
    );
    expect(
      () => parseModel({ ...model, upstreamModel: 'doubao-seedance-2-0-260128', seconds: ['15'] }).id,
    ).not.toThrow();
    expect(() => parseModel({ ...model, strict: true })).toThrow(/sizes: size "1792x1024" cannot be sent to seedance/);
    expect(() => parseModel({ ...model, form: 'workflow-node', workflowId: 'w' })).toThrow(
      /seedance cannot take nodeInfoList/,
    );
    expect(() => parseModel({ ...model, upstreamModel: undefined })).toThrow(
      /upstreamModel: seedance needs upstreamModel/,
    );
    expect(parseModel({ ...model, sizes: ['1280x720', '864x480', '960x960', '1440x1440', '2176x928'] }).id).toBe('x');
  });

  it("maps Ark's errors: create answers and tasks that ended failed or expired", async () => {
    const creates: [string, SdFault, string, RegExp][] = [
      [
        'c401',
        fail(401, 'AuthenticationError', 'The API key is missing or invalid.'),
        'auth_failed',
        /AuthenticationError/,
      ],
      [
        'c-overdue',
        fail(403, 'AccountOverdueError', 'Your account has an overdue balance.'),
        'insufficient_balance',
        /overdue/,
      ],
      [
        'c-quota',
        fail(429, 'QuotaExceeded', 'The free trial quota has been exhausted.'),
        'insufficient_balance',
        /quota/,
      ],
      [
        'c-setlimit',
        fail(429, 'SetLimitExceeded', 'Your account has reached the set inference limit.'),
        'insufficient_balance',
        /limit/,
      ],
      [
        'c-rpm',
        fail(429, 'RateLimitExceeded.EndpointRPMExceeded', 'The RPM limit has been exceeded.'),
        'upstream_rate_limited',
        /RPM/,
      ],
      [
        'c-text',
        fail(400, 'InputTextSensitiveContentDetected', 'The input text may contain sensitive information.'),
        'invalid_request',
        /content policy.*InputTextSensitiveContentDetected/,
      ],
      [
        'c-param',
        fail(400, 'InvalidParameter', 'The ratio is invalid.', 'ratio'),
        'invalid_request',
        /parameter "ratio"/,
      ],
      [
        'c-overloaded',
        fail(429, 'ServerOverloaded', 'The service is overloaded.'),
        'upstream_error',
        /ServerOverloaded/,
      ],
      ['c-503', fail(503, 'ServiceUnavailable', 'Service unavailable.'), 'upstream_error', /503/],
      // A create answered 500 may have been processed: never resent to Ark (not idempotent).
      [
        'c-500',
        fail(500, 'InternalServiceError', 'The service encountered an unexpected error.'),
        'upstream_error',
        /InternalServiceError/,
      ],
    ];
    const tasks: [string, string, string, RegExp][] = [
      [
        't-output',
        'failed:OutputVideoSensitiveContentDetected:The generated video may contain sensitive information.',
        'invalid_request',
        /content policy.*OutputVideoSensitiveContentDetected/,
      ],
      [
        't-internal',
        'failed:InternalServiceError:The service encountered an unexpected error.',
        'upstream_error',
        /unexpected/,
      ],
      ['t-expired', 'expired', 'upstream_timeout', /expired/],
    ];
    fake.onCreate = (c) => creates.find(([p]) => p === promptOf(c))?.[1];
    fake.scriptFor = (c) => {
      const step = tasks.find(([p]) => p === promptOf(c))?.[1];
      return step ? ['running', step] : undefined;
    };
    const all = [...creates, ...tasks].map(([prompt, , code, message]) => ({ prompt, code, message }));
    const ids = await Promise.all(all.map(({ prompt }) => createOk({ model: 'sd-pro', prompt })));
    const ended = await Promise.all(ids.map((id) => finish(id)));
    expect(ended.map((v) => [v.prompt, v.status, v.error?.code])).toEqual(
      all.map(({ prompt, code }) => [prompt, 'failed', code]),
    );
    ended.forEach((v, i) => expect(v.error.message, v.prompt).toMatch(all[i]!.message));
    for (const [prompt] of creates) expect(fake.creates().filter((r) => promptOf(r) === prompt)).toHaveLength(1);
    for (const v of ended) expect(v.error.message).not.toContain(KEY_A);
  });

  it('an overloaded Ark (429 ServerOverloaded) was not processed: the task waits, sends again and completes', async () => {
    fake.enqueueCreate(fail(429, 'ServerOverloaded', 'The service is overloaded.'));
    const v = await finish(await createOk({ model: 'sd-wait', prompt: 'patience' }));
    expect(v).toMatchObject({ status: 'completed' });
    expect(fake.creates()).toHaveLength(2);
  });

  it('a cancel while the task is queued reaches Ark’s DELETE, which stops it; Kiln stops checking', async () => {
    fake.setScript(['queued']);
    const id = await createOk({ model: 'sd-pro', prompt: 'an endless queue' });
    await eventually(
      async () => fake.reads().length,
      (n) => n > 0,
    );
    expect((await api()(`/v1/videos/${id}/cancel`, { method: 'POST' })).status).toBe(202);
    const v = await finish(id);
    expect(v).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    expect(v.error.message).toMatch(/the upstream was asked to stop it/);
    expect(fake.cancels().map((r) => r.path)).toEqual([fake.reads()[0]!.path]);
    const reads = fake.reads().length;
    await new Promise((r) => setTimeout(r, 800));
    expect(fake.reads()).toHaveLength(reads);
  });

  it('a cancel while the task is running reaches Ark, which refuses it: the task says Kiln could not stop it', async () => {
    fake.setScript(['running']);
    const id = await createOk({ model: 'sd-pro', prompt: 'a busy render' });
    await eventually(
      async () => fake.reads().length,
      (n) => n > 0,
    );
    expect((await api()(`/v1/videos/${id}/cancel`, { method: 'POST' })).status).toBe(202);
    const v = await finish(id);
    expect(v).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    expect(v.error.message).toMatch(/may keep running there/);
    expect(fake.cancels().length).toBeGreaterThanOrEqual(1);
  });

  it('a job past overallTimeoutMs ends upstream_timeout, with one create', async () => {
    fake.setScript(['queued']);
    const v = await finish(await createOk({ model: 'sd-brief', prompt: 'forever queued' }));
    expect(v).toMatchObject({ status: 'failed', error: { code: 'upstream_timeout' } });
    expect(fake.reads().length).toBeGreaterThan(1);
    expect(fake.creates()).toHaveLength(1);
  });

  it('a create whose answer is lost ends uncertain, with exactly one create', async () => {
    fake.enqueueCreate(drop());
    const v = await finish(await createOk({ model: 'sd-pro', prompt: 'a dropped create' }));
    expect(v).toMatchObject({ status: 'failed', error: { code: 'uncertain' } });
    await new Promise((r) => setTimeout(r, 1000));
    expect(fake.creates()).toHaveLength(1);
    expect(fake.reads()).toHaveLength(0);
  });

  it('a failed download (a 503, then a dropped connection) is retried, and the bytes are stored', async () => {
    fake.enqueueDownload(fail(503, 'ServiceUnavailable', 'busy'), drop());
    const v = await finish(await createOk({ model: 'sd-t2v', prompt: 'a stubborn file' }));
    expect(v).toMatchObject({ status: 'completed' });
    expect(fake.downloads()).toHaveLength(3);
    expect(fake.creates()).toHaveLength(1);
  });
});
