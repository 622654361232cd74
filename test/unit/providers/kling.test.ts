// How Kiln's video requests read as Kling tasks (src/shared/kling.ts), Kling's business codes in
// Kiln's terms, the JWT Kiln signs, and the provider's lookup by external_task_id against the fake
// Kling (found → the task, Kling's 1203 → absent, anything else → thrown).
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { authorization, KlingFailure, taskFailed } from '../../../activities/providers/kling/api.js';
import { KlingVideoProvider } from '../../../activities/providers/kling/video.js';
import type { VideoCall } from '../../../activities/providers/contract.js';
import type { BlobStore } from '../../../src/blobs/local.js';
import { parseModel, videoOptions, type VideoModel } from '../../../src/config/models.js';
import { klingCodeOf, klingRefused, klingVideoTask } from '../../../src/shared/kling.js';
import type { VideoRequest } from '../../../src/shared/video-task.js';
import { TransportFailure } from '../../../src/upstreams/failures.js';
import { closedPortUrl } from '../../support/fake-server.js';
import { drop, fail, startFakeKling, type FakeKling } from '../../integration/providers/kling/fake-kling.js';

const req = (extra: Partial<VideoRequest> = {}): VideoRequest => ({
  prompt: 'a heron',
  seconds: '5',
  size: '1280x720',
  ...extra,
});
const opts = { strict: false, externalTaskId: 'video_0123' };

describe('kling mapping', () => {
  it('text-to-video: duration, aspect ratio and mode from seconds and size; external_task_id is the task id', () => {
    expect(klingVideoTask(req(), 'kling-v2-1-master', opts)).toEqual({
      task: {
        path: 'text2video',
        body: {
          model_name: 'kling-v2-1-master',
          prompt: 'a heron',
          duration: '5',
          aspect_ratio: '16:9',
          mode: 'std',
          external_task_id: 'video_0123',
        },
      },
    });
    expect(klingVideoTask(req({ size: '1080x1920', seconds: '10' }), 'm', opts)).toMatchObject({
      task: { body: { aspect_ratio: '9:16', mode: 'pro', duration: '10' } },
    });
  });

  it('image-to-video: the image, no aspect_ratio (the image sets the frame); a strict model always asks for pro', () => {
    const r = klingVideoTask(req({ image: 'https://img.example/a.png', size: '720x1280' }), 'm', {
      ...opts,
      strict: true,
    });
    expect(r).toMatchObject({
      task: { path: 'image2video', body: { image: 'https://img.example/a.png', mode: 'pro' } },
    });
    expect('task' in r && 'aspect_ratio' in r.task.body).toBe(false);
  });

  it('what Kling cannot express is refused, naming the field and the allowed values', () => {
    expect(klingVideoTask(req({ seconds: '8' }), 'm', opts)).toEqual({
      refusal: { field: 'seconds', got: '8', allowed: ['5', '10'] },
    });
    expect(klingVideoTask(req({ size: '1000x1000' }), 'm', opts)).toMatchObject({
      refusal: { field: 'size', got: '1000x1000' },
    });
    const nodes = [{ nodeId: '1', fieldName: 'x', fieldValue: 1 }];
    expect(klingVideoTask(req({ nodeInfoList: nodes }), 'm', opts)).toMatchObject({
      refusal: { field: 'nodeInfoList' },
    });
  });

  it('the models file: seconds and sizes Kling cannot take, the workflow-node form, no credential are refused at start', () => {
    const base = {
      id: 'k',
      kind: 'video',
      provider: 'kling',
      baseUrl: 'https://api-singapore.klingai.com',
      upstreamModel: 'kling-v2-1-master',
    };
    expect(() => parseModel({ ...base, seconds: ['5', '8'] })).toThrow(/seconds: seconds "8" cannot be sent to kling/);
    expect(() => parseModel({ ...base, sizes: ['1024x1024'] })).toThrow(
      /sizes: size "1024x1024" cannot be sent to kling/,
    );
    expect(() => parseModel({ ...base, form: 'workflow-node' })).toThrow(/form: kling cannot take nodeInfoList/);
    expect(() => parseModel({ ...base, credential: 'none' })).toThrow(/credential: kling needs a credential/);
    expect(() => parseModel({ ...base, upstreamModel: undefined })).toThrow(/upstreamModel: kling needs upstreamModel/);
    // The strict contract's 15 and 25 seconds are beyond Kling; its 10 and its sizes are not.
    expect(() => parseModel({ ...base, strict: true })).toThrow(/seconds "15" cannot be sent to kling/);
    expect(parseModel({ ...base, strict: true, seconds: ['10'] }).id).toBe('k');
    expect(videoOptions(parseModel(base) as VideoModel).seconds).toEqual(['5', '10']);
  });
});

