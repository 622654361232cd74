// Chat completions through the official `openai` SDK against a running Kiln: the local model,
// the openai provider against a fake upstream (forwarding, streaming, failures) and disconnects.
import { setTimeout as sleep } from 'node:timers/promises';
import OpenAI from 'openai';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { dataUri, imageItem, jpeg, png, textItem } from './chat-images.js';
import { closedPortUrl } from '../providers/gemini/fake-gemini.js';
import { fail, FakeOpenAI, Gate, ok, startFakeOpenAI } from './fake-openai-chat.js';
import { KEY_A, startKiln, type Kiln } from '../../support/kiln.js';

const CONFIGURED_KEY = 'configured-chat-key-7f3a9c1d2e5b';
let fake: FakeOpenAI;
let kiln: Kiln;

beforeAll(async () => {
  fake = await startFakeOpenAI();
  const upstream = {
    kind: 'chat',
    provider: 'openai',
    baseUrl: fake.baseUrl,
    credential: 'passthrough',
    timeoutMs: 5000,
  };
  kiln = await startKiln({
    workers: false,
    env: { CHAT_UPSTREAM_KEY: CONFIGURED_KEY },
    models: [
      { id: 'local-chat', kind: 'chat', provider: 'local' },
      { ...upstream, id: 'up', upstreamModel: 'gpt-fake' },
      { ...upstream, id: 'up-env', credential: { env: 'CHAT_UPSTREAM_KEY' } },
      { ...upstream, id: 'up-slow', timeoutMs: 400 },
      { ...upstream, id: 'up-refused', baseUrl: await closedPortUrl() },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await fake?.close();
});
beforeEach(() => fake.reset());

const client = (key = KEY_A) =>
  new OpenAI({ apiKey: key, baseURL: `${kiln.baseUrl}/v1`, maxRetries: 0, timeout: 20_000 });
const user = (text: string) => ({ role: 'user' as const, content: [textItem(text)] });

/** Whether the fake's connection for this call is still open after a short wait. */
const stillOpen = async (ended: Promise<string>) =>
  (await Promise.race([ended, sleep(150).then(() => 'open')])) === 'open';

async function caught(p: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(OpenAI.APIError);
    return err as InstanceType<typeof OpenAI.APIError>;
  }
  throw new Error('expected the call to fail');
}

async function drain(stream: AsyncIterable<OpenAI.ChatCompletionChunk>) {
  let text = '';
  let finish: string | null = null;
  let contentChunks = 0;
  let usage: OpenAI.CompletionUsage | undefined;
  for await (const c of stream) {
    const choice = c.choices[0];
    if (choice?.delta.content) {
      text += choice.delta.content;
      contentChunks++;
    }
    if (choice?.finish_reason) finish = choice.finish_reason;
    if (c.usage) usage = c.usage;
  }
  return { text, finish, contentChunks, usage };
}

describe('local chat model', () => {
  it('answers a text + image request in the OpenAI shape, describing each image from its bytes', async () => {
    const a = await png(37, 23);
    const b = await jpeg(5, 7);
    const r = await client().chat.completions.create({
      model: 'local-chat',
      messages: [
        { role: 'system', content: [textItem('Be brief.')] },
        // The second image is a JPEG declared as PNG: the format comes from the bytes.
        {
          role: 'user',
          content: [textItem('What are these two pictures?'), imageItem(dataUri(a)), imageItem(dataUri(b, 'png'))],
        },
      ],
    });
    expect(r).toMatchObject({ object: 'chat.completion', model: 'local-chat' });
    expect(r.id).toMatch(/^chatcmpl-[a-f0-9]{24}$/);
    expect(Math.abs(r.created - Date.now() / 1000)).toBeLessThan(5);
    const text = r.choices[0].message.content!;
    expect(r.choices[0]).toMatchObject({ index: 0, finish_reason: 'stop', message: { role: 'assistant' } });
    expect(text).toContain('2 messages (1 system, 1 user) with 2 images and 7 words of text.');
    expect(text).toContain(`Image 1: PNG, 37×23 pixels, ${a.length} bytes.`);
    expect(text).toContain(`Image 2: JPG, 5×7 pixels, ${b.length} bytes.`);
    expect(text).toContain('Your last message begins: "What are these two pictures?"');
    const words = text.split(' ').length;
    expect(r.usage).toEqual({ prompt_tokens: 9, completion_tokens: words, total_tokens: 9 + words });
  });

  it('honours max_tokens (words) and seed', async () => {
    const ask = (extra: Partial<OpenAI.ChatCompletionCreateParamsNonStreaming> = {}) =>
      client().chat.completions.create({ model: 'local-chat', messages: [user('describe what I sent')], ...extra });
    const full = await ask({ seed: 1 });
    const words = full.choices[0].message.content!.split(' ');
    const cut = await ask({ seed: 1, max_tokens: 5 });
    expect(cut.choices[0].message.content).toBe(words.slice(0, 5).join(' '));
    expect(cut.choices[0].finish_reason).toBe('length');
    expect(cut.usage?.completion_tokens).toBe(5);
    const exact = await ask({ seed: 1, max_tokens: words.length });
    expect(exact.choices[0]).toMatchObject({
      finish_reason: 'stop',
      message: { content: full.choices[0].message.content },
    });

    const again = await ask({ seed: 1 });
    const other = await ask({ seed: 2 });
    expect(again.choices[0].message.content).toBe(full.choices[0].message.content);
    expect(other.choices[0].message.content).not.toBe(full.choices[0].message.content);
  });

  it('streams the same reply chunk by chunk, with usage on request', async () => {
    const params = { model: 'local-chat', messages: [user('stream this please')], seed: 3 };
    const plain = await client().chat.completions.create(params);
    const stream = await client().chat.completions.create({
      ...params,
      stream: true,
      stream_options: { include_usage: true },
    });
    const got = await drain(stream);
    expect(got.text).toBe(plain.choices[0].message.content);
    expect(got.contentChunks).toBe(got.text.split(' ').length);
    expect(got.finish).toBe('stop');
    expect(got.usage).toEqual(plain.usage);
  });
});

describe('openai provider', () => {
  it('forwards the request intact with the caller key and relays the reply under the public model id', async () => {
    fake.enqueue(ok('A blue rectangle.'));
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'system', content: [textItem('You describe images.')] },
      {
        role: 'user',
        content: [
          textItem('What is this?'),
          { type: 'image_url', image_url: { url: dataUri(await png(3, 2)), detail: 'low' } },
        ],
      },
      { role: 'assistant', content: [textItem('A picture.')] },
      user('Say more.'),
    ];
    const r = await client().chat.completions.create({
      model: 'up',
      messages,
      max_tokens: 64,
      temperature: 0.2,
      seed: 7,
    });
    const call = await fake.request(1);
    expect(call.path).toBe('/v1/chat/completions');
    expect(call.headers.authorization).toBe(`Bearer ${KEY_A}`);
    expect(call.body).toEqual({ model: 'gpt-fake', messages, max_tokens: 64, temperature: 0.2, seed: 7 });
    expect(r).toMatchObject({
      id: 'chatcmpl-fake-1',
      object: 'chat.completion',
      model: 'up',
      system_fingerprint: 'fp_fake',
      usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 },
    });
    expect(r.choices[0]).toMatchObject({
      finish_reason: 'stop',
      message: { role: 'assistant', content: 'A blue rectangle.' },
    });
  });

  it('uses the configured key instead of the caller key when the model says so', async () => {
    await client().chat.completions.create({ model: 'up-env', messages: [user('hi')] });
    const call = await fake.request(1);
    expect(call.headers.authorization).toBe(`Bearer ${CONFIGURED_KEY}`);
    expect(JSON.stringify(call.headers)).not.toContain(KEY_A);
    expect(call.body.model).toBe('up-env');
  });

  it('relays a stream chunk by chunk: the first chunk arrives while the upstream still holds the rest', async () => {
    const gate = new Gate();
    fake.enqueue(ok('one two three four', { gate, holdAfter: 2 }));
    const stream = await client().chat.completions.create({ model: 'up', messages: [user('count')], stream: true });
    const it = stream[Symbol.asyncIterator]();
    const next = () =>
      Promise.race([
        it.next(),
        sleep(5000).then(() => {
          throw new Error('no chunk within 5 s: the relay buffers');
        }),
      ]);
    expect((await next()).value?.choices[0].delta.role).toBe('assistant');
    const first = (await next()).value!;
    expect(first).toMatchObject({
      object: 'chat.completion.chunk',
      model: 'up',
      choices: [{ delta: { content: 'one ' } }],
    });
    const call = await fake.request(1);
    expect(await stillOpen(call.ended)).toBe(true);
    expect(call.body.stream).toBe(true);
    expect(call.headers.accept).toBe('text/event-stream');
    gate.release();
    const rest = await drain({ [Symbol.asyncIterator]: () => it });
    expect(`one ${rest.text}`).toBe('one two three four');
    expect(rest.finish).toBe('stop');
    expect(await call.ended).toBe('finished');
  });

  // The SDK's typed error classes follow the status Kiln answers with.
  it.each([
    [401, 'AuthenticationError', 'auth_failed', 401],
    [403, 'AuthenticationError', 'auth_failed', 401],
    [402, 'APIError', 'insufficient_balance', 402],
    [429, 'RateLimitError', 'upstream_rate_limited', 429],
    [400, 'BadRequestError', 'invalid_request', 400],
    [422, 'BadRequestError', 'invalid_request', 400],
    [500, 'InternalServerError', 'upstream_error', 502],
    [503, 'InternalServerError', 'upstream_error', 502],
    [504, 'InternalServerError', 'upstream_timeout', 504],
  ] as const)("upstream %i surfaces as the SDK's %s with code %s (HTTP %i)", async (upstream, type, code, status) => {
    fake.enqueue(fail(upstream, `upstream says no; key was ${KEY_A}`, upstream === 429 ? { retryAfter: '7' } : {}));
    const err = await caught(client().chat.completions.create({ model: 'up', messages: [user('hi')] }));
    expect(err).toBeInstanceOf(OpenAI[type]);
    if (type === 'APIError') expect(err.constructor).toBe(OpenAI.APIError);
    expect(err.status).toBe(status);
    expect(err.code).toBe(code);
    expect(err.message).toContain(`upstream answered ${upstream}: upstream says no; key was [redacted]`);
    expect(err.message).not.toContain(KEY_A);
    if (upstream === 429) expect(err.headers?.get('retry-after')).toBe('7');
  });

  it('a refusal of a stream request is a plain HTTP error, before any event', async () => {
    fake.enqueue(fail(429, 'slow down'));
    const err = await caught(client().chat.completions.create({ model: 'up', messages: [user('hi')], stream: true }));
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect(err.code).toBe('upstream_rate_limited');
  });

  it('times out with upstream_timeout (504) and closes the upstream connection', async () => {
    fake.enqueue({ kind: 'hang' });
    const t0 = Date.now();
    const err = await caught(client().chat.completions.create({ model: 'up-slow', messages: [user('hi')] }));
    // The channel's timeout (400 ms) ended it, not the SDK's own (20 s).
    expect(Date.now() - t0).toBeGreaterThanOrEqual(380);
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(err).toBeInstanceOf(OpenAI.InternalServerError);
    expect([err.status, err.code]).toEqual([504, 'upstream_timeout']);
    expect(await (await fake.request(1)).ended).toBe('aborted');
  });

  it('a stream that stalls past the timeout ends with an upstream_timeout event', async () => {
    fake.enqueue(ok('never finished', { gate: new Gate(), holdAfter: 2 }));
    const stream = await client().chat.completions.create({ model: 'up-slow', messages: [user('hi')], stream: true });
    const err = await caught(drain(stream));
    expect(err.code).toBe('upstream_timeout');
    expect(await (await fake.request(1)).ended).toBe('aborted');
  });

  it('an unreachable upstream is upstream_error (502)', async () => {
    const err = await caught(client().chat.completions.create({ model: 'up-refused', messages: [user('hi')] }));
    expect([err.status, err.code]).toEqual([502, 'upstream_error']);
    expect(err.message).toContain('ECONNREFUSED');
  });

  it.each([
    ['a body that is not JSON', { kind: 'raw', status: 200, contentType: 'application/json', body: '<html>oops' }],
    [
      'JSON without choices',
      { kind: 'raw', status: 200, contentType: 'application/json', body: '{"id":"x","object":"chat.completion"}' },
    ],
  ] as const)('an unusable answer (%s) is upstream_error (502)', async (_what, behaviour) => {
    fake.enqueue(behaviour);
    const err = await caught(client().chat.completions.create({ model: 'up', messages: [user('hi')] }));
    expect([err.status, err.code]).toEqual([502, 'upstream_error']);
  });

  it.each([
    ['an error event', { kind: 'stream-error', after: 2, message: 'model overloaded' }, 'model overloaded'],
    ['a dropped connection', { kind: 'drop', after: 2 }, 'during the stream'],
    ['an end without finish or [DONE]', { kind: 'end-early', after: 2 }, 'ended before its end'],
  ] as const)(
    'a stream broken by %s ends with an upstream_error event after the chunks so far',
    async (_what, behaviour, says) => {
      fake.enqueue(behaviour);
      const stream = await client().chat.completions.create({ model: 'up', messages: [user('hi')], stream: true });
      const seen: string[] = [];
      const err = await caught(
        (async () => {
          for await (const c of stream) seen.push(c.choices[0]?.delta.content ?? '');
        })(),
      );
      expect(seen.join('')).toBe('partial ');
      expect(err.code).toBe('upstream_error');
      expect(err.message).toContain(says);
    },
  );
});

