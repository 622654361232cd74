// Chat completions over a model's channels (src/chat/service.ts) on a real Kiln and Redis, with fake
// OpenAI-compatible upstreams that count what each received. A call moves to the next channel only
// when one provably did not take the work, and only before the caller got a byte of an answer.
// Channel health is per model, so each test has its own model: refusals of one never cool another's.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { limitsOf } from '../../../src/channels/limits.js';
import { RedisChannelState } from '../../../src/channels/redis-state.js';
import type { ChannelSnapshot } from '../../../src/channels/state.js';
import { modelsOfKind } from '../../../src/config/models.js';
import { textItem } from './chat-images.js';
import { fail, ok, startFakeOpenAI, type FakeOpenAI } from './fake-openai-chat.js';
import { closedPortUrl } from '../../support/fake-server.js';
import { eventually, http, KEY_A, startKiln, type Kiln } from '../../support/kiln.js';

const CONFIGURED_KEY = 'configured-channel-a-key-4e7d';
let a: FakeOpenAI;
let b: FakeOpenAI;
let c: FakeOpenAI;
let kiln: Kiln;

type Extra = Record<string, unknown>;
const channel = (id: string, baseUrl: string, priority: number, extra: Extra = {}) => ({
  id,
  provider: 'openai',
  baseUrl,
  priority,
  ...extra,
});
const chatModel = (id: string, channels: Extra[]) => ({
  id,
  kind: 'chat',
  credential: 'passthrough',
  timeoutMs: 5000,
  channels,
});
/** Channel a (tried first: the higher priority) over fake a, then channel b over fake b. */
const pair = (id: string, extraA: Extra = {}, extraB: Extra = {}) =>
  chatModel(id, [channel('a', a.baseUrl, 2, extraA), channel('b', b.baseUrl, 1, extraB)]);
const COOL_AT_ONCE = { cooldownAfter: 1, cooldownMs: 60_000 };

