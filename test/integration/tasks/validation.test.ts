// Input validation, limits and error shapes, end to end over HTTP against a real Kiln.
// Every response is checked by the `call` helper: nothing a client sends may produce a 5xx.
import { brotliCompressSync, constants as zlibConstants, gzipSync, deflateSync } from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ownerOfKey } from '../../../src/infra/callers.js';
import { taskLimiterKey } from '../../../src/tasks/poll.js';
import { eventually, startKiln, http, submitBody, KEY_A, type Kiln } from '../../support/kiln.js';

const MB2 = 2 * 1024 * 1024;
const SUBMIT = '/v1beta/models/kiln-image-1:generateContent';
const SUBMIT_URL = `${SUBMIT}?output=url`;

type Res = Awaited<ReturnType<ReturnType<typeof http>>>;

/** Responses with a 5xx status seen by the current test; a test that expects one clears it. */
let fiveXX: string[] = [];
afterEach(() => {
  const seen = fiveXX;
  fiveXX = [];
  expect(seen, 'a client request was answered with a 5xx').toEqual([]);
});

function client(kiln: Kiln, key: string | null = KEY_A) {
  const api = http(kiln.baseUrl, key);
  return async (path: string, init: RequestInit & { json?: unknown } = {}): Promise<Res> => {
    const r = await api(path, init);
    if (r.status >= 500) fiveXX.push(`${init.method ?? 'GET'} ${path} → ${r.status} ${r.text.slice(0, 200)}`);
    return r;
  };
}

/** A raw body, sent as is with the given headers (and the API key). */
function rawPost(kiln: Kiln) {
  const call = client(kiln);
  return (path: string, body: string | Uint8Array, headers: Record<string, string> = {}) =>
    call(path, { method: 'POST', body: body as BodyInit, headers: { 'content-type': 'application/json', ...headers } });
}

function expectError(r: Res, status: number, code: string) {
  expect({ status: r.status, code: r.json?.error?.code }, r.text.slice(0, 300)).toEqual({ status, code });
  expect(Object.keys(r.json)).toEqual(['error']);
  expect(Object.keys(r.json.error).sort()).toEqual(['code', 'message']);
  expect(typeof r.json.error.message).toBe('string');
  expect(r.json.error.message.length).toBeGreaterThan(0);
}

function expectAccepted(r: Res) {
  expect(r.status, r.text.slice(0, 300)).toBe(202);
  expect(r.json).toMatchObject({ object: 'image.task', model: 'kiln-image-1', status: 'accepted' });
  expect(r.json.id).toMatch(/^task_[a-f0-9]{32}$/);
}

/** A submit body whose JSON is exactly `bytes` long, padded by an unknown top-level field (zod strips it). */
function paddedBody(bytes: number): Buffer {
  const base = JSON.stringify({ ...submitBody(), pad: '' });
  const pad = bytes - Buffer.byteLength(base);
  if (pad < 0) throw new Error('body too small to pad');
  const s = JSON.stringify({ ...submitBody(), pad: 'a'.repeat(pad) });
  const b = Buffer.from(s);
  expect(b.length).toBe(bytes);
  return b;
}

const withParts = (parts: unknown[], extra: Record<string, unknown> = {}) => ({
  ...submitBody(),
  contents: [{ role: 'user', parts }],
  ...extra,
});
const ref = (data: string) => ({ inlineData: { mimeType: 'image/png', data } });

let kiln: Kiln;
beforeAll(async () => {
  kiln = await startKiln({ workers: false });
});
afterAll(async () => {
  await kiln?.stop();
});

describe('submit: output must resolve to url', () => {
  const noOutput = () => ({
    contents: [{ role: 'user', parts: [{ text: 'a fox' }] }],
    generationConfig: { responseModalities: ['IMAGE'] },
  });

  it('rejects a submission without output', async () => {
    expectError(await client(kiln)(SUBMIT, { method: 'POST', json: noOutput() }), 400, 'output_must_be_url');
  });

  it('accepts ?output=url alone', async () => {
    const r = await client(kiln)(SUBMIT_URL, { method: 'POST', json: noOutput() });
    expectAccepted(r);
    expect(r.json).toMatchObject({
      polling_url: `/v1/tasks/${r.json.id}`,
      content_url: `/v1/tasks/${r.json.id}/content`,
    });
  });

  it('accepts generationConfig.imageConfig.output = url alone', async () => {
    expectAccepted(await client(kiln)(SUBMIT, { method: 'POST', json: submitBody() }));
  });

  it('rejects output=base64 in the query or in the body, and a conflict between them', async () => {
    const call = client(kiln);
    expectError(await call(`${SUBMIT}?output=base64`, { method: 'POST', json: noOutput() }), 400, 'output_must_be_url');
    const b64 = { ...noOutput(), generationConfig: { imageConfig: { output: 'base64' } } };
    expectError(await call(SUBMIT, { method: 'POST', json: b64 }), 400, 'output_must_be_url');
    expectError(await call(SUBMIT_URL, { method: 'POST', json: b64 }), 400, 'output_must_be_url');
    expectError(
      await call(`${SUBMIT}?output=base64`, { method: 'POST', json: submitBody() }),
      400,
      'output_must_be_url',
    );
  });
});

