// Gemini long-running video operations end to end: a real Kiln (Temporal, Redis, the local MP4
// renderer and a fake OpenAI-videos upstream) and the unmodified @google/genai SDK polling with
// getVideosOperation and downloading with files.download. SDK 3 sends generateVideos to the
// Enterprise Agent Platform (Vertex) only, so the start is the request its Gemini Developer API
// form wrote (sdkPredictBody), sent as that SDK sent it: POST, x-goog-api-key.
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ApiError,
  GenerateVideosOperation,
  GoogleGenAI,
  type GenerateVideosConfig,
  type GenerateVideosSource,
} from '@google/genai';
import { describe, expect, it } from 'vitest';
import { drop, fail, type FakeOpenAIVideos } from '../providers/openai-videos/fake-openai-videos.js';
import { TINY_PNG } from '../providers/gemini/fake-gemini.js';
import { KEY_A, KEY_B, startKiln, type Kiln } from '../../support/kiln.js';
import { useVideoKiln, videoApi } from '../video/video-kiln.js';

let fake: FakeOpenAIVideos;
let kiln: Kiln;
let calls: ReturnType<typeof videoApi>;

useVideoKiln((f) => ({ kiln, fake, calls } = f));

const sdk = (apiKey = KEY_A) => new GoogleGenAI({ apiKey, httpOptions: { baseUrl: kiln.baseUrl } });

/** The body @google/genai's Gemini Developer API form of generateVideos wrote (its mldev converter). */
function sdkPredictBody(source: GenerateVideosSource, config: GenerateVideosConfig = {}) {
  const instance: Record<string, unknown> = {};
  if (source.prompt !== undefined) instance.prompt = source.prompt;
  if (source.image) instance.image = { bytesBase64Encoded: source.image.imageBytes, mimeType: source.image.mimeType };
  const parameters: Record<string, unknown> = {};
  if (config.numberOfVideos !== undefined) parameters.sampleCount = config.numberOfVideos;
  for (const k of ['durationSeconds', 'aspectRatio', 'resolution', 'personGeneration', 'negativePrompt'] as const)
    if (config[k] !== undefined) parameters[k] = config[k];
  return { instances: [instance], ...(Object.keys(parameters).length ? { parameters } : {}) };
}

/** POST …:predictLongRunning as the SDK sent it; the answer as the SDK's operation object. */
async function predict(model: string, source: GenerateVideosSource, config?: GenerateVideosConfig, key = KEY_A) {
  const res = await fetch(`${kiln.baseUrl}/v1beta/models/${model}:predictLongRunning`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-goog-api-key': key },
    body: JSON.stringify(sdkPredictBody(source, config)),
  });
  return { status: res.status, json: (await res.json()) as any };
}

async function start(model: string, source: GenerateVideosSource, config?: GenerateVideosConfig) {
  const r = await predict(model, source, config);
  expect(r.status, JSON.stringify(r.json)).toBe(200);
  return Object.assign(new GenerateVideosOperation(), r.json);
}

/** The SDK's polling loop, as its documentation writes it. */
async function untilDone(op: GenerateVideosOperation, ai = sdk(), timeoutMs = 40_000) {
  const deadline = Date.now() + timeoutMs;
  while (!op.done) {
    if (Date.now() > deadline) throw new Error(`operation ${op.name} not done in time`);
    await new Promise((r) => setTimeout(r, 200));
    op = await ai.operations.getVideosOperation({ operation: op });
  }
  return op;
}

const videoIdOf = (op: GenerateVideosOperation) => op.name!.split('/operations/')[1]!;
const tempFile = async () => join(await mkdtemp(join(tmpdir(), 'kiln-genai-video-')), 'video.mp4');
const storedBytes = async (url: string) => Buffer.from(await (await fetch(url)).arrayBuffer());

