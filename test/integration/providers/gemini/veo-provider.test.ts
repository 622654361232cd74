// The gemini-veo video provider through Kiln's /v1/videos API, against a fake Gemini API Veo
// upstream (a real HTTP server speaking predictLongRunning, operations and file downloads): the
// official OpenAI SDK end to end, the reference image as Google takes it, every error mapping, the
// create that may have reached the upstream (uncertain, never sent twice), failover to a local
// channel, a download retried, a cancel (Google has none: Kiln stops checking), and the key kept
// out of logs, Redis and every URL.
import { Writable } from 'node:stream';
import OpenAI, { NotFoundError } from 'openai';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Kiln as KilnClient } from '../../../../src/client/index.js';
import { TINY_PNG } from './fake-gemini.js';
import { FakeImageHost } from '../../../support/fake-images.js';
import { drop, fail, ok, startFakeVeo, type FakeVeo, type VeoFault } from './fake-veo.js';
import { eventually, http, KEY_A, KEY_B, startKiln, waitForStatus, type Kiln } from '../../../support/kiln.js';
import { DONE } from '../../video/video-kiln.js';

const SECRET = 'AIzaSy-veo-SECRET-passthrough-key-8675309';
const UPSTREAM_MODEL = 'veo-3.1-generate-preview';
const logLines: string[] = [];
const sink = new Writable({
  write(chunk, _enc, cb) {
    logLines.push(chunk.toString());
    cb();
  },
});

let fake: FakeVeo;
let host: FakeImageHost; // "public" reference host on 127.0.0.2
let sentinel: FakeImageHost; // on 127.0.0.1: the guard must never reach it
let kiln: Kiln;