describe('submit: prompt length', () => {
  it('accepts exactly 4000 characters and rejects 4001', async () => {
    const call = client(kiln);
    expectAccepted(await call(SUBMIT, { method: 'POST', json: submitBody('p'.repeat(4000)) }));
    expectError(await call(SUBMIT, { method: 'POST', json: submitBody('p'.repeat(4001)) }), 400, 'prompt_too_long');
  });

  it('counts the total over several text parts and contents', async () => {
    const call = client(kiln);
    const parts = (n: number) => [{ text: 'a'.repeat(1000) }, { text: 'b'.repeat(1000) }, { text: 'c'.repeat(n) }];
    expectAccepted(
      await call(SUBMIT, {
        method: 'POST',
        json: withParts([...parts(1000), ref('https://example.com/a.png'), { text: 'd'.repeat(1000) }]),
      }),
    );
    expectError(
      await call(SUBMIT, { method: 'POST', json: withParts([...parts(1001), { text: 'd'.repeat(1000) }]) }),
      400,
      'prompt_too_long',
    );
    const twoContents = (n: number) => ({
      ...submitBody(),
      contents: [
        { role: 'user', parts: [{ text: 'x'.repeat(2000) }] },
        { role: 'user', parts: [{ text: 'y'.repeat(n) }] },
      ],
    });
    expectAccepted(await call(SUBMIT, { method: 'POST', json: twoContents(2000) }));
    expectError(await call(SUBMIT, { method: 'POST', json: twoContents(2001) }), 400, 'prompt_too_long');
  });

  it('counts an emoji or other multi-byte character as one character', async () => {
    const call = client(kiln);
    // U+1F525 is 4 bytes in UTF-8 and 2 UTF-16 units; 'é' and '字' are 2 and 3 bytes.
    expectAccepted(await call(SUBMIT, { method: 'POST', json: submitBody('🔥'.repeat(4000)) }));
    expectError(await call(SUBMIT, { method: 'POST', json: submitBody('🔥'.repeat(4001)) }), 400, 'prompt_too_long');
    expectAccepted(
      await call(SUBMIT, {
        method: 'POST',
        json: withParts([{ text: 'é'.repeat(2000) }, { text: '字'.repeat(1999) }, { text: '🔥' }]),
      }),
    );
    const over = await call(SUBMIT, {
      method: 'POST',
      json: withParts([{ text: 'é'.repeat(2000) }, { text: '字'.repeat(2000) }, { text: '🔥' }]),
    });
    expectError(over, 400, 'prompt_too_long');
    expect(over.json.error.message).toContain('4001');
  });

  it('requires a text part', async () => {
    const call = client(kiln);
    expectError(
      await call(SUBMIT, { method: 'POST', json: withParts([ref('https://example.com/a.png')]) }),
      400,
      'invalid_request',
    );
    expectError(await call(SUBMIT, { method: 'POST', json: withParts([]) }), 400, 'invalid_request');
    expectError(await call(SUBMIT, { method: 'POST', json: withParts([{ text: '' }]) }), 400, 'invalid_request');
    expectError(
      await call(SUBMIT, { method: 'POST', json: withParts([{ text: '   \n\t ' }]) }),
      400,
      'invalid_request',
    );
    expectError(
      await call(SUBMIT, { method: 'POST', json: { ...submitBody(), contents: [] } }),
      400,
      'invalid_request',
    );
    const { contents: _c, ...noContents } = submitBody();
    expectError(await call(SUBMIT, { method: 'POST', json: noContents }), 400, 'invalid_request');
    expectError(await call(SUBMIT, { method: 'POST', json: withParts([{ text: 42 }]) }), 400, 'invalid_request');
  });
});

