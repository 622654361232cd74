// The openai-images provider through Kiln's public API against a fake images upstream: the fields a
// request maps to (size, quality, background, output_format, n), b64_json and url answers copied
// into the blob store, reference images as an edits call (and as Seedream's `image` field), the
// official OpenAI SDK on /v1/images/generations and /v1/images/edits, and options refused at submit.
// Failures, timeouts, lost answers, cancels and the key: openai-images-failures.test.ts.
import OpenAI, { BadRequestError, toFile } from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { FakeImageHost } from '../../../support/fake-images.js';
import { imageSteps, KEY_A, startKiln, submitBody, type Kiln } from '../../../support/kiln.js';
import { TINY_PNG } from '../gemini/fake-gemini.js';
import { ok, startFakeOpenAIImages, type FakeOpenAIImages } from './fake-openai-images.js';

let fake: FakeOpenAIImages;
let host: FakeImageHost;
let kiln: Kiln;

// The bytes are enough for the type sniffing; the pictures need not decode.
const WEBP = Buffer.concat([Buffer.from('RIFF'), Buffer.from([8, 0, 0, 0]), Buffer.from('WEBPVP8 ')]);
const SEEDREAM_SIZES = { '1:1': '2048x2048', '16:9': '2560x1440', '@2K': '2K' };

