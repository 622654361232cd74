// OpenAI Images without servers: the fields' checks (error.param), size and quality mapped onto a
// model's options, the reference images' request, the form's part count and image sniffing, and
// the Prefer header. The SDK end to end: test/integration/openai-images/openai-images.test.ts.
import { describe, expect, it } from 'vitest';
import { parseModel, type ImageModel } from '../../../src/config/models.js';
import { KilnError } from '../../../src/shared/errors.js';
import { LIMITS } from '../../../src/shared/limits.js';
import { countParts, EDIT_LIMITS, sniffImage } from '../../../src/openai-images/multipart.js';
import { imageConfigOf, imageModelOf, parseAsk, ParamError } from '../../../src/openai-images/params.js';
import { prefersAsync } from '../../../src/openai-images/routes.js';
import { imageRequest } from '../../../src/openai-images/service.js';

const model = parseModel({ id: 'img', provider: 'local' }) as ImageModel;
const small = parseModel({ id: 'small', provider: 'local', imageSizes: ['1K', '2K'] }) as ImageModel;
const chat = parseModel({ id: 'talk', kind: 'chat', provider: 'local' });
const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');

function refusal(fn: () => unknown): { status: number; body: any } {
  try {
    fn();
  } catch (err) {
    if (err instanceof KilnError) return { status: err.status, body: err.toBody() };
    throw err;
  }
  throw new Error('not refused');
}

describe('parseAsk', () => {
  const base = { model: 'img', prompt: 'a fox' };

  it('fills the defaults and treats null as absent', () => {
    expect(parseAsk({ ...base, n: null, size: null, response_format: null, user: 'u1', stream: false }, false)).toEqual(
      {
        model: 'img',
        prompt: 'a fox',
        n: 1,
        responseFormat: 'url',
        size: undefined,
        quality: undefined,
      },
    );
  });

  it('takes n from 1 to 4, as a number in JSON and as digits in a form', () => {
    expect(parseAsk({ ...base, n: 4 }, false).n).toBe(4);
    expect(parseAsk({ ...base, n: '1' }, true).n).toBe(1);
    for (const [n, form] of [
      [0, false],
      [5, false],
      [1.5, false],
      ['2', false],
      ['5', true],
      ['0', true],
      ['two', true],
    ] as const) {
      const r = refusal(() => parseAsk({ ...base, n }, form));
      expect(r.status).toBe(400);
      expect(r.body.error).toMatchObject({ code: 'invalid_request', param: 'n', type: 'invalid_request_error' });
      expect(r.body.error.message).toContain('1 to 4');
    }
  });

  it('refuses response_format other than url or b64_json, and names it', () => {
    expect(parseAsk({ ...base, response_format: 'b64_json' }, false).responseFormat).toBe('b64_json');
    const r = refusal(() => parseAsk({ ...base, response_format: 'png' }, false));
    expect(r.body.error).toMatchObject({ code: 'invalid_request', param: 'response_format' });
  });

  it('prompt: required, at most 4000 characters (code points)', () => {
    expect(refusal(() => parseAsk({ model: 'img' }, false)).body.error.param).toBe('prompt');
    expect(refusal(() => parseAsk({ ...base, prompt: '  ' }, false)).body.error.param).toBe('prompt');
    expect(parseAsk({ ...base, prompt: '🦊'.repeat(LIMITS.promptChars) }, false).prompt).toHaveLength(8000);
    const r = refusal(() => parseAsk({ ...base, prompt: 'x'.repeat(LIMITS.promptChars + 1) }, false));
    expect(r.body.error).toMatchObject({ code: 'prompt_too_long', param: 'prompt' });
  });

  it('refuses what Kiln cannot honour, and unknown fields, by name', () => {
    for (const [name, value] of [
      ['mask', 'x'],
      ['partial_images', 2],
      ['output_compression', 50],
      ['stream', true],
      ['frame_count', 3],
      ['user', 5],
      ['toString', 'x'],
      ['constructor', 'x'],
    ] as const) {
      const r = refusal(() => parseAsk({ ...base, [name]: value }, false));
      expect(r.body.error, name).toMatchObject({ code: 'invalid_request', param: name });
    }
    expect(parseAsk({ ...base, stream: 'false', background: 'auto' }, true).n).toBe(1);
    expect(refusal(() => parseAsk({ prompt: 'x' }, false)).body.error.param).toBe('model');
  });
});