describe('submit: reference images', () => {
  const refs = (n: number) => Array.from({ length: n }, (_, i) => ref(`https://example.com/ref-${i}.png`));

  it('accepts exactly 8 and rejects 9', async () => {
    const call = client(kiln);
    expectAccepted(await call(SUBMIT, { method: 'POST', json: withParts([{ text: 'mix these' }, ...refs(8)]) }));
    expectError(
      await call(SUBMIT, { method: 'POST', json: withParts([{ text: 'mix these' }, ...refs(9)]) }),
      400,
      'too_many_reference_images',
    );
    // Counted over all contents.
    const split = {
      ...submitBody(),
      contents: [
        { role: 'user', parts: [{ text: 'a' }, ...refs(5)] },
        { role: 'user', parts: refs(4) },
      ],
    };
    expectError(await call(SUBMIT, { method: 'POST', json: split }), 400, 'too_many_reference_images');
  });

  it('accepts http and https URLs', async () => {
    const call = client(kiln);
    expectAccepted(
      await call(SUBMIT, {
        method: 'POST',
        json: withParts([{ text: 'a' }, ref('http://example.com/a.png'), ref('HTTPS://EXAMPLE.COM/b.png?x=1')]),
      }),
    );
  });

  it.each([
    ['empty', ''],
    ['blank', '   '],
    ['absolute path', '/img.png'],
    ['relative path', 'img.png'],
    ['scheme-relative', '//example.com/img.png'],
    ['bare host', 'example.com/img.png'],
  ])('rejects a %s URL with invalid_reference_image_url', async (_name, data) => {
    const r = await client(kiln)(SUBMIT, { method: 'POST', json: withParts([{ text: 'a' }, ref(data)]) });
    expectError(r, 400, 'invalid_reference_image_url');
  });

  it('rejects a missing inlineData.data with invalid_reference_image_url', async () => {
    const r = await client(kiln)(SUBMIT, {
      method: 'POST',
      json: withParts([{ text: 'a' }, { inlineData: { mimeType: 'image/png' } }]),
    });
    expectError(r, 400, 'invalid_reference_image_url');
  });

  it.each([
    ['ftp', 'ftp://example.com/img.png'],
    ['file', 'file:///etc/passwd'],
    [
      'data',
      'data:image/png;base64,' +
        'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
    ],
    ['javascript', 'javascript:alert(1)'],
    ['gopher', 'gopher://example.com/'],
  ])('rejects a %s URL with invalid_reference_image_scheme', async (_name, data) => {
    const r = await client(kiln)(SUBMIT, { method: 'POST', json: withParts([{ text: 'a' }, ref(data)]) });
    expectError(r, 400, 'invalid_reference_image_scheme');
  });
});

describe('submit: model, action, body format and image config', () => {
  it('answers an unknown model with 404 model_not_found', async () => {
    const r = await client(kiln)('/v1beta/models/no-such-model:generateContent', {
      method: 'POST',
      json: submitBody(),
    });
    expectError(r, 404, 'model_not_found');
  });

  it('answers a wrong or missing action with 404', async () => {
    const call = client(kiln);
    expectError(
      await call('/v1beta/models/kiln-image-1:foo', { method: 'POST', json: submitBody() }),
      404,
      'not_found',
    );
    expectError(await call('/v1beta/models/kiln-image-1', { method: 'POST', json: submitBody() }), 404, 'not_found');
    expectError(
      await call('/v1beta/models/kiln-image-1:generateContent:foo', { method: 'POST', json: submitBody() }),
      404,
      'not_found',
    );
  });

  it('answers a body that is not JSON with 400 invalid_request', async () => {
    const post = rawPost(kiln);
    expectError(await post(SUBMIT, '{"contents": [', {}), 400, 'invalid_request');
    expectError(await post(SUBMIT, 'not json at all', {}), 400, 'invalid_request');
    expectError(await post(SUBMIT, '"a string"', {}), 400, 'invalid_request');
    expectError(await post(SUBMIT, '[]', {}), 400, 'invalid_request');
    expectError(await post(SUBMIT, 'null', {}), 400, 'invalid_request');
    expectError(await post(SUBMIT, '', {}), 400, 'invalid_request');
    expectError(await post(SUBMIT, '{"__proto__": {"x": 1}, "contents": []}', {}), 400, 'invalid_request');
  });

  it('answers a wrong Content-Type with 415', async () => {
    const post = rawPost(kiln);
    const body = JSON.stringify(submitBody());
    expectError(await post(SUBMIT, body, { 'content-type': 'text/plain' }), 415, 'unsupported_media_type');
    expectError(
      await post(SUBMIT, body, { 'content-type': 'application/x-www-form-urlencoded' }),
      415,
      'unsupported_media_type',
    );
    expectError(
      await post(SUBMIT, body, { 'content-type': 'multipart/form-data; boundary=x' }),
      415,
      'unsupported_media_type',
    );
    // With charset it is still JSON.
    expectAccepted(await post(SUBMIT, body, { 'content-type': 'application/json; charset=utf-8' }));
  });

  it.each(['16/9', '0:1', '1:0', '16:9:1', '100:1', 'wide', '', ' 1:1', '-1:1', '1.5:1'])(
    'rejects aspectRatio %j',
    async (aspectRatio) => {
      const body = { ...submitBody(), generationConfig: { imageConfig: { aspectRatio, output: 'url' } } };
      expectError(await client(kiln)(SUBMIT, { method: 'POST', json: body }), 400, 'invalid_request');
    },
  );

  it.each(['1:1', '16:9', '9:16', '21:9', '99:1'])('accepts aspectRatio %j', async (aspectRatio) => {
    const body = { ...submitBody(), generationConfig: { imageConfig: { aspectRatio, output: 'url' } } };
    expectAccepted(await client(kiln)(SUBMIT, { method: 'POST', json: body }));
  });

  it('rejects an unknown imageSize and accepts a known one', async () => {
    const call = client(kiln);
    for (const imageSize of ['8K', '1k', '', '1024x1024']) {
      const body = { ...submitBody(), generationConfig: { imageConfig: { imageSize, output: 'url' } } };
      expectError(await call(SUBMIT, { method: 'POST', json: body }), 400, 'invalid_request');
    }
    expectAccepted(
      await call(SUBMIT, {
        method: 'POST',
        json: { ...submitBody(), generationConfig: { imageConfig: { imageSize: '2K', output: 'url' } } },
      }),
    );
  });

  it('rejects wrongly typed fields with invalid_request', async () => {
    const call = client(kiln);
    const bad: unknown[] = [
      { ...submitBody(), generationConfig: { topP: 'high', imageConfig: { output: 'url' } } },
      { ...submitBody(), generationConfig: { topP: 2, imageConfig: { output: 'url' } } },
      { ...submitBody(), generationConfig: { imageConfig: { aspectRatio: 16, output: 'url' } } },
      { ...submitBody(), tools: 'google_search' },
      { ...submitBody(), systemInstruction: 'be nice' },
      { ...submitBody(), contents: [{ role: 'user', parts: 'a fox' }] },
      { ...submitBody(), contents: { role: 'user', parts: [{ text: 'a fox' }] } },
    ];
    for (const json of bad) expectError(await call(SUBMIT, { method: 'POST', json }), 400, 'invalid_request');
  });

  it('accepts the optional fields of the contract', async () => {
    const body = {
      ...submitBody(),
      generationConfig: {
        responseModalities: ['IMAGE'],
        topP: 0.9,
        imageConfig: { aspectRatio: '16:9', imageSize: '1K', output: 'url' },
      },
      tools: [{ googleSearch: {} }],
      systemInstruction: { parts: [{ text: 'photorealistic' }] },
    };
    expectAccepted(await client(kiln)(SUBMIT, { method: 'POST', json: body }));
  });
});

