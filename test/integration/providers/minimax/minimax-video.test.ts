// The minimax provider through Kiln's /v1/videos (and the official OpenAI SDK) against the fake
// MiniMax: text-to-video and image-to-video (size as a resolution tier, seconds as duration), the
// video looked up by its file_id and copied into Kiln's blob store, the submit-time and start-up
// refusals, every error class (HTTP 200 with base_resp codes included), passing faults of reads, a
// cancel (MiniMax has none: Kiln stops checking), the job's budget, and a lost create answer
// (uncertain, one create).
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseModels } from '../../../../src/config/models.js';
import { base, drop, httpFail, startFakeMinimax, type FakeMinimax, type MmFault } from './fake-minimax.js';
import { eventually, http, KEY_A, KEY_B, startKiln, waitForStatus, type Kiln } from '../../../support/kiln.js';
import { DONE } from '../../video/video-kiln.js';

let fake: FakeMinimax;
let kiln: Kiln;

beforeAll(async () => {
  fake = await startFakeMinimax();
  const quick = {
    kind: 'video',
    provider: 'minimax',
    baseUrl: fake.baseUrl,
    pollIntervalMs: 100,
    heartbeatTimeoutMs: 1000,
    timeoutMs: 5000,
    maxAttempts: 3,
    // A refusal ends the task at once, so the mapping of each answer is read.
    queueTimeoutMs: 0,
  };
  kiln = await startKiln({
    models: [
      {
        ...quick,
        id: 'hailuo',
        upstreamModel: 'MiniMax-Hailuo-02',
        seconds: ['6', '10'],
        sizes: ['1366x768', '1920x1080', '768x1366', '912x512'],
      },
      { ...quick, id: 'hailuo-fast', upstreamModel: 'MiniMax-Hailuo-2.3-Fast' },
      { ...quick, id: 't2v-01', upstreamModel: 'T2V-01', sizes: ['1280x720'] },
      { ...quick, id: 'hailuo-brief', upstreamModel: 'MiniMax-Hailuo-2.3', overallTimeoutMs: 1500 },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await fake?.close();
});
beforeEach(() => fake.reset());

const IMAGE = 'https://img.example.com/first.png';
const api = (key: string | null = KEY_A) => http(kiln.baseUrl, key);
const sdk = () => new OpenAI({ apiKey: KEY_A, baseURL: `${kiln.baseUrl}/v1`, maxRetries: 0 });
const createOk = async (body: Record<string, unknown>): Promise<string> => {
  const res = await api()('/v1/videos', { method: 'POST', json: body });
  expect(res.status, res.text).toBe(200);
  return res.json.id;
};
const finish = (id: string) => waitForStatus(() => api()(`/v1/videos/${id}`), DONE, 30_000);
const promptOf = (r: { body: any }) => r.body?.prompt as string | undefined;

describe('minimax videos', () => {
  it('text-to-video through the OpenAI SDK: resolution and duration, the file looked up and served from Kiln', async () => {
    fake.key = KEY_A;
    const created = await sdk().videos.create({
      model: 'hailuo' as never,
      prompt: 'a kitten running on grass',
      seconds: '10' as never,
      size: '1366x768' as never,
    });
    const v = await finish(created.id);
    expect(v, JSON.stringify(v)).toMatchObject({ status: 'completed', progress: 100, seconds: '10', size: '1366x768' });
    const [sent] = fake.creates();
    expect(sent!.headers.authorization).toBe(`Bearer ${KEY_A}`);
    expect(sent!.body).toEqual({
      model: 'MiniMax-Hailuo-02',
      prompt: 'a kitten running on grass',
      duration: 10,
      resolution: '768P',
    });
    expect(fake.reads().every((r) => r.query.get('task_id') === fake.reads()[0]!.query.get('task_id'))).toBe(true);
    expect(fake.retrieves()).toHaveLength(1);
    const content = await sdk().videos.downloadContent(created.id);
    expect(Buffer.from(await content.arrayBuffer()).equals(fake.video)).toBe(true);
    expect(v.video_url ?? '').not.toContain(fake.baseUrl);
    expect(fake.downloads()).toHaveLength(1);
    expect(fake.downloads()[0]!.headers.authorization).toBeUndefined();
    const models = (await api()('/v1/models')).json.data;
    expect(models.find((m: any) => m.id === 'hailuo-fast')).toMatchObject({
      seconds: ['6'],
      sizes: ['1366x768', '1920x1080'],
    });
  });

  it('image-to-video: first_frame_image, a portrait size and 512P from an image, an image-only model', async () => {
    const ids = await Promise.all([
      createOk({ model: 'hailuo', prompt: 'portrait', size: '768x1366', image: IMAGE }),
      createOk({ model: 'hailuo', prompt: 'small', size: '912x512', seconds: '10', image: IMAGE }),
      createOk({ model: 'hailuo-fast', prompt: 'fast', input_reference: { image_url: IMAGE } }),
    ]);
    const done = await Promise.all(ids.map(finish));
    expect(done.map((v) => v.status)).toEqual(['completed', 'completed', 'completed']);
    const bodies = Object.fromEntries(fake.creates().map((c) => [promptOf(c), c.body]));
    expect(bodies.portrait).toEqual({
      model: 'MiniMax-Hailuo-02',
      prompt: 'portrait',
      duration: 6,
      resolution: '768P',
      first_frame_image: IMAGE,
    });
    expect(bodies.small).toMatchObject({ resolution: '512P', duration: 10, first_frame_image: IMAGE });
    expect(bodies.fast).toEqual({
      model: 'MiniMax-Hailuo-2.3-Fast',
      prompt: 'fast',
      duration: 6,
      resolution: '768P',
      first_frame_image: IMAGE,
    });
  });

  it('refuses at submit what the model cannot render for this request, naming the field and the allowed values', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ model: 't2v-01', prompt: 'p', image: IMAGE }, /^image "set" cannot be sent .*text-to-video/],
      [{ model: 'hailuo-fast', prompt: 'p' }, /^image "none" cannot be sent .*one image URL/],
      [
        { model: 'hailuo', prompt: 'p', size: '768x1366' },
        /^size "768x1366" .*allowed: 1366x768, 1920x1080, 912x512, a portrait size only with an image/,
      ],
      [{ model: 'hailuo', prompt: 'p', size: '1920x1080', seconds: '10' }, /^seconds "10" .*allowed: 6 \(at 1080P\)/],
      [{ model: 'hailuo', prompt: 'p', size: '912x512' }, /^size "912x512" .*512P only with an image/],
    ];
    for (const [body, message] of cases) {
      const res = await api()('/v1/videos', { method: 'POST', json: body });
      expect(res.status, res.text).toBe(400);
      expect(res.json.error.code).toBe('invalid_request');
      expect(res.json.error.message).toMatch(message);
    }
    expect(fake.creates()).toHaveLength(0);
  });

  it('refuses at start a models file with values MiniMax cannot take, naming them', () => {
    const model = (extra: Record<string, unknown>) => ({
      id: 'x',
      kind: 'video',
      provider: 'minimax',
      baseUrl: 'http://m',
      upstreamModel: 'MiniMax-Hailuo-2.3',
      ...extra,
    });
    const parse = (extra: Record<string, unknown>) => () => parseModels({ models: [model(extra)] }, 'models.json');
    expect(parse({ upstreamModel: 'T2V-01' })).toThrow(/sizes: size "1366x768" cannot be sent to minimax T2V-01/);
    expect(parse({ upstreamModel: 'T2V-01', sizes: ['720x1280'] })).toThrow(/renders landscape 16:9 only/);
    expect(parse({ seconds: ['5'] })).toThrow(/seconds: seconds "5" cannot be sent to minimax/);
    expect(parse({ sizes: ['1280x720'] })).toThrow(/size "1280x720" cannot be sent to minimax MiniMax-Hailuo-2.3/);
    expect(parse({ sizes: ['1920x1080'], seconds: ['10'] })).toThrow(/1080P renders 6 s, none of the model's seconds/);
    expect(parse({ strict: true })).toThrow(/size "1792x1024" cannot be sent to minimax/);
    expect(parse({ form: 'workflow-node' })).toThrow(/minimax cannot take nodeInfoList/);
    expect(parse({ upstreamModel: 'S2V-01' })).toThrow(/needs subject_reference/);
    expect(parse({ upstreamModel: undefined })).toThrow(/minimax needs upstreamModel/);
    expect(parse({})).not.toThrow();
  });

  it("maps MiniMax's answers: base_resp codes on HTTP 200, a gateway's HTTP errors, and tasks that ended Fail", async () => {
    const creates: [string, MmFault, string][] = [
      ['c1004', base(1004, 'token not match group'), 'auth_failed'],
      ['c2049', base(2049, 'invalid api key'), 'auth_failed'],
      ['c1008', base(1008, 'insufficient balance'), 'insufficient_balance'],
      ['c1002', base(1002, 'rate limit'), 'upstream_rate_limited'],
      ['c1026', base(1026, 'input new_sensitive'), 'invalid_request'],
      ['c2013', base(2013, 'invalid params, duration'), 'invalid_request'],
      ['c1000', base(1000, 'unknown error'), 'upstream_error'],
      ['c1001', base(1001, 'request timeout'), 'upstream_timeout'],
      ['c503', httpFail(503, 1000, 'service unavailable'), 'upstream_error'],
      ['c429', httpFail(429, 1002, 'rate limit'), 'upstream_rate_limited'],
    ];
    const tasks: [string, string, string][] = [
      ['t1026', 'fail:1026:input new_sensitive', 'invalid_request'],
      ['t1027', 'fail:1027:output new_sensitive', 'invalid_request'],
      ['t1000', 'fail:1000:unknown error', 'upstream_error'],
    ];
    fake.onCreate = (c) => creates.find(([p]) => p === promptOf(c))?.[1];
    fake.scriptFor = (c) => {
      const step = tasks.find(([p]) => p === promptOf(c))?.[1];
      return step ? ['processing', step] : undefined;
    };
    const all = [...creates, ...tasks].map(([prompt, , code]) => ({ prompt, code }));
    const ids = await Promise.all(all.map(({ prompt }) => createOk({ model: 'hailuo', prompt })));
    const ended = await Promise.all(ids.map((id) => finish(id)));
    expect(ended.map((v) => [v.prompt, v.status, v.error?.code])).toEqual(
      all.map(({ prompt, code }) => [prompt, 'failed', code]),
    );
    expect(ended.find((v) => v.prompt === 't1027').error.message).toMatch(/status_code 1027.*output new_sensitive/);
    for (const [prompt] of creates) expect(fake.creates().filter((r) => promptOf(r) === prompt)).toHaveLength(1);
  });

  it('a wrong key is auth_failed (1004 on HTTP 200), with the key never echoed', async () => {
    fake.key = KEY_B;
    const v = await finish(await createOk({ model: 'hailuo', prompt: 'who am I' }));
    expect(v).toMatchObject({ status: 'failed', error: { code: 'auth_failed' } });
    expect(JSON.stringify(v)).not.toContain(KEY_A);
    expect(fake.requests.some((r) => `${r.path}?${r.query}`.includes(KEY_A))).toBe(false);
  });

  it('passing faults of a read (1002 on HTTP 200, a 502, 1024, a dropped download) are asked again; one create', async () => {
    // Each fetch attempt looks the link up again: 1024, then a download dropped, then both answer.
    fake.enqueueRead(base(1002, 'rate limit'), httpFail(502, 1000, 'bad gateway'));
    fake.enqueueRetrieve(base(1024, 'internal error'));
    fake.enqueueDownload(drop());
    const v = await finish(await createOk({ model: 'hailuo', prompt: 'a stubborn file' }));
    expect(v, JSON.stringify(v.error)).toMatchObject({ status: 'completed' });
    expect(fake.creates()).toHaveLength(1);
    expect(fake.retrieves()).toHaveLength(3);
    expect(fake.downloads()).toHaveLength(2);
  });

  it('a cancel ends the task canceled: MiniMax has no cancel call, so Kiln stops checking', async () => {
    fake.setScript(['processing']);
    const id = await createOk({ model: 'hailuo', prompt: 'an endless shot' });
    await eventually(
      async () => fake.reads().length,
      (n) => n > 0,
    );
    expect((await api()(`/v1/videos/${id}/cancel`, { method: 'POST' })).status).toBe(202);
    const v = await finish(id);
    expect(v).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    expect(v.error.message).toMatch(/may keep running there \(Kiln could not ask it to stop\)/);
    const reads = fake.reads().length;
    await new Promise((r) => setTimeout(r, 800));
    expect(fake.reads()).toHaveLength(reads);
    expect(fake.requests.every((r) => r.method === 'GET' || r.path === '/v1/video_generation')).toBe(true);
  });

  it('a job past overallTimeoutMs ends upstream_timeout with one create, and Kiln stops checking', async () => {
    fake.setScript(['queueing']);
    const v = await finish(await createOk({ model: 'hailuo-brief', prompt: 'forever queued' }));
    expect(v).toMatchObject({ status: 'failed', error: { code: 'upstream_timeout' } });
    expect(fake.creates()).toHaveLength(1);
    const reads = fake.reads().length;
    await new Promise((r) => setTimeout(r, 600));
    expect(fake.reads()).toHaveLength(reads);
  });

  it('a create whose answer is lost ends uncertain, with exactly one create', async () => {
    fake.enqueueCreate(drop());
    const v = await finish(await createOk({ model: 'hailuo', prompt: 'a dropped create' }));
    expect(v).toMatchObject({ status: 'failed', error: { code: 'uncertain' } });
    await new Promise((r) => setTimeout(r, 1000));
    expect(fake.creates()).toHaveLength(1);
    expect(fake.reads()).toHaveLength(0);
  });
});
