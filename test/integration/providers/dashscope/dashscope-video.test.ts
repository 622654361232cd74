// The dashscope video provider through Kiln's /v1/videos (the official OpenAI SDK) against the fake
// DashScope: Wan text-to-video (size as W*H, seconds as duration) and image-to-video (img_url, the
// resolution tier), the video copied into Kiln's blob store, every error class, a cancel that
// reaches DashScope's cancel call, the job's budget, and a lost create answer (uncertain, one create).
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseModels } from '../../../../src/config/models.js';
import { drop, fail, startFakeDashScope, type DsFault, type FakeDashScope } from './fake-dashscope.js';
import { eventually, http, KEY_A, startKiln, waitForStatus, type Kiln } from '../../../support/kiln.js';
import { DONE } from '../../video/video-kiln.js';

let fake: FakeDashScope;
let kiln: Kiln;

beforeAll(async () => {
  fake = await startFakeDashScope();
  const quick = {
    kind: 'video',
    provider: 'dashscope',
    baseUrl: fake.baseUrl,
    pollIntervalMs: 100,
    heartbeatTimeoutMs: 1000,
    timeoutMs: 5000,
    maxAttempts: 3,
    queueTimeoutMs: 0,
  };
  kiln = await startKiln({
    models: [
      {
        ...quick,
        id: 'wan-t2v',
        upstreamModel: 'wan2.5-t2v-preview',
        seconds: ['5', '10'],
        sizes: ['1280x720', '720x1280'],
      },
      { ...quick, id: 'wan-i2v', upstreamModel: 'wan2.5-i2v-preview', sizes: ['1920x1080', '1280x720'] },
      { ...quick, id: 'wan-brief', upstreamModel: 'wan2.2-t2v-plus', overallTimeoutMs: 1500 },
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
const createOk = async (body: Record<string, unknown>): Promise<string> => {
  const res = await api()('/v1/videos', { method: 'POST', json: body });
  expect(res.status, res.text).toBe(200);
  return res.json.id;
};
const finish = (id: string) => waitForStatus(() => api()(`/v1/videos/${id}`), DONE, 30_000);
const promptOf = (r: { body: any }) => r.body?.input?.prompt as string | undefined;

describe('dashscope videos', () => {
  it('text-to-video through the OpenAI SDK: size W*H, duration, the bytes served from Kiln', async () => {
    fake.key = KEY_A;
    const created = await sdk().videos.create({
      model: 'wan-t2v' as never,
      prompt: 'a kitten running on grass',
      seconds: '10' as never,
      size: '1280x720',
    });
    const v = await finish(created.id);
    expect(v, JSON.stringify(v)).toMatchObject({ status: 'completed', progress: 100 });
    const [sent] = fake.creates();
    expect(sent!.path).toBe('/api/v1/services/aigc/video-generation/video-synthesis');
    expect(sent!.headers['x-dashscope-async']).toBe('enable');
    expect(sent!.headers.authorization).toBe(`Bearer ${KEY_A}`);
    expect(sent!.body).toEqual({
      model: 'wan2.5-t2v-preview',
      input: { prompt: 'a kitten running on grass' },
      parameters: { size: '1280*720', duration: 10 },
    });
    const content = await sdk().videos.downloadContent(created.id);
    expect(Buffer.from(await content.arrayBuffer()).equals(fake.video)).toBe(true);
    expect(fake.downloads()).toHaveLength(1);
    expect((await api()('/v1/models')).json.data.find((m: any) => m.id === 'wan-i2v')).toMatchObject({
      seconds: ['5'],
    });
  });

  it('image-to-video: the image as img_url and the size as its resolution tier', async () => {
    const v = await finish(
      await createOk({
        model: 'wan-i2v',
        prompt: 'it comes alive',
        size: '1920x1080',
        image: 'https://img.example.com/a.png',
      }),
    );
    expect(v.status).toBe('completed');
    expect(fake.creates()[0]!.body).toEqual({
      model: 'wan2.5-i2v-preview',
      input: { prompt: 'it comes alive', img_url: 'https://img.example.com/a.png' },
      parameters: { resolution: '1080P', duration: 5 },
    });
  });

  it('an image for a text-to-video model (or none for an image-to-video one) fails before anything is sent', async () => {
    const t2v = await finish(await createOk({ model: 'wan-t2v', prompt: 'p', image: 'https://img.example.com/a.png' }));
    expect(t2v).toMatchObject({ status: 'failed', error: { code: 'invalid_request' } });
    expect(t2v.error.message).toMatch(/image "set" cannot be sent to wan2.5-t2v-preview/);
    const i2v = await finish(await createOk({ model: 'wan-i2v', prompt: 'p' }));
    expect(i2v).toMatchObject({ status: 'failed', error: { code: 'invalid_request' } });
    expect(fake.creates()).toHaveLength(0);
  });

  it('a models file whose image-to-video sizes have no resolution tier is refused at start, naming the size', () => {
    const models = [
      {
        id: 'x',
        kind: 'video',
        provider: 'dashscope',
        baseUrl: 'http://d',
        upstreamModel: 'wan2.2-i2v-plus',
        sizes: ['1792x1024'],
      },
    ];
    expect(() => parseModels({ models }, 'models.json')).toThrow(/sizes: size "1792x1024" cannot be sent to dashscope/);
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
        'c-inspect',
        fail(400, 'DataInspectionFailed', 'Input data may contain inappropriate content.'),
        'invalid_request',
      ],
      ['c-throttle', fail(429, 'Throttling', 'Requests throttling triggered.'), 'upstream_rate_limited'],
      ['c-param', fail(400, 'InvalidParameter', 'The duration is invalid.'), 'invalid_request'],
      ['c-busy', fail(503, 'ServiceUnavailable', 'System is busy, please try again later.'), 'upstream_error'],
    ];
    const tasks: [string, string, string][] = [
      ['t-inspect', 'failed:DataInspectionFailed:Output data may contain inappropriate content.', 'invalid_request'],
      [
        't-ip',
        'failed:IPInfringementSuspect:Input data is suspected of being involved in IP infringement.',
        'invalid_request',
      ],
      ['t-internal', 'failed:InternalError:An internal error has occured.', 'upstream_error'],
    ];
    fake.onCreate = (c) => creates.find(([p]) => p === promptOf(c))?.[1];
    fake.scriptFor = (c) => {
      const step = tasks.find(([p]) => p === promptOf(c))?.[1];
      return step ? ['running', step] : undefined;
    };
    const all = [...creates, ...tasks].map(([prompt, , code]) => ({ prompt, code }));
    const ids = await Promise.all(all.map(({ prompt }) => createOk({ model: 'wan-t2v', prompt })));
    const ended = await Promise.all(ids.map((id) => finish(id)));
    expect(ended.map((v) => [v.prompt, v.status, v.error?.code])).toEqual(
      all.map(({ prompt, code }) => [prompt, 'failed', code]),
    );
    for (const [prompt] of creates) expect(fake.creates().filter((r) => promptOf(r) === prompt)).toHaveLength(1);
  });

  it('a cancel while the task is PENDING reaches DashScope’s cancel call; Kiln stops checking', async () => {
    fake.setScript(['pending']);
    const id = await createOk({ model: 'wan-t2v', prompt: 'an endless queue' });
    await eventually(
      async () => fake.reads().length,
      (n) => n > 0,
    );
    expect((await api()(`/v1/videos/${id}/cancel`, { method: 'POST' })).status).toBe(202);
    const v = await finish(id);
    expect(v).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    expect(v.error.message).toMatch(/the upstream was asked to stop it/);
    expect(fake.cancels()).toHaveLength(1);
    const reads = fake.reads().length;
    await new Promise((r) => setTimeout(r, 800));
    expect(fake.reads()).toHaveLength(reads);
  });

  it('a job past overallTimeoutMs ends upstream_timeout, and DashScope is asked to cancel it', async () => {
    fake.setScript(['pending']);
    const v = await finish(await createOk({ model: 'wan-brief', prompt: 'forever queued' }));
    expect(v).toMatchObject({ status: 'failed', error: { code: 'upstream_timeout' } });
    await eventually(
      async () => fake.cancels().length,
      (n) => n === 1,
    );
    expect(fake.creates()).toHaveLength(1);
  });

  it('a create whose answer is lost ends uncertain, with exactly one create', async () => {
    fake.enqueueCreate(drop());
    const v = await finish(await createOk({ model: 'wan-t2v', prompt: 'a dropped create' }));
    expect(v).toMatchObject({ status: 'failed', error: { code: 'uncertain' } });
    await new Promise((r) => setTimeout(r, 1000));
    expect(fake.creates()).toHaveLength(1);
    expect(fake.reads()).toHaveLength(0);
  });

  it('a failed download (a 503, then a dropped connection) is retried, and the bytes are stored', async () => {
    fake.enqueueDownload(fail(503, 'ServiceUnavailable', 'busy'), drop());
    const v = await finish(await createOk({ model: 'wan-t2v', prompt: 'a stubborn file' }));
    expect(v).toMatchObject({ status: 'completed' });
    expect(fake.downloads()).toHaveLength(3);
    expect(fake.creates()).toHaveLength(1);
  });
});