describe('submit: body size and content encodings', () => {
  it('accepts a body of exactly 2 MB and rejects 2 MB + 1 byte', async () => {
    const post = rawPost(kiln);
    expectAccepted(await post(SUBMIT, paddedBody(MB2)));
    expectError(await post(SUBMIT, paddedBody(MB2 + 1)), 413, 'request_too_large');
  });

  it('accepts a body of exactly 2 MB whose every byte is kept, and refuses one a byte longer', async () => {
    // All bytes are kept (a reference URL), unlike the stripped padding above: Temporal takes it
    // because the payload codec deflates it (large-request.test.ts runs such a task to the end).
    const post = rawPost(kiln);
    const kept = (bytes: number) => {
      const mk = (pad: string) => JSON.stringify(withParts([{ text: 'a' }, ref(`https://example.com/a.png?p=${pad}`)]));
      return Buffer.from(mk('a'.repeat(bytes - Buffer.byteLength(mk('')))));
    };
    expectAccepted(await post(SUBMIT, kept(MB2)));
    expectError(await post(SUBMIT, kept(MB2 + 1)), 413, 'request_too_large');
  });

  it('rejects passed-through JSON nested absurdly deep with 400, never 5xx', async () => {
    const post = rawPost(kiln);
    const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
    const base = JSON.stringify(submitBody()).slice(0, -1);
    expectError(await post(SUBMIT, `${base},"tools":[{"x":${deep(200_000)}}]}`), 400, 'invalid_request');
    expectError(await post(SUBMIT, `${base},"tools":[{"x":${deep(100)}}]}`), 400, 'invalid_request');
    const g = JSON.stringify({
      ...submitBody(),
      generationConfig: { imageConfig: { output: 'url' }, responseSchema: 'X' },
    }).replace('"X"', deep(100_000));
    expectError(await post(SUBMIT, g), 400, 'invalid_request');
    // Ordinary nesting (a function schema) is fine, and stripped unknown fields may nest freely.
    const schema = {
      type: 'object',
      properties: { a: { type: 'array', items: { type: 'object', properties: { b: { type: 'string' } } } } },
    };
    expectAccepted(
      await post(
        SUBMIT,
        JSON.stringify({ ...submitBody(), tools: [{ functionDeclarations: [{ name: 'f', parameters: schema }] }] }),
      ),
    );
    expectAccepted(await post(SUBMIT, `${base},"ignored":${deep(100_000)}}`));
  });

  it('counts a streamed body without Content-Length too', async () => {
    const call = client(kiln);
    const stream = (buf: Buffer) =>
      new ReadableStream<Uint8Array>({
        start(c) {
          for (let i = 0; i < buf.length; i += 64 * 1024) c.enqueue(buf.subarray(i, i + 64 * 1024));
          c.close();
        },
      });
    const send = (buf: Buffer) =>
      call(SUBMIT, {
        method: 'POST',
        body: stream(buf),
        headers: { 'content-type': 'application/json' },
        duplex: 'half',
      } as RequestInit);
    expectAccepted(await send(paddedBody(MB2)));
    expectError(await send(paddedBody(MB2 + 1)), 413, 'request_too_large');
  });

  it.each([
    ['gzip', (b: Buffer) => gzipSync(b)],
    ['br', (b: Buffer) => brotliCompressSync(b)],
  ])('accepts %s bodies and applies the 2 MB limit after decompression', async (encoding, compress) => {
    const post = rawPost(kiln);
    expectAccepted(
      await post(SUBMIT, compress(Buffer.from(JSON.stringify(submitBody('compressed fox')))), {
        'content-encoding': encoding,
      }),
    );
    const exact = compress(paddedBody(MB2));
    expect(exact.length).toBeLessThan(MB2 / 10);
    expectAccepted(await post(SUBMIT, exact, { 'content-encoding': encoding }));
    expectError(
      await post(SUBMIT, compress(paddedBody(MB2 + 1)), { 'content-encoding': encoding }),
      413,
      'request_too_large',
    );
  });

  it('treats the Content-Encoding name case-insensitively', async () => {
    const post = rawPost(kiln);
    expectAccepted(
      await post(SUBMIT, gzipSync(Buffer.from(JSON.stringify(submitBody()))), { 'content-encoding': 'GZIP' }),
    );
    expectAccepted(
      await post(SUBMIT, brotliCompressSync(Buffer.from(JSON.stringify(submitBody()))), { 'content-encoding': 'Br' }),
    );
    expectAccepted(await post(SUBMIT, JSON.stringify(submitBody()), { 'content-encoding': 'identity' }));
  });

  it('answers a corrupt compressed body with 400 invalid_request', async () => {
    const post = rawPost(kiln);
    expectError(
      await post(SUBMIT, Buffer.from('this is not gzip'), { 'content-encoding': 'gzip' }),
      400,
      'invalid_request',
    );
    expectError(
      await post(SUBMIT, Buffer.from('this is not brotli at all'), { 'content-encoding': 'br' }),
      400,
      'invalid_request',
    );
    const cut = gzipSync(Buffer.from(JSON.stringify(submitBody())));
    expectError(
      await post(SUBMIT, cut.subarray(0, cut.length - 12), { 'content-encoding': 'gzip' }),
      400,
      'invalid_request',
    );
  });

  it.each(['deflate', 'compress', 'x-gzip', 'zstd', 'gzip, br', 'identity, gzip', 'bogus'])(
    'answers Content-Encoding %j with 415 unsupported_content_encoding',
    async (encoding) => {
      const body =
        encoding === 'deflate'
          ? deflateSync(Buffer.from(JSON.stringify(submitBody())))
          : Buffer.from(JSON.stringify(submitBody()));
      expectError(
        await rawPost(kiln)(SUBMIT, body, { 'content-encoding': encoding }),
        415,
        'unsupported_content_encoding',
      );
    },
  );

  describe('decompression bombs', () => {
    const ZEROS = 64 * 1024 * 1024;
    const bombs: [string, Buffer][] = [];
    beforeAll(() => {
      const zeros = Buffer.alloc(ZEROS, 0x20);
      bombs.push(['gzip', gzipSync(zeros, { level: 9 })]);
      bombs.push(['br', brotliCompressSync(zeros, { params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 5 } })]);
    });

    it.each([0, 1])('answers a 64 MB bomb quickly with 413 and bounded memory (#%i: gzip, br)', async (i) => {
      const [encoding, bomb] = bombs[i];
      expect(bomb.length).toBeLessThan(ZEROS / 500);
      const post = rawPost(kiln);
      // Warm up the path so the measurement is not of first-use allocations.
      await post(SUBMIT, JSON.stringify(submitBody()), {});
      const rssBefore = process.memoryUsage().rss;
      for (let n = 0; n < 3; n++) {
        const t0 = performance.now();
        const r = await post(SUBMIT, bomb, { 'content-encoding': encoding });
        const ms = performance.now() - t0;
        expectError(r, 413, 'request_too_large');
        // Memory is the check that tells a bounded inflate from a whole one; this bound catches a hang.
        expect(ms, `${encoding} bomb took ${Math.round(ms)} ms`).toBeLessThan(10_000);
      }
      const growth = process.memoryUsage().rss - rssBefore;
      expect(growth, `RSS grew by ${Math.round(growth / 1024 / 1024)} MB`).toBeLessThan(50 * 1024 * 1024);
    });
  });
});