describe("kling's codes", () => {
  it('business codes → Kiln codes, and which were refused before processing', () => {
    const table: [number, number, string, boolean][] = [
      [1000, 401, 'auth_failed', true],
      [1004, 401, 'auth_failed', true],
      [1101, 429, 'insufficient_balance', true],
      [1102, 429, 'insufficient_balance', true],
      [1103, 403, 'auth_failed', true],
      [1200, 400, 'invalid_request', false],
      [1201, 400, 'invalid_request', false],
      [1203, 404, 'invalid_request', false],
      [1301, 400, 'invalid_request', false],
      [1302, 429, 'upstream_rate_limited', true],
      [1303, 429, 'upstream_rate_limited', true],
      [1304, 429, 'auth_failed', true],
      [5000, 500, 'upstream_error', false],
      [5001, 503, 'upstream_error', true],
      [5002, 504, 'upstream_timeout', false],
    ];
    for (const [code, status, kiln, refused] of table) {
      expect([code, klingCodeOf(code, status)]).toEqual([code, kiln]);
      expect([code, klingRefused(code, status)]).toEqual([code, refused]);
    }
    // No business code (a proxy's page): the HTTP status decides.
    expect(klingCodeOf(undefined, 502)).toBe('upstream_error');
    expect(klingRefused(undefined, 503)).toBe(true);
  });

  it('a failure never shows the keys, even when the answer echoes them', () => {
    const f = new KlingFailure(
      401,
      1002,
      'bad token for AKlive-1234 / SKlive-secret',
      'AKlive-1234:SKlive-secret',
      null,
    );
    expect(f.message).not.toMatch(/AKlive-1234|SKlive-secret/);
    expect(f.info).toMatchObject({ status: 401, refused: true });
    expect(taskFailed('Failure to pass the risk control system').code).toBe('invalid_request');
    expect(taskFailed('internal error').code).toBe('upstream_error');
  });

  it('the JWT: HS256 over {iss, exp = now + 1800, nbf = now − 5}, signed with the secret key', () => {
    const header = authorization('AK1:SK1', 1_700_000_000_000)!;
    const [h, p, sig] = header.replace(/^Bearer /, '').split('.') as [string, string, string];
    expect(JSON.parse(Buffer.from(h, 'base64url').toString())).toEqual({ alg: 'HS256', typ: 'JWT' });
    expect(JSON.parse(Buffer.from(p, 'base64url').toString())).toEqual({
      iss: 'AK1',
      exp: 1_700_001_800,
      nbf: 1_699_999_995,
    });
    expect(sig).toBe(createHmac('sha256', 'SK1').update(`${h}.${p}`).digest('base64url'));
    expect(authorization('relay-key')).toBe('Bearer relay-key');
    expect(authorization(undefined)).toBeUndefined();
  });
});

describe('kling lookup by external_task_id', () => {
  let fake: FakeKling;
  const provider = new KlingVideoProvider({} as BlobStore);
  beforeAll(async () => {
    fake = await startFakeKling();
  });
  afterAll(() => fake?.close());
  beforeEach(() => fake.reset());

  const call = (id: string, request: VideoRequest = req(), baseUrl = fake.baseUrl): VideoCall => ({
    input: { id, request } as VideoCall['input'],
    model: { id: 'k', baseUrl, upstreamModel: 'kling-v2-1-master', strict: false } as VideoCall['model'],
    key: `${fake.accessKey}:${fake.secretKey}`,
    signal: AbortSignal.timeout(5000),
  });
  const dispatching = async () => {};

  it('found: the task a create whose answer was lost made, at the path of its kind', async () => {
    fake.enqueueCreate(drop(true));
    const request = req({ image: 'https://img.example/a.png' });
    await expect(provider.create({ ...call('video_aa', request), dispatching })).rejects.toBeInstanceOf(
      TransportFailure,
    );
    const r = await provider.lookup(call('video_aa', request));
    expect(r).toMatchObject({ found: { upstreamId: expect.stringMatching(/^\d+$/), refs: { path: 'image2video' } } });
    expect(fake.lookups().map((q) => q.path)).toEqual(['/v1/videos/image2video/video_aa']);
    // The found job is checked by Kling's own task id.
    const found = (r as { found: { upstreamId: string } }).found;
    expect(await provider.check({ ...call('video_aa', request), job: found as never })).toEqual({ state: 'running' });
    expect(fake.queries().at(-1)!.path).toBe(`/v1/videos/image2video/${found.upstreamId}`);
  });

  it("absent: Kling's 1203 for an id it never received", async () => {
    fake.enqueueCreate(drop(false));
    await expect(provider.create({ ...call('video_bb'), dispatching })).rejects.toBeInstanceOf(TransportFailure);
    expect(await provider.lookup(call('video_bb'))).toEqual({ absent: true });
  });

  it('unreachable or refusing: thrown, never absent', async () => {
    fake.enqueueRead(fail(500, 5000, 'Server internal error'));
    await expect(provider.lookup(call('video_cc'))).rejects.toMatchObject({ code: 'upstream_error' });
    fake.enqueueRead(fail(401, 1004, 'Authorization has expired'));
    await expect(provider.lookup(call('video_cc'))).rejects.toMatchObject({ code: 'auth_failed' });
    await expect(provider.lookup(call('video_cc', req(), await closedPortUrl()))).rejects.toBeInstanceOf(
      TransportFailure,
    );
  });
});