beforeAll(async () => {
  [fake, host] = await Promise.all([startFakeOpenAIImages(), new FakeImageHost().start('127.0.0.2')]);
  const base = { provider: 'openai-images', baseUrl: fake.baseUrl, timeoutMs: 10_000 };
  kiln = await startKiln({
    env: { REFERENCE_FETCH_ALLOW: '127.0.0.2' },
    models: [
      { ...base, id: 'gpt', upstreamModel: 'gpt-image-1' },
      { ...base, id: 'gpt-open', upstreamModel: 'gpt-image-1', credential: 'none' },
      {
        ...base,
        id: 'seedream',
        upstreamModel: 'seedream-4-0-250828',
        generationsPath: '/api/v3/images/generations',
        referencesIn: 'image',
        responseFormat: 'url',
        maxImages: 1,
        sizes: SEEDREAM_SIZES,
      },
      { id: 'drawn', provider: 'local', latencyMs: 10 },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await Promise.all([fake?.close(), host?.close()]);
});
beforeEach(() => {
  fake.reset();
  host.requests.length = 0;
});

const { api, submit, finish } = imageSteps(() => kiln.baseUrl);
const body = (imageConfig: Record<string, unknown>, extra: Record<string, unknown> = {}, parts?: unknown[]) => ({
  contents: [{ role: 'user', parts: parts ?? [{ text: 'a lighthouse at dusk' }] }],
  generationConfig: { responseModalities: ['IMAGE'], imageConfig: { ...imageConfig, output: 'url' }, ...extra },
});
const bytesAt = async (url: string) => Buffer.from(await (await fetch(url)).arrayBuffer());
const imagesOf = (task: any): string[] =>
  task.candidates.flatMap((c: any) => c.content.parts.map((p: any) => p.inlineData?.data));
const sdk = () => new OpenAI({ apiKey: KEY_A, baseURL: `${kiln.baseUrl}/v1`, maxRetries: 0 });

describe('generateContent → POST /v1/images/generations', () => {
  it('maps aspectRatio, quality, background, outputFormat and candidateCount; stores each b64_json image', async () => {
    fake.enqueue(ok({ image: WEBP }));
    const req = body(
      { aspectRatio: '3:2', quality: 'high', background: 'transparent', outputFormat: 'webp' },
      { candidateCount: 2 },
    );
    const task = await finish(await submit('gpt', req));
    expect(task.status, JSON.stringify(task.error)).toBe('succeeded');
    const [call] = fake.calls();
    expect(call!.path).toBe('/v1/images/generations');
    expect(call!.body).toEqual({
      model: 'gpt-image-1',
      prompt: 'a lighthouse at dusk',
      n: 2,
      size: '1536x1024',
      quality: 'high',
      background: 'transparent',
      output_format: 'webp',
    });
    expect(call!.headers.authorization).toBe(`Bearer ${KEY_A}`);
    expect(call!.headers['idempotency-key']).toBeUndefined();
    const urls = imagesOf(task);
    expect(urls).toHaveLength(2);
    for (const url of urls) {
      expect(url).toMatch(new RegExp(`^${kiln.baseUrl}/v1/files/[a-f0-9]{32}\\.webp$`));
      expect((await bytesAt(url)).equals(WEBP)).toBe(true);
    }
  });

  it('a plain prompt sends only model and prompt; a channel without a credential sends no key', async () => {
    const task = await finish(await submit('gpt-open', body({})));
    expect(task.status).toBe('succeeded');
    expect(fake.calls()[0]!.body).toEqual({ model: 'gpt-image-1', prompt: 'a lighthouse at dusk' });
    expect(fake.calls()[0]!.headers.authorization).toBeUndefined();
  });

  it('a reference image is downloaded through the guard and sent to /v1/images/edits as a file', async () => {
    const parts = [
      { text: 'add a red door' },
      { inlineData: { mimeType: 'image/png', data: `${host.baseUrl}/ok.png` } },
    ];
    const task = await finish(await submit('gpt', body({ aspectRatio: '1:1' }, {}, parts)));
    expect(task.status, JSON.stringify(task.error)).toBe('succeeded');
    expect(host.requests).toEqual(['/ok.png']);
    const [call] = fake.calls();
    expect(call!.path).toBe('/v1/images/edits');
    expect(call!.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
    expect(call!.body).toEqual({ model: 'gpt-image-1', prompt: 'add a red door', size: '1024x1024' });
    expect(call!.files).toHaveLength(1);
    expect(call!.files[0]).toMatchObject({ field: 'image[]', type: 'image/png' });
    expect(call!.files[0]!.bytes.equals(TINY_PNG)).toBe(true);
  });
});

describe('Seedream on Ark: POST /api/v3/images/generations', () => {
  it('a url answer is downloaded at once and served from the blob store; references go as `image`', async () => {
    const parts = [{ text: 'the same cat, in snow' }, { inlineData: { data: `${host.baseUrl}/ok.png` } }];
    const task = await finish(await submit('seedream', body({ aspectRatio: '16:9' }, {}, parts)));
    expect(task.status, JSON.stringify(task.error)).toBe('succeeded');
    const [call] = fake.calls();
    expect(call!.path).toBe('/api/v3/images/generations');
    expect(call!.body).toEqual({
      model: 'seedream-4-0-250828',
      prompt: 'the same cat, in snow',
      size: '2560x1440',
      response_format: 'url',
      image: `data:image/png;base64,${TINY_PNG.toString('base64')}`,
    });
    const [file] = [...fake.files.values()];
    expect(file!.gets).toBe(1);
    const [url] = imagesOf(task);
    expect(url).toMatch(new RegExp(`^${kiln.baseUrl}/v1/files/`));
    expect((await bytesAt(url!)).equals(TINY_PNG)).toBe(true);
    // The upstream's link is nowhere in the task: it expires, Kiln's does not.
    expect(JSON.stringify(task)).not.toContain(fake.baseUrl);
  });

  it('an image size without a ratio uses the `@2K` entry (Seedream picks the ratio from the prompt)', async () => {
    const task = await finish(await submit('seedream', body({ imageSize: '2K' })));
    expect(task.status).toBe('succeeded');
    expect(fake.calls()[0]!.body.size).toBe('2K');
  });

  it('an answer URL on a private address is refused by the guard: upstream_error, never resent', async () => {
    fake.enqueue(ok({ url: 'http://127.0.0.1:9/leak.png' }));
    const task = await finish(await submit('seedream', body({ aspectRatio: '1:1' })));
    expect(task).toMatchObject({ status: 'failed', error: { code: 'upstream_error' } });
    expect(task.error.message).toMatch(/could not be downloaded/);
    expect(fake.calls()).toHaveLength(1);
  });
});

describe('the official OpenAI SDK on /v1/images', () => {
  it('generations: size, quality, background and output_format reach the upstream as asked', async () => {
    const res = await sdk().images.generate({
      model: 'gpt',
      prompt: 'a paper crane',
      size: '1024x1536',
      quality: 'low',
      background: 'opaque',
      output_format: 'jpeg',
      response_format: 'b64_json',
    });
    expect(Buffer.from(res.data![0]!.b64_json!, 'base64').equals(TINY_PNG)).toBe(true);
    expect(fake.calls()[0]!.body).toEqual({
      model: 'gpt-image-1',
      prompt: 'a paper crane',
      size: '1024x1536',
      quality: 'low',
      background: 'opaque',
      output_format: 'jpeg',
    });
  });

  it('edits: the uploaded file travels to the upstream edits call', async () => {
    const image = await toFile(TINY_PNG, 'door.png', { type: 'image/png' });
    const res = await sdk().images.edit({ model: 'gpt', image, prompt: 'paint the door red' });
    expect(res.data![0]!.url).toMatch(new RegExp(`^${kiln.baseUrl}/v1/files/`));
    const [call] = fake.calls();
    expect(call!.path).toBe('/v1/images/edits');
    expect(call!.body).toMatchObject({ model: 'gpt-image-1', prompt: 'paint the door red' });
    expect(call!.files.map((f) => [f.field, f.type, f.bytes.equals(TINY_PNG)])).toEqual([
      ['image[]', 'image/png', true],
    ]);
  });

  it('refuses, naming the parameter: sizes the channel lacks; background and output_format on other models', async () => {
    const refused = async (p: Record<string, unknown>) => {
      const err = await sdk()
        .images.generate({ prompt: 'x', ...p } as never)
        .catch((e: unknown) => e);
      expect(err, JSON.stringify(p)).toBeInstanceOf(BadRequestError);
      return (err as BadRequestError).param;
    };
    expect(await refused({ model: 'gpt', size: '1792x1024' })).toBe('size');
    expect(await refused({ model: 'gpt', quality: 'ultra' })).toBe('quality');
    expect(await refused({ model: 'drawn', background: 'transparent' })).toBe('background');
    expect(await refused({ model: 'drawn', output_format: 'png' })).toBe('output_format');
    expect(fake.calls()).toHaveLength(0);
  });
});

describe('options a channel cannot send are refused at submit, naming the field and the values', () => {
  it('answers 400 invalid_request and sends nothing', async () => {
    const cases: [string, unknown, RegExp][] = [
      ['gpt', body({ aspectRatio: '16:9' }), /aspectRatio "16:9".*allowed: 1:1, 3:2, 2:3/],
      ['gpt', body({ aspectRatio: '1:1', imageSize: '4K' }), /aspectRatio@imageSize "1:1@4K".*allowed: 1:1, 3:2, 2:3/],
      ['gpt', body({ outputFormat: 'gif' }), /outputFormat "gif".*allowed: png, jpeg, webp/],
      ['gpt', body({ background: 'transparent', outputFormat: 'jpeg' }), /outputFormat "jpeg".*allowed: png, webp/],
      ['gpt', body({}, { candidateCount: 11 }), /candidateCount "11".*1 to 10/],
      ['gpt', body({}, { temperature: 0.5 }), /generationConfig.temperature.*allowed: responseModalities/],
      ['gpt', body({ personGeneration: 'ALLOW_ALL' }), /imageConfig.personGeneration/],
      ['gpt', { ...submitBody(), tools: [{ googleSearch: {} }] }, /tools.*allowed: none/],
      ['seedream', body({}, { candidateCount: 2 }), /candidateCount "2".*1 to 1/],
    ];
    for (const [model, req, message] of cases) {
      const res = await api()(`/v1beta/models/${model}:generateContent`, { method: 'POST', json: req });
      expect([res.status, res.json?.error?.code], res.text).toEqual([400, 'invalid_request']);
      expect(res.json.error.message).toMatch(message);
      expect(res.json.error.message).toContain('provider openai-images');
    }
    expect(fake.calls()).toHaveLength(0);
  });
});