describe('batch-get', () => {
  const BATCH = '/v1/tasks/batch-get';

  it.each([
    ['missing ids', {}],
    ['ids null', { ids: null }],
    ['ids a string', { ids: 'task_0' }],
    ['ids an object', { ids: { 0: 'task_0' } }],
    ['ids empty', { ids: [] }],
    ['a non-string id', { ids: ['task_0', 42] }],
    ['a null id', { ids: [null] }],
    ['a nested array', { ids: [['task_0']] }],
    ['101 ids', { ids: Array.from({ length: 101 }, (_, i) => `id-${i}`) }],
    ['101 duplicate ids', { ids: Array.from({ length: 101 }, () => 'same') }],
  ])('rejects %s with 400 invalid_request', async (_name, json) => {
    expectError(await client(kiln)(BATCH, { method: 'POST', json }), 400, 'invalid_request');
  });

  it('rejects a body that is not JSON, and the wrong Content-Type', async () => {
    const post = rawPost(kiln);
    expectError(await post(BATCH, '{"ids": [', {}), 400, 'invalid_request');
    expectError(await post(BATCH, '[]', {}), 400, 'invalid_request');
    expectError(
      await post(BATCH, JSON.stringify({ ids: ['a'] }), { 'content-type': 'text/plain' }),
      415,
      'unsupported_media_type',
    );
  });

  it('accepts exactly 100 ids', async () => {
    const ids = Array.from({ length: 100 }, (_, i) => `task_${i.toString(16).padStart(32, '0')}`);
    const r = await client(kiln)(BATCH, { method: 'POST', json: { ids } });
    expect(r.status).toBe(200);
    expect(r.json.object).toBe('batch.task.list');
    expect(r.json.items.map((x: { id: string }) => x.id)).toEqual(ids);
    expect(r.json.next_poll_after_ms).toBe(10000);
  });

  it('removes duplicates keeping the order of first occurrence, and mixes found and not_found items', async () => {
    const call = client(kiln);
    const a = (await call(SUBMIT, { method: 'POST', json: submitBody('a') })).json.id;
    const b = (await call(SUBMIT, { method: 'POST', json: submitBody('b') })).json.id;
    const r = await call(BATCH, { method: 'POST', json: { ids: [b, 'x', a, b, 'x', a, 'y'] } });
    expect(r.status).toBe(200);
    expect(r.json.items.map((x: { id: string }) => x.id)).toEqual([b, 'x', a, 'y']);
    expect(r.json.items.map((x: { status: string }) => x.status)).toEqual([
      'accepted',
      'not_found',
      'accepted',
      'not_found',
    ]);
    expect(r.json.items[0]).toMatchObject({
      id: b,
      object: 'image.task',
      model: 'kiln-image-1',
      finished_at: null,
      candidates: null,
      error: null,
    });
  });

  it('reports odd ids as not_found items', async () => {
    const odd = [
      '../../etc',
      '../../../etc/passwd',
      "'; DROP TABLE tasks; --",
      'x'.repeat(200),
      'x'.repeat(256),
      'x'.repeat(257),
      `task_${'0'.repeat(100_000)}`,
      'tâche-🔥-任务',
      'task_',
      `task_${'A'.repeat(32)}`,
      `task_${'0'.repeat(32)}`,
      '*',
      '{x}',
      '%00',
      ' ',
      '',
      '\u0000',
      'task_0 OR 1=1',
      "task_'",
      '\\',
    ];
    const r = await client(kiln)(BATCH, { method: 'POST', json: { ids: odd } });
    expect(r.status, r.text.slice(0, 300)).toBe(200);
    expect(r.json.object).toBe('batch.task.list');
    expect(r.json.next_poll_after_ms).toBe(10000);
    expect(r.json.items).toHaveLength(odd.length);
    r.json.items.forEach((item: unknown, i: number) => {
      expect(item).toEqual({
        id: odd[i],
        object: 'image.task',
        status: 'not_found',
        error: { code: 'not_found', message: expect.any(String) },
      });
    });
  });

  it('does not show another owner’s tasks', async () => {
    const a = (await client(kiln)(SUBMIT, { method: 'POST', json: submitBody() })).json.id;
    const r = await client(kiln, 'another-owner-key-123')(BATCH, { method: 'POST', json: { ids: [a] } });
    expect(r.json.items).toEqual([
      { id: a, object: 'image.task', status: 'not_found', error: { code: 'not_found', message: expect.any(String) } },
    ]);
  });
});

