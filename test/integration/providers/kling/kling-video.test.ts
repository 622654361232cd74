// The kling provider through Kiln's /v1/videos (the official OpenAI SDK and plain HTTP) against the
// fake Kling: text-to-video and image-to-video as Kling takes them (duration, aspect_ratio, mode,
// external_task_id = Kiln's task id), the JWT signed from the configured access and secret keys,
// the video copied into Kiln's blob store, every error class, a cancel (Kling has no cancel call:
// Kiln stops checking), the job's budget and a retried download (lost create answers: kling-lookup.test.ts).
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { drop, fail, startFakeKling, type FakeKling, type KlingFault } from './fake-kling.js';
import { eventually, KEY_A, startKiln, type Kiln } from '../../../support/kiln.js';
import { videoApi } from '../../video/video-kiln.js';

let fake: FakeKling;
let kiln: Kiln;

beforeAll(async () => {
  fake = await startFakeKling();
  const kling = {
    kind: 'video',
    provider: 'kling',
    baseUrl: fake.baseUrl,
    upstreamModel: 'kling-v2-1-master',
    credential: { env: 'KLING_KEYS' },
    pollIntervalMs: 100,
    heartbeatTimeoutMs: 1000,
    timeoutMs: 5000,
    maxAttempts: 3,
    queueTimeoutMs: 0,
  };
  kiln = await startKiln({
    env: { KLING_KEYS: `${fake.accessKey}:${fake.secretKey}`, KLING_WRONG: `${fake.accessKey}:not-the-secret` },
    models: [
      { ...kling, id: 'kling', sizes: ['1280x720', '720x1280', '1920x1080', '1080x1080'] },
      { ...kling, id: 'kling-pro', strict: true, seconds: ['10'] },
      { ...kling, id: 'kling-wrong', credential: { env: 'KLING_WRONG' } },
      { ...kling, id: 'kling-brief', overallTimeoutMs: 1500 },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await fake?.close();
});
beforeEach(() => fake.reset());

const v = () => videoApi(kiln);
const sdk = () => new OpenAI({ apiKey: KEY_A, baseURL: `${kiln.baseUrl}/v1`, maxRetries: 0 });
const promptOf = (r: { body: any }) => r.body?.prompt as string | undefined;

describe('kling videos', () => {
  it('text-to-video through the OpenAI SDK: the body as Kling takes it, a signed JWT, the bytes served from Kiln', async () => {
    const created = await sdk().videos.create({
      model: 'kling' as never,
      prompt: 'a heron lands on a lake',
      seconds: '10' as never,
      size: '1920x1080' as never,
    });
    const done = await v().finish(created.id);
    expect(done, JSON.stringify(done.error)).toMatchObject({ status: 'completed', progress: 100, seconds: '10' });
    expect(done.video_url).toMatch(new RegExp(`^${kiln.baseUrl}/v1/files/[a-f0-9]{32}\\.mp4$`));
    const [sent] = fake.creates();
    expect(sent!.path).toBe('/v1/videos/text2video');
    // The fake checked the JWT's signature and times; the keys themselves never travel.
    expect(sent!.headers.authorization).toMatch(/^Bearer [\w-]+\.[\w-]+\.[\w-]+$/);
    expect(JSON.stringify(fake.requests)).not.toContain(fake.secretKey);
    expect(sent!.body).toEqual({
      model_name: 'kling-v2-1-master',
      prompt: 'a heron lands on a lake',
      duration: '10',
      aspect_ratio: '16:9',
      mode: 'pro',
      external_task_id: created.id,
    });
    expect(fake.queries().every((q) => /^\/v1\/videos\/text2video\/\d+$/.test(q.path))).toBe(true);
    const content = await sdk().videos.downloadContent(created.id);
    expect(Buffer.from(await content.arrayBuffer()).equals(fake.video)).toBe(true);
    expect(fake.downloads()).toHaveLength(1);
    expect((await v().api()('/v1/models')).json.data.find((m: any) => m.id === 'kling')).toMatchObject({
      seconds: ['5', '10'],
    });
  });

  it('image-to-video: the image, the mode from the size, no aspect_ratio; queried at image2video', async () => {
    const image = 'https://img.example.com/a.png';
    const id = await v().createOk({ model: 'kling', prompt: 'it comes alive', size: '720x1280', image });
    expect((await v().finish(id)).status).toBe('completed');
    const [sent] = fake.creates();
    expect(sent!.path).toBe('/v1/videos/image2video');
    expect(sent!.body).toEqual({
      model_name: 'kling-v2-1-master',
      prompt: 'it comes alive',
      image,
      duration: '5',
      mode: 'std',
      external_task_id: id,
    });
    expect(fake.queries().every((q) => q.path.startsWith('/v1/videos/image2video/'))).toBe(true);
  });

  it("a strict (pro) model asks for Kling's pro mode; its sizes go as their nearest frame", async () => {
    const id = await v().createOk({ model: 'kling-pro', prompt: 'a pro shot', size: '1024x1792' });
    expect((await v().finish(id)).status).toBe('completed');
    expect(fake.creates()[0]!.body).toMatchObject({ duration: '10', aspect_ratio: '9:16', mode: 'pro' });
    const res = await v().create({ model: 'kling-pro', prompt: 'p', seconds: '5' });
    expect(res.status).toBe(400);
    expect(res.json.error.message).toMatch(/seconds must be one of "10"/);
  });

  it("maps Kling's errors: create answers (by business code) and tasks that ended failed", async () => {
    const creates: [string, KlingFault, string][] = [
      ['c1000', fail(401, 1000, 'Authentication failed'), 'auth_failed'],
      ['c1102', fail(429, 1102, 'Resource pack depleted or expired'), 'insufficient_balance'],
      ['c1103', fail(403, 1103, 'Unauthorized access to requested resource'), 'auth_failed'],
      ['c1201', fail(400, 1201, 'Invalid parameters: cfg_scale'), 'invalid_request'],
      ['c1301', fail(400, 1301, 'Trigger the content security policy of the platform'), 'invalid_request'],
      ['c1302', fail(429, 1302, 'The API request is too fast'), 'upstream_rate_limited'],
      ['c1303', fail(429, 1303, 'parallel task over resource pack limit'), 'upstream_rate_limited'],
      ['c5000', fail(500, 5000, 'Server internal error'), 'upstream_error'],
      ['c5001', fail(503, 5001, 'Server temporarily unavailable'), 'upstream_error'],
    ];
    const tasks: [string, string, string][] = [
      ['t-safety', 'failed:Failure to pass the risk control system', 'invalid_request'],
      ['t-internal', 'failed:internal error, please retry', 'upstream_error'],
    ];
    fake.onCreate = (c) => creates.find(([p]) => p === promptOf(c))?.[1];
    fake.scriptFor = (c) => {
      const step = tasks.find(([p]) => p === promptOf(c))?.[1];
      return step ? ['processing', step] : undefined;
    };
    const all = [...creates, ...tasks].map(([prompt, , code]) => ({ prompt, code }));
    const ids = await Promise.all(all.map(({ prompt }) => v().createOk({ model: 'kling', prompt })));
    const ended = await Promise.all(ids.map((id) => v().finish(id)));
    expect(ended.map((x) => [x.prompt, x.status, x.error?.code])).toEqual(
      all.map(({ prompt, code }) => [prompt, 'failed', code]),
    );
    for (const [prompt] of creates) expect(fake.creates().filter((r) => promptOf(r) === prompt)).toHaveLength(1);
    expect(ended.find((x) => x.prompt === 't-safety')!.error.message).toMatch(/risk control/);
  });

  it('keys that do not sign a valid JWT end auth_failed, naming Kling’s answer and never the keys', async () => {
    const done = await v().finish(await v().createOk({ model: 'kling-wrong', prompt: 'p' }));
    expect(done).toMatchObject({ status: 'failed', error: { code: 'auth_failed' } });
    expect(done.error.message).toMatch(/401 code 1002/);
    expect(done.error.message).not.toContain('not-the-secret');
  });

  it('a cancel mid-job stops Kiln checking (Kling has no cancel call)', async () => {
    fake.setScript(['processing']);
    const id = await v().createOk({ model: 'kling', prompt: 'an endless render' });
    await eventually(
      async () => fake.queries().length,
      (n) => n > 0,
    );
    expect((await v().api()(`/v1/videos/${id}/cancel`, { method: 'POST' })).status).toBe(202);
    const done = await v().finish(id);
    expect(done).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    const queries = fake.queries().length;
    await new Promise((r) => setTimeout(r, 800));
    expect(fake.queries()).toHaveLength(queries);
    expect(fake.requests.filter((r) => r.method !== 'GET')).toHaveLength(1);
  });

  it('a job past overallTimeoutMs ends upstream_timeout, with one create', async () => {
    fake.setScript(['submitted']);
    const done = await v().finish(await v().createOk({ model: 'kling-brief', prompt: 'forever queued' }));
    expect(done).toMatchObject({ status: 'failed', error: { code: 'upstream_timeout' } });
    expect(fake.creates()).toHaveLength(1);
  });

  it('a failed download (a 503, then a dropped connection) is retried, and the bytes are stored', async () => {
    fake.enqueueDownload(fail(503, 5001, 'busy'), drop());
    const done = await v().finish(await v().createOk({ model: 'kling', prompt: 'a stubborn file' }));
    expect(done).toMatchObject({ status: 'completed' });
    expect(fake.downloads()).toHaveLength(3);
    expect(fake.creates()).toHaveLength(1);
  });
});
