// Every check of POST /v1/chat/completions, each with a failing case and, for limits, the edge
// and one past it. Invalid requests never reach the upstream.
import { brotliCompressSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { dataUri, imageItem, png, pngOfSize, textItem } from './chat-images.js';
import { startFakeOpenAI, type FakeOpenAI } from './fake-openai-chat.js';
import { http, startKiln, type Kiln } from '../../support/kiln.js';

const PATH = '/v1/chat/completions';
let fake: FakeOpenAI;
let kiln: Kiln;

beforeAll(async () => {
  fake = await startFakeOpenAI();
  kiln = await startKiln({
    workers: false,
    models: [
      {
        id: 'local-chat',
        kind: 'chat',
        provider: 'local',
        maxImages: 2,
        maxImageBytes: 1000,
        maxBodyBytes: 20_000,
        maxOutputTokens: 50,
      },
      { id: 'big-chat', kind: 'chat', provider: 'local', maxBodyBytes: 30_000 },
      { id: 'up', kind: 'chat', provider: 'openai', baseUrl: fake.baseUrl, maxBodyBytes: 30_000, maxImages: 2 },
      { id: 'img', kind: 'image', provider: 'local' },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await fake?.close();
});
beforeEach(() => fake.reset());

const api = () => http(kiln.baseUrl);
const user = (...content: unknown[]) => ({ role: 'user', content });
const body = (extra: Record<string, unknown> = {}, model = 'local-chat') => ({
  model,
  messages: [user(textItem('hello'))],
  ...extra,
});
const post = (json: unknown) => api()(PATH, { method: 'POST', json });

async function expectError(
  res: { status: number; json: any; text: string },
  status: number,
  code: string,
  says?: string | RegExp,
) {
  expect(res.status, res.text).toBe(status);
  expect(res.json?.error?.code, res.text).toBe(code);
  if (says) expect(res.json.error.message).toMatch(says);
}
const expectOk = (res: { status: number; json: any; text: string }) => {
  expect(res.status, res.text).toBe(200);
  expect(res.json.object).toBe('chat.completion');
};

/** A body whose JSON text has exactly `bytes` bytes. */
function bodyOfSize(bytes: number, model = 'local-chat') {
  const base = Buffer.byteLength(JSON.stringify(body({}, model)).replace('hello', ''));
  return JSON.stringify({ model, messages: [user(textItem('x'.repeat(bytes - base)))] });
}

describe('shape of the request', () => {
  it.each([
    [
      'content as a bare string',
      { model: 'local-chat', messages: [{ role: 'user', content: 'hello' }] },
      /^messages\[0\]\.content: must be an array of content items.*a string or a single object is not accepted/,
    ],
    [
      'content as a single object',
      { model: 'local-chat', messages: [{ role: 'user', content: { type: 'text', text: 'hello' } }] },
      /^messages\[0\]\.content: must be an array/,
    ],
    [
      'an empty content array',
      { model: 'local-chat', messages: [user()] },
      /^messages\[0\]\.content: must hold at least one item/,
    ],
    ['no messages', { model: 'local-chat' }, /^messages: /],
    ['an empty messages array', { model: 'local-chat', messages: [] }, /^messages: must hold at least one message/],
    [
      'a message that is not an object',
      { model: 'local-chat', messages: ['hello'] },
      /^messages\[0\]: must be an object/,
    ],
    [
      'an unknown role',
      { model: 'local-chat', messages: [{ role: 'tool', content: [textItem('x')] }] },
      /^messages\[0\]\.role: must be "system", "user" or "assistant"/,
    ],
    [
      'an unknown item type',
      body({ messages: [user(textItem('a'), { type: 'audio', audio: {} })] }),
      /^messages\[0\]\.content\[1\]\.type: must be \{"type": "text"/,
    ],
    [
      'a text item without text',
      body({ messages: [user({ type: 'text' })] }),
      /^messages\[0\]\.content\[0\]\.text: must be a string/,
    ],
    [
      'image_url as a bare string',
      body({ messages: [user({ type: 'image_url', image_url: 'data:image/png;base64,AAAA' })] }),
      /^messages\[0\]\.content\[0\]\.image_url: must be an object/,
    ],
    ['an unknown top-level field', body({ top_p: 0.5 }), /unsupported field\(s\) top_p; accepted: model, messages/],
    [
      'an unknown message field',
      body({ messages: [{ ...user(textItem('a')), name: 'bob' }] }),
      /^messages\[0\]: unsupported field\(s\) name/,
    ],
    ['stream that is not a boolean', body({ stream: 'yes' }), /^stream: must be true or false/],
    [
      'an image in a system message',
      body({ messages: [{ role: 'system', content: [imageItem('data:image/png;base64,AAAA')] }] }),
      /^messages\[0\]\.content\[0\]: images are accepted in user messages only/,
    ],
    [
      'max_tokens and max_completion_tokens that disagree',
      body({ max_tokens: 5, max_completion_tokens: 6 }),
      /disagree/,
    ],
    ['a body that is an array', [body()], /must be a JSON object/],
    ['no model', { messages: [user(textItem('a'))] }, /^model is required/],
  ])('refuses %s with 400 invalid_request', async (_what, json, says) => {
    await expectError(await post(json), 400, 'invalid_request', says);
  });

  it('refuses unknown models and models of another kind with 404 model_not_found', async () => {
    await expectError(await post(body({}, 'nope')), 404, 'model_not_found', /does not exist/);
    await expectError(await post(body({}, 'img')), 404, 'model_not_found', /not a chat model/);
  });

  it('refuses malformed JSON, other media types, a missing key and other methods', async () => {
    await expectError(
      await api()(PATH, { method: 'POST', body: '{"model":', headers: { 'content-type': 'application/json' } }),
      400,
      'invalid_request',
    );
    await expectError(
      await api()(PATH, { method: 'POST', body: 'hello', headers: { 'content-type': 'text/plain' } }),
      415,
      'unsupported_media_type',
    );
    await expectError(await http(kiln.baseUrl, null)(PATH, { method: 'POST', json: body() }), 401, 'missing_api_key');
    const get = await api()(PATH);
    await expectError(get, 405, 'method_not_allowed');
    expect(get.headers.get('allow')).toContain('POST');
  });

  it('accepts assistant turns, max_completion_tokens and nulls for optional fields', async () => {
    const r = await post(
      body({
        messages: [user(textItem('a')), { role: 'assistant', content: [textItem('b')] }, user(textItem('c d e'))],
        max_completion_tokens: 3,
        temperature: null,
        seed: null,
      }),
    );
    expectOk(r);
    expect(r.json.choices[0].message.content.split(' ')).toHaveLength(3);
  });

  it('never sends an invalid request upstream', async () => {
    await expectError(
      await post(body({ messages: [{ role: 'user', content: 'hello' }] }, 'up')),
      400,
      'invalid_request',
    );
    await expectError(await post(body({ temperature: 3 }, 'up')), 400, 'invalid_request');
    await expectError(
      await post(body({ messages: [user(imageItem('https://example.com/a.png'))] }, 'up')),
      400,
      'invalid_image_url',
    );
    expect(fake.requests).toHaveLength(0);
  });
});

describe('sampling parameters', () => {
  it.each([
    ['max_tokens', 0, 400],
    ['max_tokens', 1, 200],
    ['max_tokens', 50, 200],
    ['max_tokens', 51, 400],
    ['max_tokens', 2.5, 400],
    ['max_tokens', '5', 400],
    ['max_completion_tokens', 51, 400],
    ['temperature', -0.01, 400],
    ['temperature', 0, 200],
    ['temperature', 2, 200],
    ['temperature', 2.01, 400],
    ['temperature', 'hot', 400],
    ['seed', -5, 200],
    ['seed', Number.MAX_SAFE_INTEGER, 200],
    ['seed', Number.MAX_SAFE_INTEGER + 1, 400],
    ['seed', 1.5, 400],
  ] as const)('%s = %s → %i', async (field, value, status) => {
    const r = await post(body({ [field]: value }));
    if (status === 200) return expectOk(r);
    await expectError(r, 400, 'invalid_request', new RegExp(`^${field}: `));
  });
});

describe('images', () => {
  it.each([
    ['an http URL', 'https://example.com/cat.png', /http\(s\) URLs are not fetched/],
    ['bare base64 without the prefix', 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB', /prefix is missing/],
    ['a prefix without ;base64', 'data:image/png,AAAA', /prefix is malformed/],
    ['a non-image subtype', 'data:text/plain;base64,aGVsbG8=', /declares "text\/plain", which is not an image type/],
    ['no media type at all', 'data:;base64,aGVsbG8=', /prefix is malformed|not an image type/],
    ['invalid base64', 'data:image/png;base64,not*base64!', /not valid base64/],
    ['base64 with a stray character count', 'data:image/png;base64,AAAAA', /not valid base64/],
    ['empty data', 'data:image/png;base64,', /is empty/],
    [
      'bytes that are no image',
      `data:image/png;base64,${Buffer.from('just some text, not a picture').toString('base64')}`,
      /not an image Kiln can read/,
    ],
  ])('refuses %s with 400 invalid_image_url naming the message and item', async (_what, url, says) => {
    const r = await post(body({ messages: [user(textItem('look')), user(textItem('and'), imageItem(url))] }));
    await expectError(r, 400, 'invalid_image_url', says);
    expect(r.json.error.message).toContain('messages[1].content[1]');
  });

  it('accepts at most maxImages images per request (2 here), counted over all messages', async () => {
    const uri = dataUri(await png(2, 2));
    expectOk(await post(body({ messages: [user(imageItem(uri)), user(imageItem(uri))] })));
    await expectError(
      await post(body({ messages: [user(imageItem(uri)), user(imageItem(uri), imageItem(uri))] })),
      400,
      'too_many_images',
      /3 images were sent; model local-chat accepts at most 2/,
    );
  });

  it('accepts images up to maxImageBytes decoded (1000 here)', async () => {
    expectOk(await post(body({ messages: [user(imageItem(dataUri(await pngOfSize(1000))))] })));
    expectOk(await post(body({ messages: [user(imageItem(dataUri(await pngOfSize(998)).replace(/=+$/, '')))] })));
    await expectError(
      await post(body({ messages: [user(textItem('x'), imageItem(dataUri(await pngOfSize(1001))))] })),
      413,
      'image_too_large',
      /^messages\[0\]\.content\[1\]: the image has 1001 bytes/,
    );
  });
});

describe('body size', () => {
  it('accepts the model limit and refuses one byte more, also when compressed', async () => {
    const send = (text: string | Buffer, encoding?: string) =>
      api()(PATH, {
        method: 'POST',
        body: typeof text === 'string' ? text : new Uint8Array(text),
        headers: { 'content-type': 'application/json', ...(encoding ? { 'content-encoding': encoding } : {}) },
      });
    expect(Buffer.byteLength(bodyOfSize(20_000))).toBe(20_000);
    expectOk(await send(bodyOfSize(20_000)));
    await expectError(
      await send(bodyOfSize(20_001)),
      413,
      'request_too_large',
      /has 20001 bytes after decompression; model local-chat accepts at most 20000/,
    );
    expectOk(await send(gzipSync(bodyOfSize(20_000)), 'gzip'));
    await expectError(await send(gzipSync(bodyOfSize(20_001)), 'gzip'), 413, 'request_too_large');
    await expectError(await send(brotliCompressSync(bodyOfSize(20_001)), 'br'), 413, 'request_too_large');
    await expectError(await send(bodyOfSize(100), 'deflate'), 415, 'unsupported_content_encoding');
  });

  it('stops reading at the largest limit of any chat model (30000 here)', async () => {
    const send = (text: string) =>
      api()(PATH, { method: 'POST', body: text, headers: { 'content-type': 'application/json' } });
    expectOk(await send(bodyOfSize(30_000, 'big-chat')));
    await expectError(await send(bodyOfSize(30_001, 'big-chat')), 413, 'request_too_large', /larger than 30000 bytes/);
  });
});

describe('default model', () => {
  it('a fresh configuration chats offline with kiln-chat-1', async () => {
    const fresh = await startKiln({ workers: false });
    try {
      const models = await http(fresh.baseUrl)('/v1/models');
      expect(models.json.data).toContainEqual(expect.objectContaining({ id: 'kiln-chat-1', kind: 'chat' }));
      const r = await http(fresh.baseUrl)(PATH, { method: 'POST', json: body({}, 'kiln-chat-1') });
      expectOk(r);
      expect(r.json.choices[0].message.content).toContain('1 message (1 user) with 0 images and 1 word of text.');
    } finally {
      await fresh.stop();
    }
  });
});