describe('list', () => {
  const list = (q: string) => client(kiln, 'list-owner-key-0001')(`/v1/tasks${q}`);

  it('answers {object: list, days, items} with the defaults', async () => {
    const r = await list('');
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ object: 'list', days: 3, items: [] });
  });

  it('accepts days 1..3 and limit 1..100', async () => {
    for (const q of [
      '?days=3',
      '?days=1',
      '?limit=100',
      '?limit=1',
      '?days=2&limit=50',
      '?before_created_at=1700000000',
      '?before_created_at=1700000000&before_id=task_x',
    ]) {
      const r = await list(q);
      expect(r.status, q).toBe(200);
      expect(r.json.object).toBe('list');
    }
    expect((await list('?days=2')).json.days).toBe(2);
  });

  it.each([
    '?days=4',
    '?days=0',
    '?days=-1',
    '?days=abc',
    '?days=1.5',
    '?days=',
    '?days=3&days=3',
    '?days=99999999999999999999',
    '?limit=101',
    '?limit=0',
    '?limit=-5',
    '?limit=ten',
    '?limit=1e2',
    '?limit=',
    '?before_id=task_x',
    '?before_created_at=abc',
    '?before_created_at=-1',
    `?before_id=${'x'.repeat(300)}&before_created_at=1`,
  ])('rejects %s with 400 invalid_request', async (q) => {
    expectError(await list(q), 400, 'invalid_request');
  });

  it('lists the caller’s tasks with their content_url', async () => {
    const call = client(kiln, 'list-owner-key-0002');
    const id = (await call(SUBMIT, { method: 'POST', json: submitBody() })).json.id;
    const r = await call('/v1/tasks');
    expect(r.status).toBe(200);
    expect(r.json.items).toEqual([
      {
        id,
        model: 'kiln-image-1',
        status: 'accepted',
        created_at: expect.any(Number),
        finished_at: null,
        started_at: null,
        attempts: 0,
        channel: null,
        content_url: `/v1/tasks/${id}/content`,
      },
    ]);
  });
});

