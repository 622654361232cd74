// The gemini-veo provider without Redis or Temporal: the models file's refusals (each limit at its
// edge and one past it), the seconds/size → Veo parameter table, Google's error answers in Kiln's
// codes, and the provider's own calls against the fake Veo upstream (a real HTTP server).
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { GeminiVeoVideoProvider } from '../../../activities/providers/gemini/veo.js';
import { VeoHttpFailure } from '../../../activities/providers/gemini/veo-http.js';
import { routed } from '../../../src/config/channels.js';
import { ConfigError, parseModels, videoOptions, type VideoModel } from '../../../src/config/models.js';
import { createSafeFetch } from '../../../src/infra/safe-fetch.js';
import { rpcToCode, veoParameters } from '../../../src/shared/veo.js';
import type { VideoTaskInput } from '../../../src/shared/video-task.js';
import { TINY_PNG } from '../../integration/providers/gemini/fake-gemini.js';
import { FakeImageHost } from '../../support/fake-images.js';
import { fail, startFakeVeo, type FakeVeo } from '../../integration/providers/gemini/fake-veo.js';

const parse = (...models: unknown[]) => parseModels({ models }, 'models.json') as VideoModel[];
const refusal = (...models: unknown[]) => {
  try {
    parse(...models);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  return expect.unreachable('the models file was accepted');
};
const veo = (over: Record<string, unknown> = {}) => ({
  id: 'veo',
  kind: 'video',
  provider: 'gemini-veo',
  baseUrl: 'https://generativelanguage.googleapis.com',
  ...over,
});

describe('the models file', () => {
  it("a gemini-veo model's seconds default to Veo's durations, 8 first; the sizes to Kiln's", () => {
    const [m] = parse(veo());
    expect(videoOptions(m!)).toMatchObject({ seconds: ['8', '4', '6'], sizes: ['720x1280', '1280x720'] });
  });

  it('seconds 4 and 8 (the edges) are taken, 3 and 9 (one past) are refused naming the value', () => {
    expect(() => parse(veo({ seconds: ['4', '5', '6', '7', '8'] }))).not.toThrow();
    expect(refusal(veo({ seconds: ['3', '4'] }))).toMatch(/seconds: seconds "3" cannot be sent to gemini-veo/);
    expect(refusal(veo({ seconds: ['8', '9'] }))).toMatch(/seconds "9" cannot be sent to gemini-veo: .*4 to 8/);
  });

  it('every size Veo can express is taken; any other is refused, and so is a strict (pro) model', () => {
    const sizes = ['1280x720', '720x1280', '1920x1080', '1080x1920', '3840x2160', '2160x3840'];
    expect(() => parse(veo({ sizes }))).not.toThrow();
    expect(refusal(veo({ sizes: ['1280x720', '1281x720'] }))).toMatch(/sizes: size "1281x720" cannot be sent/);
    expect(refusal(veo({ strict: true }))).toMatch(/seconds "10" cannot be sent .*size "1792x1024" cannot be sent/);
  });

  it('a gemini-veo channel cannot take nodeInfoList, nor a value its model accepts for another channel', () => {
    expect(refusal(veo({ form: 'workflow-node' }))).toMatch(/form: gemini-veo cannot take nodeInfoList/);
    const mixed = {
      id: 'mixed',
      kind: 'video',
      channels: [
        { id: 'oa', provider: 'openai-videos', baseUrl: 'http://oa', priority: 2 },
        { id: 'g', provider: 'gemini-veo', baseUrl: 'http://g' },
      ],
    };
    // The model's provider is its first channel's (openai-videos): seconds 4/8/12, and Veo cannot send 12.
    expect(refusal(mixed)).toMatch(/channels\.1\.provider: seconds "12" cannot be sent to gemini-veo/);
    expect(() => parse({ ...mixed, seconds: ['4', '8'] })).not.toThrow();
  });
});

describe('Veo parameters and codes', () => {
  it('size → aspect ratio, and resolution where it is not the default 720p', () => {
    expect(veoParameters('8', '1280x720')).toEqual({ durationSeconds: 8, aspectRatio: '16:9' });
    expect(veoParameters('4', '720x1280')).toEqual({ durationSeconds: 4, aspectRatio: '9:16' });
    expect(veoParameters('6', '1080x1920')).toEqual({ durationSeconds: 6, aspectRatio: '9:16', resolution: '1080p' });
    expect(veoParameters('8', '3840x2160')).toEqual({ durationSeconds: 8, aspectRatio: '16:9', resolution: '4k' });
    expect(veoParameters('12', '1280x720')).toBeUndefined();
    expect(veoParameters('8', '1792x1024')).toBeUndefined();
  });

  it('google.rpc codes, by number (operations) and by name (HTTP bodies)', () => {
    expect(
      [8, 'RESOURCE_EXHAUSTED', 3, 'INVALID_ARGUMENT', 9, 7, 16, 4, 'DEADLINE_EXCEEDED', 13, 14, 2, 99].map(rpcToCode),
    ).toEqual([
      'upstream_rate_limited',
      'upstream_rate_limited',
      'invalid_request',
      'invalid_request',
      'invalid_request',
      'auth_failed',
      'auth_failed',
      'upstream_timeout',
      'upstream_timeout',
      'upstream_error',
      'upstream_error',
      'upstream_error',
      'upstream_error',
    ]);
  });

  it("Google's error answers: code, refusal (another channel may take it), retry delay, the key masked", () => {
    const body = (code: number, status: string, message = 'no', details?: unknown[]) =>
      JSON.stringify({ error: { code, message, status, ...(details ? { details } : {}) } });
    const quota = new VeoHttpFailure(
      429,
      body(429, 'RESOURCE_EXHAUSTED', 'quota for key-123 exceeded', [
        { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '31s' },
      ]),
      'key-123',
      null,
    );
    expect(quota).toMatchObject({
      code: 'upstream_rate_limited',
      info: { status: 429, refused: true, retryAfterMs: 31_000 },
    });
    expect(quota.message).toBe('upstream answered 429 RESOURCE_EXHAUSTED: quota for [redacted] exceeded');
    expect(quota.transient).toBe(true);
    const badKey = new VeoHttpFailure(
      400,
      body(400, 'INVALID_ARGUMENT', 'API key not valid.', [{ reason: 'API_KEY_INVALID' }]),
      undefined,
      null,
    );
    expect(badKey).toMatchObject({ code: 'auth_failed', info: { refused: true } });
    expect(new VeoHttpFailure(400, body(400, 'INVALID_ARGUMENT'), undefined, null)).toMatchObject({
      code: 'invalid_request',
      info: { refused: false },
    });
    expect(new VeoHttpFailure(403, body(403, 'PERMISSION_DENIED'), undefined, null).code).toBe('auth_failed');
    expect(new VeoHttpFailure(504, body(504, 'DEADLINE_EXCEEDED'), undefined, null).code).toBe('upstream_timeout');
    const internal = new VeoHttpFailure(500, 'not json', undefined, '7');
    expect(internal).toMatchObject({ code: 'upstream_error', info: { refused: false, status: 500 } });
    expect(internal.transient).toBe(true);
    expect(new VeoHttpFailure(503, '', undefined, null)).toMatchObject({
      code: 'upstream_error',
      info: { refused: true },
    });
    expect(new VeoHttpFailure(404, body(404, 'NOT_FOUND'), undefined, null).transient).toBe(false);
  });
});

describe('the provider against the fake Veo upstream', () => {
  let fake: FakeVeo;
  let host: FakeImageHost;
  const stored: { data: Buffer; type: string }[] = [];
  const blobs = {
    put: async (data: Buffer, type: string) => {
      stored.push({ data, type });
      return `https://kiln.test/v1/files/${stored.length}.mp4`;
    },
  };
  const fetchReference = createSafeFetch({
    maxBytes: 1024 * 1024,
    maxRedirects: 3,
    acceptType: () => true,
    allow: ['127.0.0.2'],
  });
  const provider = () => new GeminiVeoVideoProvider(blobs, fetchReference);
  beforeAll(async () => {
    [fake, host] = await Promise.all([startFakeVeo(), new FakeImageHost().start('127.0.0.2')]);
  });
  afterAll(async () => Promise.all([fake?.close(), host?.close()]));
  beforeEach(() => {
    fake.reset();
    stored.length = 0;
  });

  const call = (request: Partial<VideoTaskInput['request']> = {}, over: Record<string, unknown> = {}) => {
    const [m] = parse(
      veo({ baseUrl: fake.baseUrl, upstreamModel: 'veo-3.1-generate-preview', sizes: ['1920x1080'], ...over }),
    );
    const input: VideoTaskInput = {
      id: 'video_1',
      owner: 'o',
      model: 'veo',
      created_at: 0,
      request: { prompt: 'a heron', seconds: '8', size: '1920x1080', ...request },
    };
    return { input, model: routed(m!, m!.channels[0]!), key: 'k-1', signal: AbortSignal.timeout(5000) };
  };

  it('creates with the documented body and key, reads the operation, downloads through the redirect without the key', async () => {
    fake.key = 'k-1';
    const events: string[] = [];
    const c = call({ image: `${host.baseUrl}/ok.png` });
    const job = await provider().create({ ...c, dispatching: async () => void events.push('dispatching') });
    expect(events).toEqual(['dispatching']);
    const [created] = fake.creates();
    expect(created!.path).toBe('/v1beta/models/veo-3.1-generate-preview:predictLongRunning');
    expect(created!.headers['x-goog-api-key']).toBe('k-1');
    expect(created!.body).toEqual({
      instances: [
        { prompt: 'a heron', image: { bytesBase64Encoded: TINY_PNG.toString('base64'), mimeType: 'image/png' } },
      ],
      parameters: { durationSeconds: 8, aspectRatio: '16:9', resolution: '1080p' },
    });
    expect(job.upstreamId).toMatch(/^models\/veo-3\.1-generate-preview\/operations\/[a-f0-9]{16}$/);
    expect(await provider().check({ ...c, job })).toEqual({ state: 'running' });
    const done = await provider().check({ ...c, job });
    expect(done).toMatchObject({
      state: 'completed',
      outputs: [{ url: expect.stringContaining(':download?alt=media') }],
    });
    const out = await provider().fetch({
      ...c,
      job,
      outputs: done.state === 'completed' ? done.outputs! : [],
      results: false,
    });
    expect(out).toEqual({ video_url: 'https://kiln.test/v1/files/1.mp4' });
    expect(stored[0]!.data.equals(fake.video)).toBe(true);
    expect(fake.downloads()[0]!.headers['x-goog-api-key']).toBe('k-1');
    // The storage the file URI redirects to is another origin: the key does not follow.
    expect(fake.storageGets()).toHaveLength(1);
    expect(fake.storageGets()[0]!.headers['x-goog-api-key']).toBeUndefined();
  });

  it('an operation that carries the bytes itself (encodedVideo) is stored; a filtered one fails invalid_request', async () => {
    const c = call();
    fake.setScript(['inline']);
    const job = await provider().create({ ...c, dispatching: async () => undefined });
    expect(await provider().check({ ...c, job })).toEqual({ state: 'completed', outputs: [] });
    await provider().fetch({ ...c, job, outputs: [], results: true });
    expect(stored[0]!.data.equals(fake.video)).toBe(true);
    fake.setScript(['filtered']);
    const filtered = await provider().create({ ...c, dispatching: async () => undefined });
    await expect(provider().check({ ...c, job: filtered })).rejects.toMatchObject({
      code: 'invalid_request',
      message: expect.stringMatching(/filtered the video/),
    });
  });

  it('a reference image the guard refuses fails invalid_request before anything is dispatched', async () => {
    let dispatched = false;
    const c = call({ image: 'http://127.0.0.1:9/secret.png' });
    await expect(provider().create({ ...c, dispatching: async () => void (dispatched = true) })).rejects.toMatchObject({
      code: 'invalid_request',
      message: expect.stringMatching(/reference image cannot be used/),
    });
    expect(dispatched).toBe(false);
    expect(fake.creates()).toHaveLength(0);
  });

  it('an operation name the upstream makes up cannot point the check elsewhere', async () => {
    const c = call();
    await expect(provider().check({ ...c, job: { upstreamId: 'models/x/../../admin' } })).rejects.toMatchObject({
      code: 'upstream_error',
    });
    fake.enqueueCreate(fail(503, 'overloaded'));
    await expect(provider().create({ ...c, dispatching: async () => undefined })).rejects.toMatchObject({
      code: 'upstream_error',
      info: { status: 503, refused: true },
    });
  });
});
