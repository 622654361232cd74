// POST /v1/images/edits with the unmodified official openai SDK: reference files reach the fake
// Gemini upstream as inline images, in order; Prefer: respond-async; each limit of the form (files,
// bytes per file, bytes per body, parts) at its edge and one past it, and hostile or wrong input
// refused cleanly. Generations, errors, quotas and keys: openai-images.test.ts.
import { toFile } from 'openai';
import { describe, expect, it } from 'vitest';
import { EDIT_LIMITS } from '../../../src/openai-images/multipart.js';
import { TINY_PNG } from '../providers/gemini/fake-gemini.js';
import { KEY_A, waitForStatus } from '../../support/kiln.js';
import {
  apiOf,
  form,
  JPEG,
  png,
  pngOf,
  sdkError,
  sdkOf,
  taskIds,
  useImagesKiln,
  type ImagesEnv,
} from './openai-images-kiln.js';

let env: ImagesEnv;
useImagesKiln((e) => (env = e));

const sdk = (key = KEY_A) => sdkOf(env.kiln, key);
const api = (key = KEY_A) => apiOf(env.kiln, key);
const postForm = (body: Buffer, key = KEY_A, boundary = 'kb0') =>
  api(key)('/v1/images/edits', {
    method: 'POST',
    body: new Uint8Array(body),
    headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
  });