describe('get, content and unknown endpoints', () => {
  const oddIds = [
    '..%2F..%2Fetc',
    '%27%3B%20DROP%20TABLE%20tasks',
    'x'.repeat(200),
    encodeURIComponent('tâche-🔥'),
    '%ZZ',
    '%00',
    `task_${'0'.repeat(32)}`,
    'task_',
    '*',
    '%2e%2e',
  ];

  it.each(oddIds)('GET /v1/tasks/%s → 404 not_found', async (id) => {
    expectError(await client(kiln)(`/v1/tasks/${id}`), 404, 'not_found');
  });

  it.each(oddIds)('GET /v1/tasks/%s/content → 404 not_found', async (id) => {
    expectError(await client(kiln)(`/v1/tasks/${id}/content`), 404, 'not_found');
  });

  it('answers an unknown path with a 404 JSON error', async () => {
    const call = client(kiln);
    // (`GET /` redirects to the console: test/unit/api/http.test.ts.)
    for (const p of [
      '/console/nothing',
      '/v1',
      '/v1/nothing',
      '/v2/tasks',
      '/v1/tasks/a/b/c',
      '/v1beta/models',
      '/v1/files/',
      '/v1/files/..%2F..%2Fetc%2Fpasswd',
    ]) {
      const r = await call(p);
      expectError(r, 404, 'not_found');
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    }
  });

  it('answers a wrong method with a 405 JSON error', async () => {
    const call = client(kiln);
    const cases: [string, string][] = [
      ['DELETE', '/v1/tasks/task_x'],
      ['PUT', '/v1/tasks'],
      ['DELETE', '/v1/tasks/batch-get'],
      ['POST', '/v1/files/abc.png'],
      ['GET', SUBMIT],
      ['PATCH', '/v1/tasks/task_x/content'],
      ['POST', '/v1/tasks'],
    ];
    for (const [method, path] of cases) {
      const r = await call(path, { method });
      expectError(r, 405, 'method_not_allowed');
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
      expect(r.headers.get('allow'), `${method} ${path}`).toBeTruthy();
      expect(r.headers.get('allow')).not.toContain(method);
    }
    expect((await call('/v1/tasks', { method: 'PUT' })).headers.get('allow')).toMatch(/GET/);
    // GET on the batch path is a get of a task with that id.
    expectError(await call('/v1/tasks/batch-get'), 404, 'not_found');
  });

  it('answers a method the router does not implement without a 5xx', async () => {
    const call = client(kiln);
    for (const method of ['PROPFIND', 'MKCOL', 'PURGE']) {
      const r = await call('/v1/tasks', { method });
      expectError(r, 405, 'method_not_allowed');
      expect(r.headers.get('allow')).toMatch(/GET/);
      expectError(await call('/no/such/path', { method }), 404, 'not_found');
    }
  });
});

