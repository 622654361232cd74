// The replicate video provider through Kiln's /v1/videos against a fake Replicate predictions API:
// seconds and size mapped into `input` (duration, aspect_ratio, resolution), progress from the
// model's logs, the file copied into the blob store, an image the model cannot take refused before
// any create, every error class, a cancel that reaches Replicate's cancel call, the job budget, and
// a lost create answer (uncertain, exactly one create).
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { eventually, http, KEY_A, startKiln, waitForStatus, type Kiln } from '../../../support/kiln.js';
import { DONE } from '../../video/video-kiln.js';
import { drop, problem, startFakeReplicate, type FakeReplicate, type ReplicateFault } from './fake-replicate.js';

let fake: FakeReplicate;
let kiln: Kiln;

beforeAll(async () => {
  fake = await startFakeReplicate();
  const rep = {
    kind: 'video',
    provider: 'replicate',
    baseUrl: fake.baseUrl,
    pollIntervalMs: 100,
    heartbeatTimeoutMs: 1000,
    timeoutMs: 5000,
    maxAttempts: 3,
    rateLimitRetries: 0,
    queueTimeoutMs: 0,
    seconds: ['5', '10'],
    sizes: ['1280x720', '720x1280', '1920x1080'],
  };
  kiln = await startKiln({
    models: [
      { ...rep, id: 'seedance', upstreamModel: 'bytedance/seedance-1-pro' },
      {
        ...rep,
        id: 'kling',
        upstreamModel: 'kwaivgi/kling-v2.1',
        inputNames: { image: 'start_image', resolution: null },
        inputDefaults: { negative_prompt: 'blurry' },
      },
      { ...rep, id: 'text-only', upstreamModel: 'minimax/video-01', inputNames: { image: null } },
      { ...rep, id: 'seedance-slow', upstreamModel: 'bytedance/seedance-1-lite', overallTimeoutMs: 2500 },
    ],
  });
}, 120_000);
afterAll(async () => {
  await kiln?.stop();
  await fake?.close();
});
beforeEach(() => fake.reset());

const api = (key = KEY_A) => http(kiln.baseUrl, key);
const createOk = async (body: Record<string, unknown>): Promise<string> => {
  const res = await api()('/v1/videos', { method: 'POST', json: body });
  expect(res.status, res.text).toBe(200);
  return res.json.id;
};
const finish = (id: string) => waitForStatus(() => api()(`/v1/videos/${id}`), DONE, 30_000);
const promptOf = (r: { body: any }) => r.body?.input?.prompt as string | undefined;

