// The gemini provider against a fake upstream (a real HTTP server): the contract's parsing rules
// (one case per rule that fails if the rule is dropped), several images and candidates, 429 with
// Retry-After, 5xx retries for idempotent upstreams, and upstream capacity through the task queue.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { fail, ok, startFakeGemini, fakeGeminiModel, TINY_PNG, type FakeGemini } from './fake-gemini.js';
import { startKiln, imageSteps, type Kiln } from '../../../support/kiln.js';
import { retryDelay } from '../../../../activities/providers/gemini/image.js';

// Not a decodable picture, but bytes with a JPEG / WebP signature are enough to prove the media type is kept.
const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01, 0xff, 0xd9]);
const WEBP = Buffer.concat([Buffer.from('RIFF'), Buffer.from([8, 0, 0, 0]), Buffer.from('WEBPVP8 ')]);
const png64 = TINY_PNG.toString('base64');

let fake: FakeGemini;
let kiln: Kiln;

beforeAll(async () => {
  fake = await startFakeGemini();
  const gemini = fakeGeminiModel(fake);
  kiln = await startKiln({
    models: [
      {
        ...gemini,
        id: 'p-main',
        idempotent: false,
        maxAttempts: 3,
        rateLimitRetries: 2,
        rateLimitBackoffMs: 200,
        queueTimeoutMs: 0,
      },
      { ...gemini, id: 'p-norl', idempotent: false, rateLimitRetries: 0, queueTimeoutMs: 0 },
      { ...gemini, id: 'p-idem', idempotent: true, maxAttempts: 3 },
      { ...gemini, id: 'p-cap', concurrency: 2, timeoutMs: 20_000 },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await fake?.close();
});
beforeEach(() => fake.reset());

const { submit, finish, status, contentLocation } = imageSteps(() => kiln.baseUrl);
const storedUrl = (ext: string) => new RegExp(`^${kiln.baseUrl}/v1/files/[a-f0-9]{32}\\.${ext}$`);

describe('parsing rules', () => {
  it(
    'rule 1: a part without inlineData is not an image (function ' +
      'calls, fileData, thought drafts are dropped; text is kept)',
    async () => {
      fake.enqueue(
        ok([
          { functionCall: { name: 'draw', args: {} } },
          { fileData: { mimeType: 'image/png', fileUri: 'https://files.example.test/f.png' } },
          { inlineData: { mimeType: 'image/png', data: 'https://drafts.example.test/thinking.png' }, thought: true },
          { text: 'The fox:' },
          { inlineData: { mimeType: 'image/png', data: png64 } },
        ]),
      );
      const id = await submit('p-main');
      const task = await finish(id);
      expect(task.status).toBe('succeeded');
      const parts = task.candidates[0].content.parts;
      expect(parts).toHaveLength(2);
      expect(parts[0]).toEqual({ text: 'The fox:' });
      expect(parts[1].inlineData.data).toMatch(storedUrl('png'));
      expect(await contentLocation(id)).toBe(parts[1].inlineData.data);
    },
  );

  it('rule 2: inlineData whose mimeType does not start with image/ (or is missing) is not an image', async () => {
    fake.enqueue(
      ok([
        { inlineData: { mimeType: 'text/plain', data: Buffer.from('not a picture').toString('base64') } },
        { inlineData: { mimeType: 'application/octet-stream', data: 'https://cdn.example.test/blob' } },
        { inlineData: { data: 'https://cdn.example.test/untyped.png' } },
        { inlineData: { mimeType: 'image/png', data: 'https://cdn.example.test/real.png' } },
      ]),
    );
    const id = await submit('p-main');
    const task = await finish(id);
    expect(task.status).toBe('succeeded');
    expect(task.candidates[0].content.parts).toEqual([
      { inlineData: { mimeType: 'image/png', data: 'https://cdn.example.test/real.png' } },
    ]);
    expect(await contentLocation(id)).toBe('https://cdn.example.test/real.png');
  });

  it('rule 2: an answer whose only inlineData is not an image fails upstream_error', async () => {
    fake.enqueue(ok([{ text: 'here' }, { inlineData: { mimeType: 'application/pdf', data: png64 } }]));
    const task = await finish(await submit('p-main'));
    expect(task.status).toBe('failed');
    expect(task.error.code).toBe('upstream_error');
  });

  it('rule 3: data starting with http is an image URL and is passed through, not downloaded or stored', async () => {
    fake.enqueue(
      ok([
        { inlineData: { mimeType: 'image/png', data: 'http://cdn.example.test/a.png' } },
        { inlineData: { mimeType: 'image/webp', data: 'https://cdn.example.test/b.webp?sig=1' } },
      ]),
    );
    const task = await finish(await submit('p-main'));
    expect(task.status).toBe('succeeded');
    expect(task.candidates[0].content.parts).toEqual([
      { inlineData: { mimeType: 'image/png', data: 'http://cdn.example.test/a.png' } },
      { inlineData: { mimeType: 'image/webp', data: 'https://cdn.example.test/b.webp?sig=1' } },
    ]);
  });

  it(
    'rule 4: other data is base64, decoded and stored by its mimeType ' +
      '(jpeg, webp), served with that type; undecodable data is dropped',
    async () => {
      fake.enqueue(
        ok([
          { inlineData: { mimeType: 'image/jpeg', data: JPEG.toString('base64') } },
          { inlineData: { mimeType: 'image/png', data: 'this is not base64 !!' } },
          { inlineData: { mimeType: 'image/webp', data: WEBP.toString('base64url') } },
        ]),
      );
      const id = await submit('p-main');
      const task = await finish(id);
      expect(task.status).toBe('succeeded');
      const parts = task.candidates[0].content.parts;
      expect(parts.map((p: any) => p.inlineData.mimeType)).toEqual(['image/jpeg', 'image/webp']);
      expect(parts[0].inlineData.data).toMatch(storedUrl('jpg'));
      expect(parts[1].inlineData.data).toMatch(storedUrl('webp'));
      for (const [part, bytes, type] of [
        [parts[0], JPEG, 'image/jpeg'],
        [parts[1], WEBP, 'image/webp'],
      ] as const) {
        const res = await fetch(part.inlineData.data);
        expect(res.headers.get('content-type')).toBe(type);
        expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
      }
      expect(await contentLocation(id)).toBe(parts[0].inlineData.data);
    },
  );

  it(
    'keeps several images, several candidates and text-before-image ' +
      'order; the redirect uses the first image; ids come from the upstream',
    async () => {
      fake.enqueue(
        ok(
          [
            { text: 'first, some words' },
            { text: 'then more' },
            { inlineData: { mimeType: 'image/png', data: 'https://cdn.example.test/1.png' } },
            { inlineData: { mimeType: 'image/png', data: png64 } },
          ],
          {
            more: [
              [{ inlineData: { mimeType: 'image/png', data: 'https://cdn.example.test/3.png' } }, { text: 'after' }],
            ],
            responseId: 'r-77',
            modelVersion: 'mv-9',
          },
        ),
      );
      const id = await submit('p-main');
      const task = await finish(id);
      expect(task).toMatchObject({ status: 'succeeded', response_id: 'r-77', model_version: 'mv-9' });
      expect(task.candidates).toHaveLength(2);
      const [a, b] = task.candidates;
      expect(a.content.parts.slice(0, 3)).toEqual([
        { text: 'first, some words' },
        { text: 'then more' },
        { inlineData: { mimeType: 'image/png', data: 'https://cdn.example.test/1.png' } },
      ]);
      expect(a.content.parts[3].inlineData.data).toMatch(storedUrl('png'));
      expect(b).toMatchObject({
        index: 1,
        content: { parts: [{ inlineData: { data: 'https://cdn.example.test/3.png' } }, { text: 'after' }] },
      });
      expect(await contentLocation(id)).toBe('https://cdn.example.test/1.png');
    },
  );
});

describe('429: backed-off retries that honour Retry-After, within the time budget', () => {
  it(
    'waits Retry-After between resends and succeeds on the third ' +
      'request (a refusal may be resent even when not idempotent)',
    async () => {
      fake.enqueue(fail(429, 'slow down', { retryAfter: '1' }), fail(429, 'slow down', { retryAfter: '1' }), ok());
      const id = await submit('p-main');
      await fake.waitForRequests(1);
      expect(await status(id)).toBe('running');
      const task = await finish(id);
      expect(task.status).toBe('succeeded');
      expect(fake.requests).toHaveLength(3);
      expect(fake.requests[1].at - fake.requests[0].at).toBeGreaterThanOrEqual(950);
      expect(fake.requests[2].at - fake.requests[1].at).toBeGreaterThanOrEqual(950);
      expect(fake.requests[2].body).toEqual(fake.requests[0].body);
    },
  );

  it('without Retry-After, backs off doubling from rateLimitBackoffMs', async () => {
    fake.enqueue(fail(429, 'busy'), fail(429, 'busy'), ok());
    const task = await finish(await submit('p-main'));
    expect(task.status).toBe('succeeded');
    const gaps = [fake.requests[1].at - fake.requests[0].at, fake.requests[2].at - fake.requests[1].at];
    expect(gaps[0]).toBeGreaterThanOrEqual(190);
    expect(gaps[1]).toBeGreaterThanOrEqual(390);
  });

  it('gives up with upstream_rate_limited after rateLimitRetries resends: exactly retries + 1 requests', async () => {
    fake.setDefault(fail(429, 'Quota exceeded for images per minute.', { retryAfter: '0' }));
    const task = await finish(await submit('p-main'));
    expect(task.status).toBe('failed');
    expect(task.error.code).toBe('upstream_rate_limited');
    expect(task.error.message).toContain('after 2 retries');
    expect(task.error.message).toContain('Quota exceeded for images per minute.');
    expect(fake.requests).toHaveLength(3);
  });

  it('rateLimitRetries 0: the first 429 is final', async () => {
    fake.setDefault(fail(429, 'no', { retryAfter: '0' }));
    const task = await finish(await submit('p-norl'));
    expect(task.error.code).toBe('upstream_rate_limited');
    expect(fake.requests).toHaveLength(1);
  });

  it('a Retry-After that would pass the model timeout ends the task at once instead of waiting', async () => {
    fake.setDefault(fail(429, 'come back later', { retryAfter: '6' })); // timeoutMs is 5000
    const started = Date.now();
    const task = await finish(await submit('p-main'));
    expect(task.error.code).toBe('upstream_rate_limited');
    expect(task.error.message).toContain('budget');
    expect(fake.requests).toHaveLength(1);
    // Waiting out the Retry-After would alone take 6 s.
    expect(Date.now() - started).toBeLessThan(6000);
  });

  it('reads Retry-After as seconds or as an HTTP date, else uses the backoff', () => {
    expect(retryDelay('3', 100)).toBe(3000);
    expect(retryDelay('0.5', 100)).toBe(500);
    expect(retryDelay(null, 250)).toBe(250);
    expect(retryDelay('soon', 250)).toBe(250);
    const d = retryDelay(new Date(Date.now() + 10_000).toUTCString(), 0);
    expect(d).toBeGreaterThan(8000);
    expect(d).toBeLessThanOrEqual(10_000);
    expect(retryDelay(new Date(Date.now() - 10_000).toUTCString(), 0)).toBe(0);
  });
});

describe('5xx: retried only for idempotent upstreams', () => {
  it('idempotent: a 503 is retried with the same idempotency key and body, and the retry succeeds', async () => {
    fake.enqueue(
      fail(503, 'overloaded'),
      ok([{ inlineData: { mimeType: 'image/png', data: png64 } }], { responseId: 'after-503' }),
    );
    const id = await submit('p-idem');
    const task = await finish(id);
    expect(task).toMatchObject({ status: 'succeeded', response_id: 'after-503' });
    expect(fake.requests).toHaveLength(2);
    expect(fake.requests.map((r) => r.headers['idempotency-key'])).toEqual([id, id]);
    expect(fake.requests[1].raw).toBe(fake.requests[0].raw);
  });

  it(
    'idempotent: a 500 on every attempt ends upstream_error ' + 'after maxAttempts requests, with the upstream message',
    async () => {
      fake.setDefault(fail(500, 'Internal error encountered.'));
      const task = await finish(await submit('p-idem'));
      expect(task.status).toBe('failed');
      expect(task.error.code).toBe('upstream_error');
      expect(task.error.message).toContain('Internal error encountered.');
      expect(fake.requests).toHaveLength(3);
    },
  );

  it('not idempotent: a 500 is final after one request', async () => {
    fake.setDefault(fail(500, 'Internal error encountered.'));
    const task = await finish(await submit('p-main'));
    expect(task.error.code).toBe('upstream_error');
    expect(fake.requests).toHaveLength(1);
  });
});

describe('upstream capacity', () => {
  it('concurrency 2: a third task stays queued (no upstream call) until a slot frees, then runs', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    fake.setDefault(() => ok(undefined, { hold: gate }));
    const ids = [await submit('p-cap'), await submit('p-cap'), await submit('p-cap')];
    await fake.waitForRequests(2);
    await new Promise((r) => setTimeout(r, 1500)); // time enough for a third call, were there a slot
    expect(fake.requests).toHaveLength(2);
    const states = await Promise.all(ids.map(status));
    expect(states.filter((s) => s === 'running')).toHaveLength(2);
    expect(states.filter((s) => s === 'queued')).toHaveLength(1);
    const waiting = ids[states.indexOf('queued')]!;

    const releasedAt = Date.now();
    release();
    await fake.waitForRequests(3);
    expect(fake.requests[2].at).toBeGreaterThanOrEqual(releasedAt);
    const done = await Promise.all(ids.map(finish));
    expect(done.map((t) => t.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    expect(done.find((t) => t.id === waiting)).toBeTruthy();
    expect(fake.requests).toHaveLength(3);
  });
});