describe('queue_full', () => {
  let small: Kiln;
  beforeAll(async () => {
    small = await startKiln({ workers: false, env: { MAX_UNFINISHED_TASKS: '2' } });
  });
  afterAll(async () => {
    await small?.stop();
  });

  it('answers the third unfinished submission with 503 queue_full and Retry-After', async () => {
    const call = client(small);
    expectAccepted(await call(SUBMIT, { method: 'POST', json: submitBody('one') }));
    expectAccepted(await call(SUBMIT, { method: 'POST', json: submitBody('two') }));
    const third = await call(SUBMIT, { method: 'POST', json: submitBody('three') });
    fiveXX = []; // 503 queue_full is the contract's answer here, not a failure.
    expectError(third, 503, 'queue_full');
    const retry = third.headers.get('retry-after');
    expect(retry).toMatch(/^\d+$/);
    expect(Number(retry)).toBeGreaterThanOrEqual(1);
    // Invalid submissions are still answered with their own error, not queue_full.
    expectError(await call(SUBMIT, { method: 'POST', json: submitBody('p'.repeat(4001)) }), 400, 'prompt_too_long');
  });
});

describe('rate limiting', () => {
  let limited: Kiln;
  beforeAll(async () => {
    // Windows of a minute, so a check inside one never depends on how quickly requests follow each
    // other; the end of a window is its limiter key's expiry, brought forward by the test.
    limited = await startKiln({ workers: false, env: { RATE_LIMIT_TASK_MS: '60000', RATE_LIMIT_BATCH_MS: '60000' } });
  });
  afterAll(async () => {
    await limited?.stop();
  });

  const expectLimited = (r: Res, maxSeconds: number) => {
    expectError(r, 429, 'rate_limited');
    const retry = r.headers.get('retry-after');
    expect(retry).toMatch(/^\d+$/);
    expect(Number(retry)).toBeGreaterThanOrEqual(1);
    expect(Number(retry)).toBeLessThanOrEqual(maxSeconds);
  };

  it('limits a second poll of the same task within the window, not another task', async () => {
    const call = client(limited);
    const a = (await call(SUBMIT, { method: 'POST', json: submitBody('a') })).json.id;
    const b = (await call(SUBMIT, { method: 'POST', json: submitBody('b') })).json.id;
    expect((await call(`/v1/tasks/${a}`)).status).toBe(200);
    expectLimited(await call(`/v1/tasks/${a}`), 60);
    expect((await call(`/v1/tasks/${b}`)).status).toBe(200);
    // Another owner polling the same id has its own window (and sees not_found).
    expectError(await client(limited, 'other-owner-key-42')(`/v1/tasks/${a}`), 404, 'not_found');
    // The window ends when its key expires in Redis: make that now, then the next poll passes.
    const window = `${limited.config.redisPrefix}rl:${taskLimiterKey(ownerOfKey(limited.config.ownerKey, KEY_A), a)}`;
    expect(await limited.api.redis.pttl(window)).toBeGreaterThan(0);
    await limited.api.redis.pexpire(window, 1);
    const after = await eventually(
      () => call(`/v1/tasks/${a}`),
      (r) => r.status !== 429,
    );
    expect(after.status).toBe(200);
  });

  it('limits repeating the same id set (reordered or duplicated), not a different set', async () => {
    const call = client(limited);
    const BATCH = '/v1/tasks/batch-get';
    const x = (await call(SUBMIT, { method: 'POST', json: submitBody('x') })).json.id;
    const y = (await call(SUBMIT, { method: 'POST', json: submitBody('y') })).json.id;
    expect((await call(BATCH, { method: 'POST', json: { ids: [x, y] } })).status).toBe(200);
    expectLimited(await call(BATCH, { method: 'POST', json: { ids: [x, y] } }), 60);
    expectLimited(await call(BATCH, { method: 'POST', json: { ids: [y, x] } }), 60);
    expectLimited(await call(BATCH, { method: 'POST', json: { ids: [y, x, y, x] } }), 60);
    expect((await call(BATCH, { method: 'POST', json: { ids: [x] } })).status).toBe(200);
    expect((await call(BATCH, { method: 'POST', json: { ids: [x, y, 'task_other'] } })).status).toBe(200);
    // Invalid batches are rejected before the limiter and do not consume a window.
    expectError(await call(BATCH, { method: 'POST', json: { ids: [] } }), 400, 'invalid_request');
  });
});