describe('background and output_format', () => {
  const gpt = parseModel({ id: 'gpt', provider: 'openai-images', baseUrl: 'https://api.openai.com' }) as ImageModel;

  it('are refused by name for models whose provider is not openai-images', () => {
    expect(refusal(() => imageConfigOf({ background: 'transparent' }, model)).body.error.param).toBe('background');
    expect(refusal(() => imageConfigOf({ outputFormat: 'png' }, model)).body.error.param).toBe('output_format');
    expect(imageConfigOf({ background: 'auto' }, model)).toEqual({});
  });

  it('travel as imageConfig keys to an openai-images model, with quality and one of its sizes', () => {
    const ask = { size: '1536x1024', quality: 'high', background: 'transparent', outputFormat: 'webp' };
    expect(imageConfigOf(ask, gpt)).toEqual({
      aspectRatio: '3:2',
      quality: 'high',
      background: 'transparent',
      outputFormat: 'webp',
    });
    expect(imageConfigOf({ size: 'auto', quality: 'auto', background: 'auto' }, gpt)).toEqual({});
    for (const [ask, param] of [
      [{ size: '1792x1024' }, 'size'],
      [{ quality: 'ultra' }, 'quality'],
      [{ background: 'green' }, 'background'],
      [{ outputFormat: 'svg' }, 'output_format'],
    ] as const)
      expect(refusal(() => imageConfigOf(ask, gpt)).body.error.param).toBe(param);
  });
});

describe('size and quality', () => {
  it('size: the ratio, and the smallest tier that covers the longer side', () => {
    expect(imageConfigOf({ size: '1024x1024' }, model)).toEqual({ aspectRatio: '1:1', imageSize: '1K' });
    expect(imageConfigOf({ size: '1536x1024' }, model)).toEqual({ aspectRatio: '3:2', imageSize: '2K' });
    expect(imageConfigOf({ size: '1024x1536' }, model)).toEqual({ aspectRatio: '2:3', imageSize: '2K' });
    expect(imageConfigOf({ size: '256x256' }, model)).toEqual({ aspectRatio: '1:1', imageSize: '1K' });
    expect(imageConfigOf({ size: '3840x2160' }, model)).toEqual({ aspectRatio: '16:9', imageSize: '4K' });
    expect(imageConfigOf({ size: '4096x4096' }, model)).toEqual({ aspectRatio: '1:1', imageSize: '4K' });
    expect(imageConfigOf({ size: 'auto' }, model)).toEqual({});
    expect(imageConfigOf({}, model)).toEqual({});
  });

  it('size: a ratio or a side the model cannot render is refused, naming what it takes', () => {
    for (const size of ['1792x1024', '4097x4097', '1024', '0x0', '1024X1024', 'big']) {
      const r = refusal(() => imageConfigOf({ size }, model));
      expect(r.body.error, size).toMatchObject({ code: 'invalid_request', param: 'size' });
      expect(r.body.error.message).toContain('1:1, 2:3, 3:2');
      expect(r.body.error.message).toContain('4K up to 4096');
    }
    // The edge of a smaller model: 2048 fits its 2K, 2049 does not.
    expect(imageConfigOf({ size: '2048x2048' }, small)).toEqual({ aspectRatio: '1:1', imageSize: '2K' });
    expect(refusal(() => imageConfigOf({ size: '2049x2049' }, small)).body.error.message).toContain('at most 2048');
  });

  it("quality: a tier among the model's image sizes, overriding the size's", () => {
    expect(imageConfigOf({ quality: 'low' }, model)).toEqual({ imageSize: '1K' });
    expect(imageConfigOf({ quality: 'medium', size: '1024x1024' }, model)).toEqual({
      aspectRatio: '1:1',
      imageSize: '2K',
    });
    expect(imageConfigOf({ quality: 'high' }, model)).toEqual({ imageSize: '4K' });
    expect(imageConfigOf({ quality: 'auto' }, model)).toEqual({});
    const r = refusal(() => imageConfigOf({ quality: 'high' }, small));
    expect(r.body.error).toMatchObject({ code: 'invalid_request', param: 'quality' });
    expect(r.body.error.message).toBe(
      'quality must be one of auto, low (1K), standard (1K), medium (2K), hd (2K) for model small; got "high".',
    );
    expect(refusal(() => imageConfigOf({ quality: 'xhigh' }, model)).body.error.param).toBe('quality');
    expect(refusal(() => imageConfigOf({ quality: 'toString' }, model)).body.error.param).toBe('quality');
  });
});