describe('client disconnect', () => {
  it('aborts the upstream request of a plain call', async () => {
    fake.enqueue({ kind: 'hang' });
    const ac = new AbortController();
    const pending = client()
      .chat.completions.create({ model: 'up', messages: [user('hi')] }, { signal: ac.signal })
      .catch((e) => e);
    const call = await fake.request(1);
    expect(await stillOpen(call.ended)).toBe(true);
    ac.abort();
    expect(await pending).toBeInstanceOf(OpenAI.APIUserAbortError);
    expect(await Promise.race([call.ended, sleep(3000).then(() => 'still open after 3 s')])).toBe('aborted');
  });

  it('aborts the upstream request of a stream', async () => {
    fake.enqueue(ok('one two three', { gate: new Gate(), holdAfter: 2 }));
    const stream = await client().chat.completions.create({ model: 'up', messages: [user('hi')], stream: true });
    const it = stream[Symbol.asyncIterator]();
    await it.next();
    expect((await it.next()).value?.choices[0].delta.content).toBe('one ');
    const call = await fake.request(1);
    expect(await stillOpen(call.ended)).toBe(true);
    stream.controller.abort();
    expect(await Promise.race([call.ended, sleep(3000).then(() => 'still open after 3 s')])).toBe('aborted');
  });
});