describe('@google/genai 3 against the Gemini video operations', () => {
  it('generateVideos itself refuses the Gemini Developer API, sending nothing', async () => {
    const before = fake.requests.length;
    await expect(sdk().models.generateVideos({ model: 'v-local', source: { prompt: 'x' } })).rejects.toThrow(
      /only supported by the Gemini Enterprise Agent Platform/,
    );
    expect(fake.requests.length).toBe(before);
  });

  it('start, poll with getVideosOperation until done, files.download: the MP4 Kiln stored', async () => {
    let op = await start('v-local', { prompt: 'a lighthouse at dusk' }, { aspectRatio: '16:9', durationSeconds: 2 });
    const id = videoIdOf(op);
    expect(op.name).toBe(`models/v-local/operations/${id}`);
    expect(op.done).toBe(false);
    op = await untilDone(op);
    expect(op.error).toBeUndefined();
    expect(op.metadata).toMatchObject({ videoId: id, status: 'completed', progress: 100 });
    const [generated] = op.response!.generatedVideos!;
    expect(generated!.video!.uri).toBe(`files/${id.slice('video_'.length)}`);
    const file = await tempFile();
    await sdk().files.download({ file: generated!, downloadPath: file });
    const downloaded = await readFile(file);
    // The same task under /v1/videos: its size and seconds, and the very bytes of its video_url.
    const video = (await calls.api()(`/v1/videos/${id}`)).json;
    expect(video).toMatchObject({ id, model: 'v-local', status: 'completed', seconds: '2', size: '320x180' });
    expect(downloaded.equals(await storedBytes(video.video_url))).toBe(true);
    expect(downloaded.subarray(4, 8).toString('latin1')).toBe('ftyp');
    // Listed with the caller's videos (what the console shows), and the uri's download under /v1beta too.
    const list = (await calls.api()('/v1/videos?limit=100')).json;
    expect(list.data.map((v: { id: string }) => v.id)).toContain(id);
    const v1beta = await fetch(`${kiln.baseUrl}/v1beta/files/${id.slice(6)}:download?alt=media`, {
      headers: { 'x-goog-api-key': KEY_A },
    });
    expect([v1beta.status, v1beta.headers.get('content-type')]).toEqual([200, 'video/mp4']);
    expect(Buffer.from(await v1beta.arrayBuffer()).equals(downloaded)).toBe(true);
  });

  it('with an image: stored by Kiln, sent to the upstream as a URL of those bytes', async () => {
    const op = await start(
      'v-oa',
      { prompt: 'animate this', image: { imageBytes: TINY_PNG.toString('base64'), mimeType: 'image/png' } },
      { numberOfVideos: 1, resolution: '720p', aspectRatio: '9:16' },
    );
    const done = await untilDone(op);
    expect(done.error).toBeUndefined();
    const [create] = fake.creates();
    expect(create!.body).toMatchObject({ prompt: 'animate this', size: '720x1280' });
    const imageUrl: string = create!.body.input_reference.image_url;
    expect(imageUrl.startsWith(`${kiln.baseUrl}/v1/files/`)).toBe(true);
    expect((await storedBytes(imageUrl)).equals(TINY_PNG)).toBe(true);
    const file = await tempFile();
    await sdk().files.download({ file: done.response!.generatedVideos![0]!, downloadPath: file });
    expect((await readFile(file)).equals(fake.video)).toBe(true);
  });

  it('a failing upstream: the operation is done with a google.rpc error', async () => {
    const cases: [() => void, number, string][] = [
      [
        () => fake.setScript(['in_progress:10', 'failed:video_generation_failed:the render crashed']),
        14,
        'UPSTREAM_ERROR',
      ],
      [() => fake.enqueueCreate(fail(401, 'bad key')), 7, 'AUTH_FAILED'],
      [() => fake.enqueueCreate(fail(429, 'slow down')), 8, 'UPSTREAM_RATE_LIMITED'],
      // The create's answer is lost after sending: uncertain, never resent.
      [() => fake.enqueueCreate(drop()), 2, 'UNCERTAIN'],
    ];
    for (const [arrange, code, reason] of cases) {
      fake.reset();
      arrange();
      const op = await untilDone(await start('v-oa', { prompt: reason }));
      expect(op.response, reason).toBeUndefined();
      expect(op.error).toMatchObject({ code, details: [expect.objectContaining({ reason })] });
      expect(fake.creates()).toHaveLength(1);
      // No video to download: 409 FAILED_PRECONDITION.
      const res = await fetch(`${kiln.baseUrl}/v1/files/${videoIdOf(op).slice(6)}:download?alt=media`, {
        headers: { 'x-goog-api-key': KEY_A },
      });
      expect([res.status, ((await res.json()) as any).error.status]).toEqual([409, 'FAILED_PRECONDITION']);
    }
  });

  it('a canceled video: done, CANCELLED', async () => {
    fake.setScript(['in_progress:5']);
    const op = await start('v-oa', { prompt: 'cancel me' });
    await calls.until(videoIdOf(op), 'in_progress');
    expect((await calls.api()(`/v1/videos/${videoIdOf(op)}/cancel`, { method: 'POST' })).status).toBe(202);
    const done = await untilDone(op);
    expect(done.error).toMatchObject({ code: 1, details: [expect.objectContaining({ reason: 'CANCELED' })] });
  });
});