describe('models', () => {
  it('unknown: 404 model_not_found; another kind: 400 naming the image models', () => {
    expect(refusal(() => imageModelOf([model, chat], 'nope'))).toMatchObject({
      status: 404,
      body: { error: { code: 'model_not_found', param: 'model' } },
    });
    const r = refusal(() => imageModelOf([model, chat], 'talk'));
    expect(r.status).toBe(400);
    expect(r.body.error.message).toBe('Model "talk" is a chat model; the images endpoints take image models: img.');
    expect(imageModelOf([model, chat], 'img')).toBe(model);
  });
});

describe('the request of an edit', () => {
  it('the prompt, then each file as inline base64, with the imageConfig', () => {
    const ask = { model: 'img', prompt: 'make it blue', n: 1, responseFormat: 'url' as const, size: '1024x1536' };
    const req = imageRequest(ask, model, [
      { mimeType: 'image/png', data: PNG },
      { mimeType: 'image/jpeg', data: Buffer.from([0xff, 0xd8, 0xff, 1]) },
    ]);
    expect(req).toEqual({
      contents: [
        {
          role: 'user',
          parts: [
            { text: 'make it blue' },
            { inlineData: { mimeType: 'image/png', data: PNG.toString('base64') } },
            { inlineData: { mimeType: 'image/jpeg', data: '/9j/AQ==' } },
          ],
        },
      ],
      generationConfig: { imageConfig: { aspectRatio: '2:3', imageSize: '2K' } },
    });
  });

  it('the largest body the form takes still fits one Temporal payload as base64', () => {
    const images = [
      { mimeType: 'image/png' as const, data: Buffer.alloc(EDIT_LIMITS.fileBytes) },
      { mimeType: 'image/png' as const, data: Buffer.alloc(EDIT_LIMITS.bodyBytes - EDIT_LIMITS.fileBytes) },
    ];
    const ask = { model: 'img', prompt: '\u0001'.repeat(LIMITS.promptChars), n: 1, responseFormat: 'url' as const };
    const bytes = Buffer.byteLength(JSON.stringify(imageRequest(ask, model, images)));
    expect(bytes).toBeLessThanOrEqual(LIMITS.requestBytes);
  });
});

describe('the edit form', () => {
  it('counts parts by their delimiters', () => {
    const body = (n: number) =>
      Buffer.from(
        Array.from({ length: n }, (_, i) => `--b0\r\nContent-Disposition: form-data; name="f${i}"\r\n\r\nv\r\n`).join(
          '',
        ) + '--b0--\r\n',
      );
    expect(countParts(body(1), 'b0')).toBe(1);
    expect(countParts(body(32), 'b0')).toBe(32);
    expect(countParts(body(33), 'b0')).toBe(33);
    expect(countParts(Buffer.from('junk'), 'b0')).toBe(0);
  });

  it('tells an image by its bytes', () => {
    expect(sniffImage(PNG)).toBe('image/png');
    expect(sniffImage(Buffer.from([0xff, 0xd8, 0xff, 0xe0]))).toBe('image/jpeg');
    expect(sniffImage(Buffer.from('RIFF\0\0\0\0WEBPVP8 '))).toBe('image/webp');
    expect(sniffImage(Buffer.from('GIF89a..'))).toBe('image/gif');
    expect(sniffImage(Buffer.from('%PDF-1.7'))).toBeNull();
    expect(sniffImage(Buffer.alloc(0))).toBeNull();
  });
});

describe('Prefer', () => {
  it('respond-async among other preferences, case-insensitive', () => {
    expect(prefersAsync(undefined)).toBe(false);
    expect(prefersAsync('respond-async')).toBe(true);
    expect(prefersAsync('wait=10, Respond-Async')).toBe(true);
    expect(prefersAsync(['handling=lenient', 'respond-async; foo=1'])).toBe(true);
    expect(prefersAsync('wait=10')).toBe(false);
  });
});

it('ParamError is a KilnError the error middleware answers with param', () => {
  const e = new ParamError('invalid_request', 'bad', 'size');
  expect(e).toBeInstanceOf(KilnError);
  expect(e.toBody()).toEqual({
    error: { code: 'invalid_request', message: 'bad', type: 'invalid_request_error', param: 'size' },
  });
});