describe('replicate videos', () => {
  it('the official OpenAI SDK: create, progress from the logs, the file copied into Kiln', async () => {
    fake.key = KEY_A;
    fake.setScript(['starting', 'processing:30', 'processing:70', 'succeeded']);
    const client = new OpenAI({ apiKey: KEY_A, baseURL: `${kiln.baseUrl}/v1`, maxRetries: 0 });
    const created = await client.videos.create({
      model: 'seedance' as never,
      prompt: 'a heron lifting off a misty lake',
      seconds: '10' as never,
      size: '1920x1080' as never,
    });
    const progress: number[] = [];
    let v = await client.videos.retrieve(created.id);
    while (v.status !== 'completed' && v.status !== 'failed') {
      if (v.status === 'in_progress') progress.push(v.progress);
      await new Promise((r) => setTimeout(r, 50));
      v = await client.videos.retrieve(created.id);
    }
    expect(v, JSON.stringify(v)).toMatchObject({ status: 'completed', progress: 100, error: null });
    expect(progress.some((p) => p === 30 || p === 70)).toBe(true);
    const content = await client.videos.downloadContent(created.id, { variant: 'video' });
    expect(Buffer.from(await content.arrayBuffer()).equals(fake.video)).toBe(true);

    const [sent] = fake.creates();
    expect(sent!.path).toBe('/v1/models/bytedance/seedance-1-pro/predictions');
    expect(sent!.body).toEqual({
      input: { prompt: 'a heron lifting off a misty lake', duration: 10, aspect_ratio: '16:9', resolution: '1080p' },
    });
    expect(sent!.headers.authorization).toBe(`Bearer ${KEY_A}`);
    expect(fake.downloads()[0]!.headers.authorization).toBeUndefined();
  });

  it("renamed inputs: the image under the model's name, a null name not sent, the channel's defaults", async () => {
    const v = await finish(
      await createOk({
        model: 'kling',
        prompt: 'the cat jumps',
        seconds: '5',
        size: '720x1280',
        image: 'https://img.example/cat.png',
      }),
    );
    expect(v.status).toBe('completed');
    expect(fake.creates()[0]!.body).toEqual({
      input: {
        negative_prompt: 'blurry',
        prompt: 'the cat jumps',
        start_image: 'https://img.example/cat.png',
        duration: 5,
        aspect_ratio: '9:16',
      },
    });
  });

  it('an image the model cannot take is refused before any create', async () => {
    const v = await finish(await createOk({ model: 'text-only', prompt: 'p', image: 'https://img.example/a.png' }));
    expect(v).toMatchObject({ status: 'failed', error: { code: 'invalid_request' } });
    expect(v.error.message).toMatch(/^image ".*inputNames\.image/);
    expect(fake.creates()).toHaveLength(0);
  });

  it("maps Replicate's answers: problem details on create, failed predictions", async () => {
    const creates: [string, ReplicateFault, string][] = [
      ['c401', problem(401, 'Unauthenticated', 'You did not pass a valid authentication token'), 'auth_failed'],
      [
        'c402',
        problem(402, 'Insufficient credit', 'You have insufficient credit to run this model.'),
        'insufficient_balance',
      ],
      [
        'c422',
        problem(422, 'Input validation failed', '- input.duration: duration must be one of 5, 10', {
          invalid_fields: [{ type: 'enum', field: 'input.duration', description: 'duration must be one of 5, 10' }],
        }),
        'invalid_request',
      ],
      [
        'c429',
        problem(429, 'Request was throttled', 'Your rate limit resets in ~5s.', { retry_after: 5 }),
        'upstream_rate_limited',
      ],
      ['c503', problem(503, 'Service Unavailable', 'The service is overloaded.'), 'upstream_error'],
    ];
    const predictions: [string, string, string][] = [
      ['pe005', 'failed:The input or output was flagged as sensitive. (E005)', 'invalid_request'],
      ['pboom', 'failed:Model crashed while generating frames', 'upstream_error'],
    ];
    fake.onCreate = (c) => creates.find(([p]) => p === promptOf(c))?.[1];
    fake.scriptFor = (c) => {
      const step = predictions.find(([p]) => p === promptOf(c))?.[1];
      return step ? ['processing', step] : undefined;
    };
    const all = [...creates, ...predictions].map(([prompt, , code]) => ({ prompt, code }));
    const ids = await Promise.all(all.map(({ prompt }) => createOk({ model: 'seedance', prompt, seconds: '5' })));
    const ended = await Promise.all(ids.map((id) => finish(id)));
    expect(ended.map((v) => [v.prompt, v.status, v.error?.code])).toEqual(
      all.map(({ prompt, code }) => [prompt, 'failed', code]),
    );
    expect(ended.find((v) => v.prompt === 'c422').error.message).toMatch(/input\.duration: duration must be one of/);
    expect(ended.find((v) => v.prompt === 'pboom').error.message).toMatch(/prediction failed: Model crashed/);
    for (const p of ['c422', 'pe005', 'pboom']) expect(fake.creates().filter((r) => promptOf(r) === p)).toHaveLength(1);
  });

  it("a cancel mid-job reaches Replicate's cancel call", async () => {
    fake.setScript(['processing']);
    const id = await createOk({ model: 'seedance', prompt: 'an endless shot' });
    await waitForStatus(() => api()(`/v1/videos/${id}`), 'in_progress');
    await eventually(
      async () => fake.reads().length,
      (n) => n > 0,
    );
    expect((await api()(`/v1/videos/${id}/cancel`, { method: 'POST' })).status).toBe(202);
    const v = await finish(id);
    expect(v).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    expect(v.error.message).toMatch(/the upstream was asked to stop it/);
    const [predictionId] = fake.predictions.keys();
    expect(fake.cancels().map((c) => c.path)).toEqual([`/v1/predictions/${predictionId}/cancel`]);
  });

  it('a prediction that never finishes ends upstream_timeout at overallTimeoutMs', async () => {
    fake.setScript(['processing']);
    const v = await finish(await createOk({ model: 'seedance-slow', prompt: 'forever' }));
    expect(v).toMatchObject({ status: 'failed', error: { code: 'upstream_timeout' } });
    expect(fake.creates()).toHaveLength(1);
  });

  it('a create whose answer is lost ends uncertain, with exactly one create', async () => {
    fake.enqueueCreate(drop());
    const v = await finish(await createOk({ model: 'seedance', prompt: 'a dropped create' }));
    expect(v).toMatchObject({ status: 'failed', error: { code: 'uncertain' } });
    await new Promise((r) => setTimeout(r, 1500));
    expect(fake.creates()).toHaveLength(1);
    expect(fake.reads()).toHaveLength(0);
  });
});