describe('bad parameters: 400 INVALID_ARGUMENT, nothing started', () => {
  const refused = async (model: string, source: GenerateVideosSource, config: GenerateVideosConfig, text: string) => {
    const r = await predict(model, source, config);
    expect(r.status, JSON.stringify(r.json)).toBe(400);
    expect(r.json.error).toMatchObject({ code: 400, status: 'INVALID_ARGUMENT' });
    expect(r.json.error.message).toContain(text);
  };

  it('numberOfVideos 1 passes, 2 is refused', async () => {
    await refused('v-oa', { prompt: 'x' }, { numberOfVideos: 2 }, 'one video per operation');
    expect(fake.creates()).toHaveLength(0);
    await untilDone(await start('v-oa', { prompt: 'x' }, { numberOfVideos: 1 }));
    expect(fake.creates()).toHaveLength(1);
  });

  it('a duration the model does not allow, at the edge of its list and one past it', async () => {
    // v-oa allows 4, 8, 12 seconds; v-local 4 and 2.
    await refused(
      'v-oa',
      { prompt: 'x' },
      { durationSeconds: 13 },
      'durationSeconds 13 is not offered by v-oa; allowed: 4, 8, 12',
    );
    await refused('v-local', { prompt: 'x' }, { durationSeconds: 5 }, 'allowed: 4, 2');
    expect(fake.creates()).toHaveLength(0);
    await untilDone(await start('v-oa', { prompt: 'x' }, { durationSeconds: 12 }));
    expect(fake.creates().map((c) => c.body.seconds)).toEqual(['12']);
  });

  it('an unknown aspect ratio, and a resolution the model lacks, naming what is allowed', async () => {
    await refused(
      'v-local',
      { prompt: 'x' },
      { aspectRatio: '4:3' },
      'allowed: 16:9 (its sizes: 320x180 (16:9, 180p), 1280x720 (16:9, 720p))',
    );
    await refused('v-local', { prompt: 'x' }, { aspectRatio: '9:16' }, 'allowed: 16:9');
    await refused('v-local', { prompt: 'x' }, { resolution: '1080p' }, 'allowed: 180p, 720p');
    await refused('v-oa', { prompt: 'p'.repeat(4001) }, {}, 'at most 4000');
    expect(fake.creates()).toHaveLength(0);
  });

  it('the SDK throws ApiError with the status of the answer', async () => {
    const op = Object.assign(new GenerateVideosOperation(), { name: `models/${'m'.repeat(201)}/operations/video_1` });
    const err = await sdk()
      .operations.getVideosOperation({ operation: op })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(400);
    expect(JSON.parse((err as ApiError).message).error.status).toBe('INVALID_ARGUMENT');
  });
});

describe('owner scope', () => {
  it("another owner's operation and file are not found; so is its video under /v1/videos", async () => {
    const op = await untilDone(await start('v-local', { prompt: 'mine' }));
    const err = await sdk(KEY_B)
      .operations.getVideosOperation({ operation: op })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(404);
    expect(JSON.parse((err as ApiError).message).error).toMatchObject({ code: 404, status: 'NOT_FOUND' });
    const download = await sdk(KEY_B)
      .files.download({ file: op.response!.generatedVideos![0]!, downloadPath: await tempFile() })
      .catch((e: unknown) => e);
    expect((download as ApiError).status).toBe(404);
    expect((await calls.api(KEY_B)(`/v1/videos/${videoIdOf(op)}`)).status).toBe(404);
    // A bearer token works as the x-goog-api-key does.
    const bearer = await calls.api()(`/v1beta/${op.name}`);
    expect([bearer.status, bearer.json.done]).toEqual([200, true]);
  });
});

describe('quotas', () => {
  it('a predict is a submit: refused over the owner limit with RESOURCE_EXHAUSTED and Retry-After', async () => {
    const limited = await startKiln({
      workers: false,
      env: { OWNER_SUBMITS_PER_MINUTE: '1' },
      models: [{ id: 'v', kind: 'video', provider: 'local', idempotent: true }],
    });
    try {
      const post = () =>
        fetch(`${limited.baseUrl}/v1beta/models/v:predictLongRunning`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-goog-api-key': KEY_A },
          body: JSON.stringify({ instances: [{ prompt: 'x' }] }),
        });
      expect((await post()).status).toBe(200);
      const second = await post();
      expect(second.status).toBe(429);
      expect(Number(second.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(((await second.json()) as any).error).toMatchObject({
        code: 429,
        status: 'RESOURCE_EXHAUSTED',
        details: [expect.objectContaining({ reason: 'RATE_LIMITED' })],
      });
    } finally {
      await limited.stop();
    }
  });
});