describe('images.edit', () => {
  it('Prefer: respond-async: 202 and the task to poll', async () => {
    const { response } = await sdk()
      .images.edit({ model: 'gem', prompt: 'blue', image: await png(200) }, { headers: { Prefer: 'respond-async' } })
      .withResponse();
    expect(response.status).toBe(202);
    await waitForStatus(() => api()(`/v1/tasks/${taskIds(response)[0]}`), 'succeeded');
  });

  it('one file: an inline reference image after the prompt, at the fake Gemini upstream', async () => {
    const image = await png(300, 'cat.png');
    const res = await sdk().images.edit({ model: 'gem', image, prompt: 'make the cat blue' });
    expect(res.data![0]!.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1\/files\//);
    const sent = env.fake.requests[0]!.body as any;
    expect(sent.contents).toEqual([
      {
        role: 'user',
        parts: [
          { text: 'make the cat blue' },
          { inlineData: { mimeType: 'image/png', data: pngOf(300).toString('base64') } },
        ],
      },
    ]);
  });

  it('two files (image[]): both, in order, each with the type its bytes tell', async () => {
    const files = [await png(100, 'a.png'), await toFile(JPEG, 'b.jpg', { type: 'image/jpeg' })];
    const res = await sdk().images.edit({ model: 'gem', image: files, prompt: 'combine', response_format: 'b64_json' });
    expect(Buffer.from(res.data![0]!.b64_json!, 'base64').subarray(0, 8)).toEqual(TINY_PNG.subarray(0, 8));
    const parts = (env.fake.requests[0]!.body as any).contents[0].parts;
    expect(parts.map((p: any) => p.text ?? p.inlineData.mimeType)).toEqual(['combine', 'image/png', 'image/jpeg']);
    expect(parts[2].inlineData.data).toBe(JPEG.toString('base64'));
  });

  it('a model with inlineReferences passes the files on as they are (only URLs are downloaded)', async () => {
    await sdk().images.edit({ model: 'gem-inline', image: await png(150), prompt: 'as is' });
    const parts = (env.fake.requests[0]!.body as any).contents[0].parts;
    expect(parts[1]).toEqual({ inlineData: { mimeType: 'image/png', data: pngOf(150).toString('base64') } });
  });

  it('8 files are the limit; 9 are 400 too_many_reference_images', async () => {
    const eight = await Promise.all(Array.from({ length: 8 }, (_, i) => png(100, `${i}.png`)));
    await sdk().images.edit({ model: 'gem', image: eight, prompt: 'eight' });
    expect((env.fake.requests[0]!.body as any).contents[0].parts).toHaveLength(9);
    const err = await sdkError(sdk().images.edit({ model: 'gem', image: [...eight, await png(100)], prompt: 'nine' }));
    expect([err.status, err.code, err.param]).toEqual([400, 'too_many_reference_images', 'image']);
    expect(env.fake.requests).toHaveLength(1);
  });

  it(`a file of ${EDIT_LIMITS.fileBytes} bytes passes whole; one byte more is 413 image_too_large`, async () => {
    await sdk().images.edit({ model: 'gem', image: await png(EDIT_LIMITS.fileBytes), prompt: 'big' });
    const data = (env.fake.requests[0]!.body as any).contents[0].parts[1].inlineData.data;
    expect(Buffer.from(data, 'base64').length).toBe(EDIT_LIMITS.fileBytes);
    const err = await sdkError(
      sdk().images.edit({ model: 'gem', image: await png(EDIT_LIMITS.fileBytes + 1), prompt: 'big' }),
    );
    expect([err.status, err.code, err.param]).toEqual([413, 'image_too_large', 'image']);
  });

  it(`a body of ${EDIT_LIMITS.bodyBytes} bytes is taken (base64 still fits one payload); one more is 413`, async () => {
    const sized = (total: number) => {
      const head = [
        { name: 'model', value: 'gem' },
        { name: 'prompt', value: 'two big ones' },
        { name: 'image[]', value: pngOf(EDIT_LIMITS.fileBytes), file: 'a.png' },
      ];
      const overhead = form([...head, { name: 'image[]', value: Buffer.alloc(0), file: 'b.png' }]).length;
      return form([...head, { name: 'image[]', value: pngOf(total - overhead), file: 'b.png' }]);
    };
    const edge = sized(EDIT_LIMITS.bodyBytes);
    expect(edge.length).toBe(EDIT_LIMITS.bodyBytes);
    const ok = await postForm(edge);
    expect(ok.status, ok.text.slice(0, 300)).toBe(200);
    expect((env.fake.requests[0]!.body as any).contents[0].parts).toHaveLength(3);
    const past = await postForm(sized(EDIT_LIMITS.bodyBytes + 1));
    expect([past.status, past.json.error.code]).toEqual([413, 'request_too_large']);
    expect(past.json.error.message).toContain(String(EDIT_LIMITS.bodyBytes));
  });

  it(`${EDIT_LIMITS.parts} parts are read; one more is refused before parsing`, async () => {
    const parts = (n: number) =>
      form(Array.from({ length: n }, (_, i) => ({ name: i === 0 ? 'model' : `f${i}`, value: 'x' })));
    const edge = await postForm(parts(EDIT_LIMITS.parts));
    expect([edge.status, edge.json.error.message]).toEqual([
      400,
      'image is required: 1 to 8 image files (image, or image[] for several).',
    ]);
    const past = await postForm(parts(EDIT_LIMITS.parts + 1));
    expect([past.status, past.json.error.message]).toEqual([
      400,
      `The form has 33 parts; at most ${EDIT_LIMITS.parts} are accepted.`,
    ]);
  });

  it('hostile or wrong input is refused cleanly: never a 5xx, never a hang', async () => {
    const started = Date.now();
    const huge = await postForm(Buffer.alloc(20 * 1024 * 1024, 0x41));
    expect([huge.status, huge.json.error.code]).toEqual([413, 'request_too_large']);
    const many = await postForm(form(Array.from({ length: 10_000 }, (_, i) => ({ name: `f${i}`, value: '' }))));
    expect([many.status, many.json.error.message]).toEqual([
      400,
      `The form has 10000 parts; at most ${EDIT_LIMITS.parts} are accepted.`,
    ]);
    const text = await sdkError(
      sdk().images.edit({
        model: 'gem',
        prompt: 'x',
        image: await toFile(Buffer.from('hello'), 'a.txt', { type: 'text/plain' }),
      }),
    );
    expect([text.status, text.param, text.message]).toEqual([
      400,
      'image',
      '400 Image 1 of 1 is sent as text/plain; only image files (PNG, JPEG, WebP, GIF) are accepted.',
    ]);
    const pdf = await sdkError(
      sdk().images.edit({
        model: 'gem',
        prompt: 'x',
        image: await toFile(Buffer.from('%PDF-1.7 ...'), 'a.png', { type: 'image/png' }),
      }),
    );
    expect([pdf.status, pdf.param]).toEqual([400, 'image']);
    const mask = await sdkError(
      sdk().images.edit({ model: 'gem', prompt: 'x', image: await png(100), mask: await png(100) }),
    );
    expect([mask.status, mask.param]).toEqual([400, 'mask']);
    expect(mask.message).toContain('not masks');
    const json = await api()('/v1/images/edits', { method: 'POST', json: { model: 'gem', prompt: 'x' } });
    expect([json.status, json.json.error.code]).toEqual([415, 'unsupported_media_type']);
    const broken = await api()('/v1/images/edits', {
      method: 'POST',
      body: '--zz\r\nContent-Disposition: form-data; name="model"\r\n\r\nimg',
      headers: { 'content-type': 'multipart/form-data; boundary=zz' },
    });
    expect([broken.status, broken.json.error.code]).toEqual([400, 'invalid_request']);
    const twice = await postForm(
      form([
        { name: 'model', value: 'gem' },
        { name: 'model', value: 'img' },
      ]),
    );
    expect([twice.status, twice.json.error.param]).toEqual([400, 'model']);
    expect(env.fake.requests).toHaveLength(0);
    expect(Date.now() - started).toBeLessThan(20_000);
  });
});