beforeAll(async () => {
  [a, b, c] = await Promise.all([startFakeOpenAI(), startFakeOpenAI(), startFakeOpenAI()]);
  kiln = await startKiln({
    workers: false,
    env: { CHAT_A_KEY: CONFIGURED_KEY },
    models: [
      ...[429, 503, 401, 403, 402].map((s) =>
        pair(`refused-${s}`, { upstreamModel: 'gpt-a', credential: { env: 'CHAT_A_KEY' } }, { upstreamModel: 'gpt-b' }),
      ),
      chatModel('not-sent', [channel('a', await closedPortUrl(), 2), channel('b', b.baseUrl, 1)]),
      // TLS to a plain-HTTP server: the handshake fails before the request can leave.
      chatModel('tls-failed', [channel('a', a.baseUrl.replace('http:', 'https:'), 2), channel('b', b.baseUrl, 1)]),
      pair('server-error'),
      pair('server-error-failover', { failoverOn5xx: true }),
      pair('bad-request'),
      pair('hangup'),
      pair('timeout', { timeoutMs: 300 }),
      pair('stream-refused'),
      pair('stream-drop'),
      pair('last-code'),
      chatModel('all-refuse', [channel('a', a.baseUrl, 3), channel('b', b.baseUrl, 2), channel('c', c.baseUrl, 1)]),
      pair('cooling', { cooldownAfter: 2, cooldownMs: 60_000 }),
      pair('all-cooling', COOL_AT_ONCE, COOL_AT_ONCE),
      { id: 'single', kind: 'chat', provider: 'openai', baseUrl: a.baseUrl, timeoutMs: 5000 },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await Promise.all([a, b, c].map((f) => f?.close()));
});
beforeEach(() => [a, b, c].forEach((f) => f.reset()));

const ask = (model: string, extra: Extra = {}) =>
  http(kiln.baseUrl, KEY_A)('/v1/chat/completions', {
    method: 'POST',
    json: { model, messages: [{ role: 'user', content: [textItem('hi')] }], ...extra },
  });
const counts = () => [a.requests.length, b.requests.length, c.requests.length];

/** The `data:` events of a streamed answer, [DONE] left out, and whether it came. */
const events = (text: string) => {
  const data = text
    .split('\n\n')
    .filter(Boolean)
    .map((e) => e.replace(/^data: /, ''));
  return { done: data.includes('[DONE]'), events: data.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d)) };
};
const streamedText = (evs: any[]) => evs.map((e) => e.choices?.[0]?.delta?.content ?? '').join('');

/** The channel's health as the admin view and the metrics read it (released calls by outcome). */
async function health(modelId: string, channelId: string): Promise<ChannelSnapshot> {
  const m = modelsOfKind(kiln.config.models, 'chat').find((x) => x.id === modelId)!;
  const ch = m.channels.find((x) => x.id === channelId)!;
  return new RedisChannelState(kiln.api.redis, kiln.config.redisPrefix).snapshot(
    { model: modelId, channel: channelId },
    limitsOf(ch),
  );
}
const recent = async (modelId: string, channelId: string) => {
  const r = (await health(modelId, channelId)).recent;
  return Object.fromEntries(Object.entries(r).filter(([, n]) => n > 0));
};

describe('a refusal before processing moves the call to the next channel', () => {
  it.each([429, 503, 401, 403, 402])('%i on a: b answers, each got one request', async (status) => {
    a.enqueue(fail(status, 'not now', status === 429 ? { retryAfter: '30' } : {}));
    b.enqueue(ok('From b.'));
    const res = await ask(`refused-${status}`);
    expect(res.status, res.text).toBe(200);
    expect(res.json).toMatchObject({ model: `refused-${status}`, choices: [{ message: { content: 'From b.' } }] });
    expect(counts()).toEqual([1, 1, 0]);
    // Each channel calls with its own settings: its upstream model and its credential.
    expect(a.requests[0].body.model).toBe('gpt-a');
    expect(a.requests[0].headers.authorization).toBe(`Bearer ${CONFIGURED_KEY}`);
    expect(b.requests[0].body.model).toBe('gpt-b');
    expect(b.requests[0].headers.authorization).toBe(`Bearer ${KEY_A}`);
    expect(await recent(`refused-${status}`, 'a')).toEqual({ refused: 1 });
    expect(await recent(`refused-${status}`, 'b')).toEqual({ succeeded: 1 });
    // A 429's Retry-After cools the channel down for that long at once.
    if (status === 429) expect((await health('refused-429', 'a')).state).toBe('open');
  });

  it('a channel that cannot be reached (connection refused): b answers', async () => {
    const res = await ask('not-sent');
    expect(res.status, res.text).toBe(200);
    expect(counts()).toEqual([0, 1, 0]);
    expect(await recent('not-sent', 'a')).toEqual({ not_sent: 1 });
  });

  it('a failed TLS handshake: b answers', async () => {
    const res = await ask('tls-failed');
    expect(res.status, res.text).toBe(200);
    expect(counts()).toEqual([0, 1, 0]);
    expect(await recent('tls-failed', 'a')).toEqual({ not_sent: 1 });
  });

  it('a 500 moves on only from a channel with failoverOn5xx', async () => {
    a.enqueue(fail(500, 'boom'));
    const res = await ask('server-error');
    expect([res.status, res.json?.error?.code]).toEqual([502, 'upstream_error']);
    expect(res.json.error.message).toContain('upstream answered 500: boom');
    expect(counts()).toEqual([1, 0, 0]);
    expect(await recent('server-error', 'a')).toEqual({ failed: 1 });

    a.reset();
    a.enqueue(fail(500, 'boom'));
    const moved = await ask('server-error-failover');
    expect(moved.status, moved.text).toBe(200);
    expect(counts()).toEqual([1, 1, 0]);
  });

  it('every channel refusing: the caller gets the last refusal, each channel asked once', async () => {
    a.enqueue(fail(429, 'a is busy'));
    b.enqueue(fail(429, 'b is busy'));
    c.enqueue(fail(429, 'c is busy', { retryAfter: '9' }));
    const res = await ask('all-refuse');
    expect([res.status, res.json?.error?.code]).toEqual([429, 'upstream_rate_limited']);
    expect(res.json.error.message).toContain('c is busy');
    expect(res.headers.get('retry-after')).toBe('9');
    expect(counts()).toEqual([1, 1, 1]);
  });

  it("the last refusal's code is the caller's (402 after a 429)", async () => {
    a.enqueue(fail(429, 'busy'));
    b.enqueue(fail(402, 'no credit left'));
    const res = await ask('last-code');
    expect([res.status, res.json?.error?.code]).toEqual([402, 'insufficient_balance']);
    expect(counts()).toEqual([1, 1, 0]);
  });
});

describe('a channel that may have taken the work keeps the call', () => {
  it('a 400 (the caller’s fault) goes to no other channel', async () => {
    a.enqueue(fail(400, 'bad field'));
    const res = await ask('bad-request');
    expect([res.status, res.json?.error?.code]).toEqual([400, 'invalid_request']);
    expect(counts()).toEqual([1, 0, 0]);
  });

  it('a connection dropped after the request arrived: upstream_error, exactly one request received', async () => {
    a.enqueue({ kind: 'hangup' });
    const res = await ask('hangup');
    expect([res.status, res.json?.error?.code]).toEqual([502, 'upstream_error']);
    expect(counts().reduce((x, y) => x + y)).toBe(1);
    expect(counts()).toEqual([1, 0, 0]);
    expect(await recent('hangup', 'a')).toEqual({ ambiguous: 1 });
  });

  it("a timeout on the channel's own budget: upstream_timeout, b not asked", async () => {
    a.enqueue({ kind: 'hang' });
    const res = await ask('timeout');
    expect([res.status, res.json?.error?.code]).toEqual([504, 'upstream_timeout']);
    expect(res.json.error.message).toContain('within 300 ms');
    expect(counts()).toEqual([1, 0, 0]);
    expect(await recent('timeout', 'a')).toEqual({ ambiguous: 1 });
  });
});

describe('streams', () => {
  it('a refusal before any chunk: b streams the answer', async () => {
    a.enqueue(fail(429, 'busy'));
    b.enqueue(ok('streamed by b'));
    const res = await ask('stream-refused', { stream: true });
    expect(res.status, res.text).toBe(200);
    const got = events(res.text);
    expect(got.done).toBe(true);
    expect(streamedText(got.events)).toBe('streamed by b');
    expect(got.events[0]).toMatchObject({ object: 'chat.completion.chunk', model: 'stream-refused' });
    expect(counts()).toEqual([1, 1, 0]);
    // The lease is given back once the stream ended, with its verdict.
    expect(
      await eventually(
        () => recent('stream-refused', 'b'),
        (r) => r.succeeded === 1,
      ),
    ).toEqual({
      succeeded: 1,
    });
  });

  it('a failure after the first chunk ends the stream with an error event; b not asked', async () => {
    a.enqueue({ kind: 'drop', after: 2 });
    const res = await ask('stream-drop', { stream: true });
    expect(res.status).toBe(200);
    const got = events(res.text);
    expect(got.done).toBe(false);
    expect(streamedText(got.events)).toBe('partial ');
    expect(got.events.at(-1)).toMatchObject({ error: { code: 'upstream_error' } });
    expect(counts()).toEqual([1, 0, 0]);
    expect(
      await eventually(
        () => recent('stream-drop', 'a'),
        (r) => r.ambiguous === 1,
      ),
    ).toEqual({ ambiguous: 1 });
  });
});

describe('cool-downs', () => {
  it('a channel cooling down after cooldownAfter refusals gets no request from the next calls', async () => {
    a.enqueue(fail(429, 'busy'), fail(429, 'busy'), fail(429, 'busy'));
    for (let i = 0; i < 2; i++) expect((await ask('cooling')).status).toBe(200);
    expect(counts()).toEqual([2, 2, 0]);
    expect((await health('cooling', 'a')).state).toBe('open');
    for (let i = 0; i < 3; i++) expect((await ask('cooling')).status).toBe(200);
    expect(counts()).toEqual([2, 5, 0]);
  });

  it('every channel cooling down: 429 upstream_rate_limited at once, no upstream asked', async () => {
    a.enqueue(fail(429, 'a busy'));
    b.enqueue(fail(429, 'b busy'));
    expect((await ask('all-cooling')).json?.error?.message).toContain('b busy');
    expect(counts()).toEqual([1, 1, 0]);
    const res = await ask('all-cooling');
    expect([res.status, res.json?.error?.code]).toEqual([429, 'upstream_rate_limited']);
    expect(res.json.error.message).toContain('No channel of model all-cooling can take a request now');
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(counts()).toEqual([1, 1, 0]);
  });

  it('a model with one channel keeps asking its upstream: nowhere else to go', async () => {
    for (let i = 0; i < 4; i++) a.enqueue(fail(429, 'busy'));
    for (let i = 0; i < 4; i++) {
      const res = await ask('single');
      expect(res.json?.error?.message).toContain('upstream answered 429: busy');
    }
    expect(counts()).toEqual([4, 0, 0]);
    expect(await recent('single', 'default')).toEqual({ refused: 4 });
  });
});
