// The openai-images provider's failures through Kiln's public API against the fake: each error class
// (OpenAI's and Ark's bodies), what is refused before any work (failover to another channel) and
// what may have been processed, 429 resends, an idempotent channel's resend with the same key, a
// timeout, a lost answer (uncertain, one request), a cancel while the call is in flight, and the
// key kept out of logs, Redis and task views.
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { closedPortUrl } from '../../../support/fake-server.js';
import { eventually, http, imageSteps, startKiln, submitBody, type Kiln } from '../../../support/kiln.js';
import {
  drop,
  fail,
  ok,
  startFakeOpenAIImages,
  type FakeOpenAIImages,
  type ImagesFault,
} from './fake-openai-images.js';

const SECRET = 'sk-proj-SECRET-openai-images-passthrough-8675309';
const logLines: string[] = [];
const sink = new Writable({
  write(chunk, _enc, cb) {
    logLines.push(chunk.toString());
    cb();
  },
});

let fake: FakeOpenAIImages;
let kiln: Kiln;

beforeAll(async () => {
  fake = await startFakeOpenAIImages();
  const closed = await closedPortUrl();
  const base = { provider: 'openai-images', baseUrl: fake.baseUrl, upstreamModel: 'gpt-image-1', timeoutMs: 5000 };
  kiln = await startKiln({
    log: pino({ level: 'trace' }, sink),
    env: { REFERENCE_FETCH_ALLOW: '127.0.0.2' },
    // queueTimeoutMs 0 (gpt, seedream): a refusal ends the task at once, so each answer's mapping is
    // read; gpt-closed waits and sends again (channels/refusal-wait.test.ts has the rest of that).
    models: [
      { ...base, id: 'gpt', maxAttempts: 3, rateLimitRetries: 1, rateLimitBackoffMs: 100, queueTimeoutMs: 0 },
      { ...base, id: 'gpt-idem', idempotent: true, maxAttempts: 3 },
      { ...base, id: 'gpt-slow', timeoutMs: 1500 },
      { ...base, id: 'gpt-closed', baseUrl: closed, maxAttempts: 2, queueTimeoutMs: 1500 },
      {
        ...base,
        id: 'seedream',
        upstreamModel: 'seedream-4-0-250828',
        generationsPath: '/api/v3/images/generations',
        responseFormat: 'url',
        rateLimitRetries: 0,
        queueTimeoutMs: 0,
        sizes: { '1:1': '2048x2048' },
      },
      {
        id: 'gpt-fo',
        channels: [
          { ...base, id: 'openai', priority: 2, cooldownAfter: 1000 },
          { id: 'local', provider: 'local', priority: 1, latencyMs: 10, idempotent: true },
        ],
      },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await fake?.close();
});
beforeEach(() => fake.reset());

const { api, submit, finish } = imageSteps(() => kiln.baseUrl);
const prompted = (prompt: string) => submitBody(prompt);
const byPrompt = (table: [string, ImagesFault, string][]) => (c: { body: any }) =>
  table.find(([p]) => p === c.body?.prompt)?.[1];
const callsOf = (prompt: string) => fake.calls().filter((c) => c.body?.prompt === prompt);

describe('error answers', () => {
  it("maps OpenAI's errors; a quota 429 is not resent, a rate-limit 429 is (rateLimitRetries 1)", async () => {
    const table: [string, ImagesFault, string][] = [
      ['e401', fail(401, 'Incorrect API key provided: sk-…', { code: 'invalid_api_key' }), 'auth_failed'],
      [
        'equota',
        fail(429, 'You exceeded your current quota, please check your plan and billing details.', {
          type: 'insufficient_quota',
          code: 'insufficient_quota',
        }),
        'insufficient_balance',
      ],
      [
        'e429',
        fail(429, 'Rate limit reached for gpt-image-1 on images per minute (IPM).', {
          type: 'requests',
          code: 'rate_limit_exceeded',
          retryAfter: '0',
        }),
        'upstream_rate_limited',
      ],
      [
        'emod',
        fail(400, 'Your request was rejected by the safety system.', { code: 'moderation_blocked' }),
        'invalid_request',
      ],
      [
        'eparam',
        fail(400, "Invalid value: 'portrait'. Supported values are: '1024x1024', '1024x1536'.", {
          code: 'invalid_value',
          param: 'size',
        }),
        'invalid_request',
      ],
      [
        'e503',
        fail(503, 'The engine is currently overloaded, please try again later.', {
          type: 'server_error',
          code: 'engine_overloaded',
        }),
        'upstream_error',
      ],
      ['e500', fail(500, 'The server had an error while processing your request.'), 'upstream_error'],
      ['e504', fail(504, 'Gateway timeout.'), 'upstream_timeout'],
    ];
    fake.onCall = byPrompt(table);
    const ended = await Promise.all(table.map(async ([p]) => finish(await submit('gpt', prompted(p)))));
    expect(ended.map((t, i) => [table[i]![0], t.status, t.error?.code])).toEqual(
      table.map(([p, , code]) => [p, 'failed', code]),
    );
    const message = (p: string) => ended[table.findIndex(([q]) => q === p)].error.message as string;
    expect(message('emod')).toMatch(/content policy refused the request \(moderation_blocked\): Your request was/);
    expect(message('eparam')).toMatch(/400 invalid_value, naming the field size: Invalid value: 'portrait'/);
    expect(message('e429')).toMatch(/after 1 retry/);
    for (const [p] of table) expect(callsOf(p), p).toHaveLength(p === 'e429' ? 2 : 1);
  });

  it("maps Ark's errors for a Seedream channel, and an image Seedream would not make", async () => {
    const table: [string, ImagesFault, string][] = [
      [
        'a401',
        fail(401, 'The API key or AK/SK in the request is missing or invalid.', { code: 'AuthenticationError' }),
        'auth_failed',
      ],
      [
        'aoverdue',
        fail(403, 'Your account has an overdue balance.', { code: 'AccountOverdueError' }),
        'insufficient_balance',
      ],
      [
        'aquota',
        fail(429, 'Your account has reached its free quota.', { code: 'QuotaExceeded' }),
        'insufficient_balance',
      ],
      [
        'arpm',
        fail(429, 'Request rate exceeds the endpoint RPM.', { code: 'RateLimitExceeded.EndpointRPMExceeded' }),
        'upstream_rate_limited',
      ],
      ['abusy', fail(429, 'The service is overloaded.', { code: 'ServerOverloaded' }), 'upstream_rate_limited'],
      [
        'asens',
        fail(400, 'The request failed because the input text may contain sensitive information.', {
          code: 'InputTextSensitiveContentDetected',
        }),
        'invalid_request',
      ],
      [
        'aparam',
        fail(400, 'The parameter `size` specified in the request is not valid.', {
          code: 'InvalidParameter',
          param: 'size',
        }),
        'invalid_request',
      ],
      [
        'aitem',
        ok({
          count: 0,
          itemErrors: [
            {
              code: 'OutputImageSensitiveContentDetected',
              message: 'The request failed because the output image may contain sensitive information.',
            },
          ],
        }),
        'invalid_request',
      ],
    ];
    fake.onCall = byPrompt(table);
    const ended = await Promise.all(table.map(async ([p]) => finish(await submit('seedream', prompted(p)))));
    expect(ended.map((t, i) => [table[i]![0], t.status, t.error?.code])).toEqual(
      table.map(([p, , code]) => [p, 'failed', code]),
    );
    expect(ended.at(-1).error.message).toMatch(
      /content policy refused the image \(OutputImageSensitiveContentDetected\)/,
    );
    expect(ended.find((t: any) => t.error.message.includes('InvalidParameter')).error.message).toMatch(
      /naming the field size/,
    );
    expect(fake.calls().every((c) => c.path === '/api/v3/images/generations')).toBe(true);
    for (const [p] of table) expect(callsOf(p), p).toHaveLength(1);
  });

  it('a refusal before any work (quota, 503) moves the task to the next channel; a 500 does not', async () => {
    fake.onCall = byPrompt([
      ['quota', fail(429, 'You exceeded your current quota.', { code: 'insufficient_quota' }), ''],
      ['busy', fail(503, 'The engine is currently overloaded.', { code: 'engine_overloaded' }), ''],
      ['broke', fail(500, 'The server had an error.'), ''],
    ]);
    const [quota, busy, broke] = await Promise.all(
      ['quota', 'busy', 'broke'].map(async (p) => finish(await submit('gpt-fo', prompted(p)))),
    );
    expect(quota).toMatchObject({ status: 'succeeded', channel: 'local' });
    expect(busy).toMatchObject({ status: 'succeeded', channel: 'local' });
    expect(broke).toMatchObject({ status: 'failed', error: { code: 'upstream_error' } });
    for (const p of ['quota', 'busy', 'broke']) expect(callsOf(p)).toHaveLength(1);
  });

  it('an idempotent channel gets the task id as Idempotency-Key, and a 500 is resent with it', async () => {
    fake.enqueue(fail(500, 'The server had an error while processing your request.'));
    const id = await submit('gpt-idem');
    const task = await finish(id);
    expect(task).toMatchObject({ status: 'succeeded', attempts: 2 });
    const calls = fake.calls();
    expect(calls).toHaveLength(2);
    expect(calls.map((c) => c.headers['idempotency-key'])).toEqual([id, id]);
    expect(calls[1]!.body).toEqual(calls[0]!.body);
  });
});

describe('timeouts, lost answers and cancels', () => {
  it('no answer within timeoutMs: upstream_timeout, and never a second request', async () => {
    fake.enqueue(ok({ delayMs: 4000 }));
    const task = await finish(await submit('gpt-slow'));
    expect(task).toMatchObject({ status: 'failed', error: { code: 'upstream_timeout' } });
    await new Promise((r) => setTimeout(r, 1000));
    expect(fake.calls()).toHaveLength(1);
  });

  it('a connection refused left nothing sent: sent again until the queue timeout, then upstream_error, never uncertain', async () => {
    const task = await finish(await submit('gpt-closed'));
    expect(task).toMatchObject({ status: 'failed', error: { code: 'upstream_error' } });
    expect(task.attempts).toBeGreaterThanOrEqual(2);
    expect(task.error.message).toMatch(/ECONNREFUSED.*queue timeout/);
  });

  it('a connection dropped after the request arrived ends uncertain, with exactly one request', async () => {
    fake.enqueue(drop());
    const task = await finish(await submit('gpt'));
    expect(task.status).toBe('uncertain');
    expect(task.uncertain_reason).toMatch(/outcome cannot be confirmed/);
    await new Promise((r) => setTimeout(r, 1500));
    expect(fake.calls()).toHaveLength(1);
  });

  it('a cancel while the call is in flight aborts it: failed / canceled, one request, its connection closed', async () => {
    let release!: () => void;
    fake.enqueue(ok({ hold: new Promise<void>((r) => (release = r)) }));
    const id = await submit('gpt');
    await fake.waitForRequests(1);
    const res = await api()(`/v1/tasks/${id}/cancel`, { method: 'POST' });
    expect(res.status, res.text).toBe(202);
    const task = await finish(id);
    expect(task).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    expect(task.error.message).toMatch(/may have reached the upstream/);
    const [call] = await eventually(
      async () => fake.calls(),
      (c) => c[0]?.closedAt !== undefined,
    );
    expect(call!.closedAt).toBeDefined();
    release();
    await new Promise((r) => setTimeout(r, 1000));
    expect(fake.calls()).toHaveLength(1);
  });
});

describe('the key', () => {
  it('never appears in logs, task views or Redis, even when the upstream echoes it', async () => {
    fake.key = SECRET;
    fake.onCall = (c) => (c.body?.prompt === 'echo' ? fail(400, `Key ${SECRET} is not allowed here.`) : undefined);
    const own = imageSteps(() => kiln.baseUrl, SECRET);
    const echoed = await own.finish(await own.submit('gpt', prompted('echo')));
    expect(echoed).toMatchObject({ status: 'failed', error: { code: 'invalid_request' } });
    expect(echoed.error.message).toContain('Key [redacted] is not allowed here.');
    const good = await own.finish(await own.submit('gpt', prompted('a quiet one')));
    expect(good.status).toBe('succeeded');
    expect(fake.calls().every((c) => c.headers.authorization === `Bearer ${SECRET}`)).toBe(true);

    const listed = await http(kiln.baseUrl, SECRET)('/v1/tasks');
    expect(listed.status).toBe(200);
    expect(listed.text.includes(SECRET)).toBe(false);
    for (const k of await kiln.api.redis.keys(`${kiln.config.redisPrefix}*`)) {
      const type = await kiln.api.redis.type(k);
      const dump =
        type === 'hash'
          ? JSON.stringify(await kiln.api.redis.hgetall(k))
          : type === 'zset'
            ? JSON.stringify(await kiln.api.redis.zrange(k, '0', '-1'))
            : type === 'string'
              ? String(await kiln.api.redis.get(k))
              : '';
      expect(k.includes(SECRET) || dump.includes(SECRET), k).toBe(false);
    }
    expect(logLines.length).toBeGreaterThan(0);
    expect(logLines.join('').includes(SECRET)).toBe(false);
  });
});
