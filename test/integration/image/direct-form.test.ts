// Direct form (`form: direct`): generateContent answers synchronously in the Gemini response shape,
// through the official @google/genai SDK pointed at Kiln, while each call still runs (and stays
// visible) as a Temporal workflow.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ApiError, GoogleGenAI } from '@google/genai';
import { ERROR_STATUS } from '../../../src/shared/errors.js';
import { fail, ok, startFakeGemini, TINY_PNG, type FakeGemini } from '../providers/gemini/fake-gemini.js';
import { FakeImageHost } from '../../support/fake-images.js';
import { startKiln, http, KEY_A, type Kiln } from '../../support/kiln.js';

let fake: FakeGemini;
let host: FakeImageHost;
let kiln: Kiln;

beforeAll(async () => {
  fake = await startFakeGemini();
  host = await new FakeImageHost().start('127.0.0.2');
  kiln = await startKiln({
    env: { REFERENCE_FETCH_ALLOW: '127.0.0.2' },
    models: [
      {
        id: 'd-img',
        provider: 'gemini',
        form: 'direct',
        baseUrl: fake.baseUrl,
        upstreamModel: 'gemini-up',
        timeoutMs: 5000,
        heartbeatTimeoutMs: 1000,
        maxAttempts: 1,
      },
      { id: 'd-local', provider: 'local', form: 'direct', latencyMs: 50, idempotent: true },
      { id: 't-img', provider: 'gemini', baseUrl: fake.baseUrl, timeoutMs: 5000 },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await fake?.close();
  await host?.close();
});
beforeEach(() => fake.reset());

const sdk = (opts: { apiKey?: string; headers?: Record<string, string> } = { apiKey: KEY_A }) =>
  new GoogleGenAI({
    apiKey: opts.apiKey ?? 'unused-by-kiln',
    httpOptions: { baseUrl: kiln.baseUrl, headers: opts.headers, retryOptions: { attempts: 1 } },
  });
const api = () => http(kiln.baseUrl, KEY_A);
const refs = (n: number) =>
  Array.from({ length: n }, (_, i) => ({
    inlineData: { mimeType: 'image/png', data: `https://refs.example.test/${i}.png` },
  }));

describe('direct form through @google/genai', () => {
  it('answers with base64 inline data by default, in the Gemini shape, with the upstream ids', async () => {
    fake.enqueue(
      ok([{ text: 'Here you go' }, { inlineData: { mimeType: 'image/png', data: TINY_PNG.toString('base64') } }], {
        responseId: 'resp-d1',
        modelVersion: 'gemini-up-002',
      }),
    );
    const res = await sdk().models.generateContent({
      model: 'd-img',
      contents: 'a fox in the snow',
      config: { responseModalities: ['TEXT', 'IMAGE'] },
    });
    expect(res.responseId).toBe('resp-d1');
    expect(res.modelVersion).toBe('gemini-up-002');
    const parts = res.candidates![0]!.content!.parts!;
    expect(parts[0]!.text).toBe('Here you go');
    expect(parts[1]!.inlineData!.mimeType).toBe('image/png');
    expect(Buffer.from(parts[1]!.inlineData!.data!, 'base64').equals(TINY_PNG)).toBe(true);
    expect(res.text).toBe('Here you go');
    // The upstream got the SDK's request, in Gemini form, with the caller's key passed through.
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0].path).toBe('/v1beta/models/gemini-up:generateContent');
    expect(fake.requests[0].headers['x-goog-api-key']).toBe(KEY_A);
    expect(fake.requests[0].body).toMatchObject({
      contents: [{ role: 'user', parts: [{ text: 'a fox in the snow' }] }],
      generationConfig: { responseModalities: ['TEXT', 'IMAGE'] },
    });
  });

  it('answers with image URLs when output=url is asked (body field), and the URL serves the image', async () => {
    const res = await sdk().models.generateContent({
      model: 'd-img',
      contents: 'a fox',
      config: { httpOptions: { extraBody: { output: 'url' } } },
    });
    const data = res.candidates![0]!.content!.parts![0]!.inlineData!.data!;
    expect(data).toMatch(new RegExp(`^${kiln.baseUrl}/v1/files/[a-f0-9]{32}\\.png$`));
    expect(Buffer.from(await (await fetch(data)).arrayBuffer()).equals(TINY_PNG)).toBe(true);
  });

  it('turns an upstream image URL into base64 when base64 is asked (fetched through the SSRF guard)', async () => {
    fake.enqueue(ok([{ inlineData: { mimeType: 'image/png', data: `${host.baseUrl}/ok.png` } }]));
    const res = await sdk().models.generateContent({ model: 'd-img', contents: 'a fox' });
    expect(Buffer.from(res.candidates![0]!.content!.parts![0]!.inlineData!.data!, 'base64').equals(TINY_PNG)).toBe(
      true,
    );
    // A URL that points inside is not fetched: the call fails rather than leak it.
    fake.enqueue(ok([{ inlineData: { mimeType: 'image/png', data: 'http://127.0.0.1:9/secret.png' } }]));
    const err = await sdk()
      .models.generateContent({ model: 'd-img', contents: 'a fox' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).message).toContain('upstream_error');
    expect((err as ApiError).message).toContain('output=url');
  });

  it('works with the built-in local provider, and with a bearer token instead of x-goog-api-key', async () => {
    const res = await sdk({ headers: { authorization: `Bearer ${KEY_A}` } }).models.generateContent({
      model: 'd-local',
      contents: 'a lighthouse',
    });
    const png = Buffer.from(res.candidates![0]!.content!.parts![0]!.inlineData!.data!, 'base64');
    expect(png.subarray(1, 4).toString()).toBe('PNG');
  });

  it('accepts 5 reference images and refuses 6 with too_many_reference_images (400)', async () => {
    const five = await sdk().models.generateContent({
      model: 'd-img',
      contents: [{ role: 'user', parts: [{ text: 'blend' }, ...refs(5)] }],
    });
    expect(five.candidates).toHaveLength(1);
    expect(fake.requests).toHaveLength(1);
    const err = await sdk()
      .models.generateContent({ model: 'd-img', contents: [{ role: 'user', parts: [{ text: 'blend' }, ...refs(6)] }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(400);
    expect((err as ApiError).message).toContain('too_many_reference_images');
    expect(fake.requests).toHaveLength(1);
  });

  it('maps an upstream failure to its task code and HTTP status, with the upstream message', async () => {
    fake.enqueue(fail(401, 'API key not valid.'));
    const err = await sdk()
      .models.generateContent({ model: 'd-img', contents: 'a fox' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(ERROR_STATUS.auth_failed); // the catalogue's status for the code
    expect((err as ApiError).message).toContain('auth_failed');
    expect((err as ApiError).message).toContain('API key not valid.');
  });
});

describe('direct form over plain HTTP', () => {
  it(
    'runs each call as a workflow: the task id is returned ' + 'in a header and the task is readable afterwards',
    async () => {
      const res = await api()('/v1beta/models/d-img:generateContent?output=url', {
        method: 'POST',
        json: { contents: [{ parts: [{ text: 'a fox' }] }] },
      });
      expect(res.status).toBe(200);
      const id = res.headers.get('x-kiln-task-id')!;
      expect(id).toMatch(/^task_[a-f0-9]{32}$/);
      const task = await api()(`/v1/tasks/${id}`);
      expect(task.json).toMatchObject({ id, model: 'd-img', status: 'succeeded' });
      expect(task.json.candidates).toEqual(res.json.candidates);
      const wf = await kiln.api.client.workflow.getHandle(id).describe();
      expect(wf.status.name).toBe('COMPLETED');
      expect(wf.type).toBe('imageTaskWorkflow');
    },
  );

  it.each([
    ['output=png', '?output=png', {}, 'invalid_request'],
    ['conflicting outputs', '?output=url', { output: 'base64' }, 'invalid_request'],
    ['no prompt', '', { contents: [{ parts: [{ text: ' ' }] }] }, 'invalid_request'],
  ])('refuses %s with 400', async (_what, query, extra, code) => {
    const res = await api()(`/v1beta/models/d-img:generateContent${query}`, {
      method: 'POST',
      json: { contents: [{ parts: [{ text: 'a fox' }] }], ...extra },
    });
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe(code);
    expect(fake.requests).toHaveLength(0);
  });

  it('leaves task-form models as they were: 202, output=url required, 8 references allowed', async () => {
    const noUrl = await api()('/v1beta/models/t-img:generateContent', {
      method: 'POST',
      json: { contents: [{ parts: [{ text: 'a fox' }] }] },
    });
    expect(noUrl.json.error.code).toBe('output_must_be_url');
    const eight = await api()('/v1beta/models/t-img:generateContent?output=url', {
      method: 'POST',
      json: { contents: [{ parts: [{ text: 'a fox' }, ...refs(8)] }] },
    });
    expect(eight.status).toBe(202);
  });
});