beforeAll(async () => {
  [fake, host, sentinel] = await Promise.all([
    startFakeVeo(),
    new FakeImageHost().start('127.0.0.2'),
    new FakeImageHost().start('127.0.0.1'),
  ]);
  const quick = { kind: 'video', pollIntervalMs: 100, heartbeatTimeoutMs: 1000, timeoutMs: 5000, maxAttempts: 3 };
  const veo = { provider: 'gemini-veo', baseUrl: fake.baseUrl, upstreamModel: UPSTREAM_MODEL };
  kiln = await startKiln({
    log: pino({ level: 'trace' }, sink),
    env: { REFERENCE_FETCH_ALLOW: '127.0.0.2' },
    models: [
      // queueTimeoutMs 0: a refusal ends the task at once, so the mapping of each answer is read (the
      // wait and resend: test/integration/channels/refusal-wait.test.ts).
      { ...quick, ...veo, id: 'veo', queueTimeoutMs: 0, sizes: ['1280x720', '720x1280', '1920x1080', '1080x1920'] },
      {
        ...quick,
        id: 'veo-fo',
        seconds: ['4'],
        sizes: ['1280x720'],
        channels: [
          { ...veo, id: 'veo', priority: 2, cooldownAfter: 1000 },
          // The local renderer (jimp, then ffmpeg) takes seconds on a loaded 2-core machine.
          { id: 'local', provider: 'local', priority: 1, latencyMs: 50, idempotent: true, timeoutMs: 30_000 },
        ],
      },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await Promise.all([fake?.close(), host?.close(), sentinel?.close()]);
});
beforeEach(() => {
  fake.reset();
  host.requests.length = 0;
  sentinel.requests.length = 0;
});

const api = (key: string | null = KEY_A) => http(kiln.baseUrl, key);
const createOk = async (body: Record<string, unknown>, key = KEY_A): Promise<string> => {
  const res = await api(key)('/v1/videos', { method: 'POST', json: body });
  expect(res.status, res.text).toBe(200);
  return res.json.id;
};
const finish = (id: string, key = KEY_A) => waitForStatus(() => api(key)(`/v1/videos/${id}`), DONE, 30_000);
const sdk = (key = KEY_A) => new OpenAI({ apiKey: key, baseURL: `${kiln.baseUrl}/v1`, maxRetries: 0 });
const promptOf = (r: { body: any }) => r.body?.instances?.[0]?.prompt as string | undefined;

describe('gemini-veo through /v1/videos', () => {
  it('the official OpenAI SDK: create, poll, download the bytes the upstream served; another owner sees nothing', async () => {
    fake.key = KEY_A;
    const client = sdk();
    const created = await client.videos.create({
      model: 'veo' as never,
      prompt: 'a heron lifting off a misty lake',
      seconds: '8',
      size: '1920x1080' as never,
    });
    expect(created).toMatchObject({ object: 'video', model: 'veo', status: 'queued', seconds: '8', size: '1920x1080' });
    let v = await client.videos.retrieve(created.id);
    const seen = new Set<string>([v.status]);
    while (v.status !== 'completed' && v.status !== 'failed') {
      await new Promise((r) => setTimeout(r, 50));
      v = await client.videos.retrieve(created.id);
      seen.add(v.status);
    }
    expect(v, JSON.stringify(v)).toMatchObject({ status: 'completed', progress: 100, error: null });
    expect(seen.has('in_progress')).toBe(true);
    const content = await client.videos.downloadContent(created.id, { variant: 'video' });
    expect(Buffer.from(await content.arrayBuffer()).equals(fake.video)).toBe(true);

    const [sent] = fake.creates();
    expect(sent!.path).toBe(`/v1beta/models/${UPSTREAM_MODEL}:predictLongRunning`);
    expect(sent!.headers['x-goog-api-key']).toBe(KEY_A);
    expect(sent!.body).toEqual({
      instances: [{ prompt: 'a heron lifting off a misty lake' }],
      parameters: { durationSeconds: 8, aspectRatio: '16:9', resolution: '1080p' },
    });
    // The operation was read until done (each read with the key), then the file fetched once.
    expect(fake.reads().length).toBeGreaterThanOrEqual(2);
    expect(fake.reads().every((r) => r.headers['x-goog-api-key'] === KEY_A)).toBe(true);
    expect(fake.downloads()).toHaveLength(1);
    expect(fake.storageGets()[0]!.headers['x-goog-api-key']).toBeUndefined();

    await expect(sdk(KEY_B).videos.retrieve(created.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(sdk(KEY_B).videos.downloadContent(created.id)).rejects.toBeInstanceOf(NotFoundError);
    const models = await api()('/v1/models');
    expect(models.json.data.find((m: any) => m.id === 'veo')).toMatchObject({
      seconds: ['8', '4', '6'],
      sizes: ['1280x720', '720x1280', '1920x1080', '1080x1920'],
    });
  });

  it('refuses seconds and sizes the model does not offer, before anything reaches the upstream', async () => {
    for (const body of [{ seconds: '7' }, { seconds: '12' }, { size: '1920x1081' }, { size: '1792x1024' }]) {
      const res = await api()('/v1/videos', { method: 'POST', json: { model: 'veo', prompt: 'p', ...body } });
      expect([res.status, res.json.error.code], JSON.stringify(body)).toEqual([400, 'invalid_request']);
    }
    expect(fake.requests).toHaveLength(0);
  });

  it('a reference image goes as Google takes it: downloaded through the guard, bytesBase64Encoded + mimeType', async () => {
    const client = sdk();
    const v = await client.videos.create({
      model: 'veo' as never,
      prompt: 'the picture comes alive',
      seconds: '4',
      size: '720x1280',
      input_reference: { image_url: `${host.baseUrl}/ok.png` },
    });
    const done = await new KilnClient({ baseURL: kiln.baseUrl, apiKey: KEY_A }).videos.wait(v.id, { firstDelayMs: 0 });
    expect(done).toMatchObject({ status: 'completed' });
    expect(host.requests).toEqual(['/ok.png']);
    expect(fake.creates()[0]!.body).toEqual({
      instances: [
        {
          prompt: 'the picture comes alive',
          image: { bytesBase64Encoded: TINY_PNG.toString('base64'), mimeType: 'image/png' },
        },
      ],
      parameters: { durationSeconds: 4, aspectRatio: '9:16' },
    });

    // A reference on a loopback address is refused by the guard: the task fails before any create.
    const refused = await finish(
      await createOk({ model: 'veo', prompt: 'from inside', image: `${sentinel.baseUrl}/ok.png` }),
    );
    expect(refused).toMatchObject({ status: 'failed', error: { code: 'invalid_request' } });
    expect(refused.error.message).toMatch(/reference image cannot be used: .*loopback/);
    expect(sentinel.requests).toHaveLength(0);
    expect(fake.creates()).toHaveLength(1);
  });

  it("maps Google's errors: create answers (HTTP and rpc status) and failed operations", async () => {
    const creates: [string, VeoFault, string][] = [
      ['c429', fail(429, 'Resource has been exhausted (e.g. check quota).'), 'upstream_rate_limited'],
      ['c401', fail(401, 'Request had invalid authentication credentials.'), 'auth_failed'],
      ['c403', fail(403, 'The caller does not have permission.'), 'auth_failed'],
      ['c400', fail(400, 'Invalid value at instances[0].prompt.'), 'invalid_request'],
      ['c500', fail(500, 'Internal error encountered.'), 'upstream_error'],
      ['c503', fail(503, 'The model is overloaded.'), 'upstream_error'],
      ['c504', fail(504, 'Deadline expired before operation could complete.'), 'upstream_timeout'],
      [
        'ckey',
        fail(400, 'API key not valid. Please pass a valid API key.', {
          details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID' }],
        }),
        'auth_failed',
      ],
    ];
    const operations: [string, string, string][] = [
      ['o8', 'error:8:Quota exceeded for the video model.', 'upstream_rate_limited'],
      ['o3', 'error:3:The prompt violates the usage guidelines.', 'invalid_request'],
      ['o4', 'error:4:The video took too long.', 'upstream_timeout'],
      ['o7', 'error:7:Permission denied on the model.', 'auth_failed'],
      ['o13', 'error:13:Internal error.', 'upstream_error'],
      ['o14', 'error:14:Service unavailable.', 'upstream_error'],
      ['ofiltered', 'filtered', 'invalid_request'],
    ];
    fake.onCreate = (c) => creates.find(([p]) => p === promptOf(c))?.[1];
    fake.scriptFor = (c) => {
      const step = operations.find(([p]) => p === promptOf(c))?.[1];
      return step ? ['running', step] : undefined;
    };
    const all = [...creates, ...operations].map(([prompt, , code]) => ({ prompt, code }));
    const ids = await Promise.all(all.map(({ prompt }) => createOk({ model: 'veo', prompt, seconds: '4' })));
    const ended = await Promise.all(ids.map((id) => finish(id)));
    expect(ended.map((v) => [v.prompt, v.status, v.error?.code])).toEqual(
      all.map(({ prompt, code }) => [prompt, 'failed', code]),
    );
    expect(ended.find((v) => v.prompt === 'c429').error.message).toMatch(/429 RESOURCE_EXHAUSTED: Resource has been/);
    expect(ended.find((v) => v.prompt === 'o8').error.message).toMatch(
      /operation failed \(RESOURCE_EXHAUSTED\): Quota/,
    );
    // A create refusal is the answer: never sent again (one channel, nothing to move to).
    for (const [prompt] of creates) expect(fake.creates().filter((r) => promptOf(r) === prompt)).toHaveLength(1);
  });

  it('an operation read answered 503 is retried; one answered 403 ends the task auth_failed', async () => {
    fake.enqueueRead(fail(503, 'busy'));
    const retried = await finish(await createOk({ model: 'veo', prompt: 'a read retried' }));
    expect(retried).toMatchObject({ status: 'completed' });
    fake.reset();
    fake.enqueueRead(fail(403, 'Permission denied.'));
    const denied = await finish(await createOk({ model: 'veo', prompt: 'a read denied' }));
    expect(denied).toMatchObject({ status: 'failed', error: { code: 'auth_failed' } });
    expect(fake.reads()).toHaveLength(1);
  });

  it('a create dropped after sending on a non-idempotent channel ends uncertain, with exactly one create', async () => {
    fake.enqueueCreate(drop());
    const v = await finish(await createOk({ model: 'veo', prompt: 'a dropped create' }));
    // Kiln's uncertain, as OpenAI's four statuses show it.
    expect(v).toMatchObject({ status: 'failed', error: { code: 'uncertain' }, channel: 'default' });
    await new Promise((r) => setTimeout(r, 1500));
    expect(fake.creates()).toHaveLength(1);
    expect(fake.reads()).toHaveLength(0);
  });

  it('a slow create inside the budget still succeeds', async () => {
    fake.enqueueCreate(ok(1500));
    const v = await finish(await createOk({ model: 'veo', prompt: 'a slow create' }));
    expect(v).toMatchObject({ status: 'completed', attempts: 1 });
  });

  it('a veo channel refusing 429 moves the task to the local channel', async () => {
    fake.enqueueCreate(
      fail(429, 'Resource has been exhausted.', {
        details: [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '20s' }],
      }),
    );
    const v = await finish(await createOk({ model: 'veo-fo', prompt: 'a fallback render' }));
    expect(v).toMatchObject({ status: 'completed', channel: 'local', attempts: 2 });
    expect(fake.creates()).toHaveLength(1);
    expect(fake.reads()).toHaveLength(0);
  });

  it('a failed download (a 503, then a dropped connection) is retried, and the bytes are stored', async () => {
    fake.enqueueDownload(fail(503, 'backend unavailable'), drop());
    const v = await finish(await createOk({ model: 'veo', prompt: 'a stubborn file' }));
    expect(v).toMatchObject({ status: 'completed', attempts: 1 });
    expect(fake.downloads()).toHaveLength(3);
    expect(fake.creates()).toHaveLength(1);
    expect(Buffer.from(await (await fetch(v.video_url)).arrayBuffer()).equals(fake.video)).toBe(true);
  });

  it('a cancel ends the task canceled: Google has no cancel, so Kiln stops checking', async () => {
    fake.setScript(['running']);
    const id = await createOk({ model: 'veo', prompt: 'an endless shot' });
    await waitForStatus(() => api()(`/v1/videos/${id}`), 'in_progress');
    await eventually(
      async () => fake.reads().length,
      (n) => n > 0,
    );
    expect((await api(KEY_B)(`/v1/videos/${id}/cancel`, { method: 'POST' })).status).toBe(404);
    const res = await api()(`/v1/videos/${id}/cancel`, { method: 'POST' });
    expect(res.status).toBe(202);
    const v = await finish(id);
    expect(v).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    expect(v.error.message).toMatch(/may keep running there \(Kiln could not ask it to stop\)/);
    const reads = fake.reads().length;
    await new Promise((r) => setTimeout(r, 1500));
    expect(fake.reads()).toHaveLength(reads);
    expect(fake.requests.every((r) => r.method === 'GET' || /:predictLongRunning$/.test(r.path))).toBe(true);
  });

  it('the key never appears in logs, task views, Redis or any upstream URL, even when the upstream echoes it', async () => {
    fake.key = SECRET;
    fake.onCreate = (c) => (promptOf(c) === 'echo' ? fail(400, `Key ${SECRET} is not allowed here.`) : undefined);
    const echoed = await finish(await createOk({ model: 'veo', prompt: 'echo' }, SECRET), SECRET);
    expect(echoed).toMatchObject({ status: 'failed', error: { code: 'invalid_request' } });
    expect(echoed.error.message).toContain('Key [redacted] is not allowed here.');
    const good = await finish(await createOk({ model: 'veo', prompt: 'a quiet one' }, SECRET), SECRET);
    expect(good).toMatchObject({ status: 'completed' });
    expect(fake.requests.filter((r) => r.headers['x-goog-api-key'] === SECRET).length).toBeGreaterThan(3);
    expect(fake.requests.some((r) => `${r.path}?${r.query}`.includes(SECRET))).toBe(false);

    const listed = await api(SECRET)('/v1/videos');
    expect(listed.text.includes(SECRET)).toBe(false);
    for (const k of await kiln.api.redis.keys(`${kiln.config.redisPrefix}*`)) {
      const type = await kiln.api.redis.type(k);
      const dump =
        type === 'hash'
          ? JSON.stringify(await kiln.api.redis.hgetall(k))
          : type === 'zset'
            ? JSON.stringify(await kiln.api.redis.zrange(k, '0', '-1'))
            : type === 'string'
              ? String(await kiln.api.redis.get(k))
              : '';
      expect(k.includes(SECRET) || dump.includes(SECRET), k).toBe(false);
    }
    expect(logLines.length).toBeGreaterThan(0);
    expect(logLines.join('').includes(SECRET)).toBe(false);
  });
});
