// The fal provider's video jobs through Kiln's /v1/videos API, against a fake fal queue: the
// request as fal's video apps take it (duration, aspect_ratio, resolution, image_url), the answered
// URLs followed, every error class, a cancel and a timeout reaching cancel_url, a lost submit
// answer ending uncertain with one submit, and a models file whose sizes fal cannot take refused.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseModel } from '../../../../src/config/models.js';
import { BODIES, drop, fail, startFakeFal, type FakeFal, type FalFault } from './fake-fal.js';
import { eventually, startKiln, type Kiln } from '../../../support/kiln.js';
import { videoApi } from '../../video/video-kiln.js';

const SECRET = 'fal-key-id:fal-video-SECRET-42';
const APP = 'fal-ai/kling-video/v2/master/text-to-video';
let fake: FakeFal;
let kiln: Kiln;

beforeAll(async () => {
  fake = await startFakeFal();
  const fal = { provider: 'fal', baseUrl: fake.baseUrl, upstreamModel: APP, credential: { env: 'FAL_KEY' } };
  const quick = {
    kind: 'video',
    pollIntervalMs: 100,
    heartbeatTimeoutMs: 1000,
    timeoutMs: 5000,
    maxAttempts: 3,
    queueTimeoutMs: 0,
  };
  kiln = await startKiln({
    env: { FAL_KEY: SECRET },
    models: [
      { ...quick, ...fal, id: 'falv', seconds: ['5', '10'], sizes: ['1280x720', '720x1280', '1920x1080'] },
      { ...quick, ...fal, id: 'falv-short', seconds: ['5'], sizes: ['1280x720'], overallTimeoutMs: 2500 },
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

const v = () => videoApi(kiln);
const promptOf = (r: { body: any }) => r.body?.prompt as string | undefined;
const requestId = () => /requests\/([^/]+)\/status$/.exec(fake.statusReads().at(-1)!.path)![1]!;

describe('fal videos', () => {
  it('a video: the input as fal takes it, the answered URLs followed, the file copied', async () => {
    const image = `${fake.cdnOrigin}/cdn/00aa.png`;
    const id = await v().createOk({ model: 'falv', prompt: 'a wave', seconds: '10', size: '720x1280', image });
    const done = await v().finish(id);
    expect(done, JSON.stringify(done.error)).toMatchObject({ status: 'completed', seconds: '10', size: '720x1280' });
    expect(done.video_url).toMatch(new RegExp(`^${kiln.baseUrl}/v1/files/[a-f0-9]{32}\\.mp4$`));
    expect(Buffer.from(await (await fetch(done.video_url)).arrayBuffer()).equals(fake.video)).toBe(true);
    const [sub] = fake.submits();
    expect(sub!.path).toBe(`/${APP}`);
    expect(sub!.headers.authorization).toBe(`Key ${SECRET}`);
    expect(sub!.body).toEqual({
      prompt: 'a wave',
      duration: '10',
      aspect_ratio: '9:16',
      resolution: '720p',
      image_url: image,
    });
    expect(fake.statusReads().every((r) => r.path.startsWith('/fal-ai/kling-video/requests/'))).toBe(true);
    expect(fake.resultReads()).toHaveLength(1);
    const copied = fake.files().filter((f) => f.path.endsWith('.mp4'));
    expect(copied).toHaveLength(1);
    expect(copied[0]!.headers.authorization).toBeUndefined();
  });

  it("maps fal's errors: submit answers, a model error, a failed request", async () => {
    const submits: [string, FalFault, string][] = [
      ['s401', fail(401, BODIES.unauthorized), 'auth_failed'],
      ['sbalance', fail(403, BODIES.balance), 'insufficient_balance'],
      ['s429', fail(429, BODIES.rateLimited), 'upstream_rate_limited'],
      ['s503', fail(503, BODIES.unavailable), 'upstream_error'],
      [
        's422',
        fail(422, {
          detail: [{ loc: ['body', 'duration'], msg: "Input should be '5' or '10'", type: 'literal_error' }],
        }),
        'invalid_request',
      ],
    ];
    const scripts: [string, string, string][] = [
      ['rpolicy', 'policy', 'invalid_request'],
      ['rtimeout', 'failed:request_timeout', 'upstream_timeout'],
    ];
    fake.onSubmit = (c) => submits.find(([p]) => p === promptOf(c))?.[1];
    fake.scriptFor = (c) => {
      const step = scripts.find(([p]) => p === promptOf(c))?.[1];
      return step ? ['queued', step] : undefined;
    };
    const all = [...submits, ...scripts].map(([prompt, , code]) => ({ prompt, code }));
    const ids = await Promise.all(all.map(({ prompt }) => v().createOk({ model: 'falv', prompt, seconds: '5' })));
    const ended = await Promise.all(ids.map((id) => v().finish(id)));
    expect(ended.map((e) => [e.prompt, e.status, e.error?.code])).toEqual(
      all.map(({ prompt, code }) => [prompt, 'failed', code]),
    );
    const msg = (p: string) => ended.find((e) => e.prompt === p)!.error.message as string;
    expect(msg('s422')).toMatch(/422: duration: Input should be '5' or '10'/);
    expect(msg('rpolicy')).toMatch(/content policy: prompt: The content was flagged/);
    expect(msg('rtimeout')).toMatch(/request_timeout/);
    for (const [prompt] of submits) expect(fake.submits().filter((r) => promptOf(r) === prompt)).toHaveLength(1);
  });

  it('a submit dropped after sending ends uncertain, with exactly one submit', async () => {
    fake.enqueue('submit', drop());
    const done = await v().finish(await v().createOk({ model: 'falv', prompt: 'a lost answer' }));
    expect(done).toMatchObject({ status: 'failed', error: { code: 'uncertain' } });
    await new Promise((r) => setTimeout(r, 1000));
    expect(fake.submits()).toHaveLength(1);
    expect(fake.statusReads()).toHaveLength(0);
  });

  it('a cancel mid-job reaches cancel_url; fal agreed, so the task says it was stopped', async () => {
    fake.setScript(['running']);
    const id = await v().createOk({ model: 'falv', prompt: 'an endless shot' });
    await v().until(id, 'in_progress');
    await eventually(
      async () => fake.statusReads().length,
      (n) => n > 0,
    );
    expect((await v().api()(`/v1/videos/${id}/cancel`, { method: 'POST' })).status).toBe(202);
    const done = await v().finish(id);
    expect(done).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    expect(done.error.message).not.toMatch(/may keep running/);
    expect(fake.cancels().map((r) => [r.path, r.headers.authorization])).toEqual([
      [`/fal-ai/kling-video/requests/${requestId()}/cancel`, `Key ${SECRET}`],
    ]);
  });

  it('a job past overallTimeoutMs fails upstream_timeout, without a second submit', async () => {
    // The video workflow stops checking at its deadline (it does not ask the upstream to stop).
    fake.setScript(['queued']);
    const done = await v().finish(await v().createOk({ model: 'falv-short', prompt: 'a stuck queue' }));
    expect(done).toMatchObject({ status: 'failed', error: { code: 'upstream_timeout' } });
    expect(fake.statusReads().length).toBeGreaterThan(1);
    expect(fake.submits()).toHaveLength(1);
  });

  it('a models file offering a size fal cannot express is refused at start, naming the field', () => {
    const model = { kind: 'video', id: 'x', provider: 'fal', baseUrl: 'https://queue.fal.run', upstreamModel: APP };
    expect(() => parseModel({ ...model, sizes: ['1792x1024'] })).toThrow(
      /sizes: size "1792x1024" cannot be sent to fal/,
    );
    expect(() => parseModel({ ...model, form: 'workflow-node', workflowId: 'w' })).toThrow(
      /fal cannot take nodeInfoList/,
    );
    expect(() => parseModel({ ...model, upstreamModel: undefined })).toThrow(/upstreamModel: fal needs upstreamModel/);
    expect(parseModel({ ...model, sizes: ['1280x720', '848x480'] }).id).toBe('x');
  });
});
