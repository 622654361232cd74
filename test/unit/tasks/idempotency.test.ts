// Idempotency-Key without servers: the header's rules, the request fingerprint (key order does not
// matter, content does), the derived task id, the HTTP answers to a bad header, and the client's key
// handling (one key per logical submit, the same on each retry).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  canonicalJson,
  idempotencySecret,
  idempotentTaskId,
  parseIdempotencyKey,
  requestFingerprint,
} from '../../../src/shared/idempotency.js';
import { ERROR_STATUS } from '../../../src/shared/errors.js';
import { Kiln, newIdempotencyKey, IdempotencyKeyReusedError } from '../../../src/client/index.js';
import { fakeFetch, transportError } from '../client/fake-fetch.js';
import { request, startUnitApp, type UnitApp } from '../../support/unit-app.js';

describe('Idempotency-Key header', () => {
  it('is optional', () => {
    expect(parseIdempotencyKey(undefined)).toBeUndefined();
  });

  it('takes 1 to 255 characters 0x21-0x7E', () => {
    const all = Array.from({ length: 94 }, (_, i) => String.fromCharCode(0x21 + i)).join('');
    expect(parseIdempotencyKey(all)).toBe(all);
    expect(parseIdempotencyKey('a')).toBe('a');
    expect(parseIdempotencyKey('k'.repeat(255))).toBe('k'.repeat(255));
    expect(parseIdempotencyKey('"8e03978e-40d5-43e8-bc93-6894a57f9324"')).toBe(
      '"8e03978e-40d5-43e8-bc93-6894a57f9324"',
    );
  });

  it.each([
    ['empty', ''],
    ['256 characters', 'k'.repeat(256)],
    ['a space', 'two words'],
    ['a tab', 'a\tb'],
    ['a control character', 'a\u0001b'],
    ['DEL', 'a\u007fb'],
    ['a newline', 'a\nb'],
    ['non-ASCII', 'caf\u00e9'],
    ['sent twice (joined by Node)', 'one, two'],
  ])('refuses %s with 400 invalid_request naming the header', (_, value) => {
    let err: any;
    try {
      parseIdempotencyKey(value);
    } catch (e) {
      err = e;
    }
    expect(err?.code).toBe('invalid_request');
    expect(err?.status).toBe(400);
    expect(err?.message).toContain('Idempotency-Key');
  });

  it('refuses a repeated header given as a list', () => {
    expect(() => parseIdempotencyKey(['a', 'b'])).toThrow(/more than once/);
  });
});

describe('request fingerprint', () => {
  const body = {
    contents: [
      { role: 'user', parts: [{ text: 'a fox' }, { inlineData: { mimeType: 'image/png', data: 'https://x/y.png' } }] },
    ],
    generationConfig: { responseModalities: ['IMAGE'], imageConfig: { aspectRatio: '1:1', imageSize: '1K' } },
  };
  const reordered = {
    generationConfig: { imageConfig: { imageSize: '1K', aspectRatio: '1:1' }, responseModalities: ['IMAGE'] },
    contents: [
      { parts: [{ text: 'a fox' }, { inlineData: { data: 'https://x/y.png', mimeType: 'image/png' } }], role: 'user' },
    ],
  };

  it('does not depend on key order, at any depth', () => {
    expect(canonicalJson(reordered)).toBe(canonicalJson(body));
    expect(requestFingerprint('generateContent', 'm', reordered)).toBe(
      requestFingerprint('generateContent', 'm', body),
    );
    expect(requestFingerprint('generateContent', 'm', body)).toMatch(/^[a-f0-9]{64}$/);
  });

  it('leaves out undefined members as JSON does, and keeps array order', () => {
    expect(canonicalJson({ b: 1, a: undefined, c: [2, 1] })).toBe('{"b":1,"c":[2,1]}');
    expect(canonicalJson([undefined, null, 'x'])).toBe('[null,null,"x"]');
    expect(canonicalJson({ s: 'é"\\' })).toBe(JSON.stringify({ s: 'é"\\' }));
  });

  it('changes with the body, the model and the endpoint', () => {
    const base = requestFingerprint('generateContent', 'm', body);
    const other = structuredClone(body);
    other.contents[0].parts[0].text = 'a fox ';
    expect(requestFingerprint('generateContent', 'm', other)).not.toBe(base);
    const swapped = structuredClone(body);
    swapped.contents[0].parts.reverse();
    expect(requestFingerprint('generateContent', 'm', swapped)).not.toBe(base);
    expect(requestFingerprint('generateContent', 'm2', body)).not.toBe(base);
    expect(requestFingerprint('generateContent:direct:base64', 'm', body)).not.toBe(base);
    expect(requestFingerprint('videos', 'm', body)).not.toBe(base);
  });
});

describe('derived task id', () => {
  const secret = idempotencySecret(Buffer.alloc(32, 7));

  it('keeps the id format, and differs per owner, kind, key and secret', () => {
    const id = idempotentTaskId(secret, 'task', 'owner-a', 'k1');
    expect(id).toMatch(/^task_[a-f0-9]{32}$/);
    expect(idempotentTaskId(secret, 'task', 'owner-a', 'k1')).toBe(id);
    expect(idempotentTaskId(secret, 'video', 'owner-a', 'k1')).toMatch(/^video_[a-f0-9]{32}$/);
    expect(idempotentTaskId(secret, 'video', 'owner-a', 'k1').slice(6)).not.toBe(id.slice(5));
    expect(idempotentTaskId(secret, 'task', 'owner-b', 'k1')).not.toBe(id);
    expect(idempotentTaskId(secret, 'task', 'owner-a', 'k2')).not.toBe(id);
    expect(idempotentTaskId(idempotencySecret(Buffer.alloc(32, 8)), 'task', 'owner-a', 'k1')).not.toBe(id);
    // The separator keeps (owner, key) pairs apart.
    expect(idempotentTaskId(secret, 'task', 'a\nb', 'c')).not.toBe(idempotentTaskId(secret, 'task', 'a', 'b\nc'));
  });

  it('is in the catalogue as 422', () => {
    expect(ERROR_STATUS.idempotency_key_reused).toBe(422);
  });
});

describe('HTTP: a bad header is refused before anything starts', () => {
  let app: UnitApp;
  beforeAll(async () => {
    app = await startUnitApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it.each([
    ['/v1beta/models/kiln-image-1:generateContent?output=url', { contents: [{ parts: [{ text: 'x' }] }] }],
    ['/v1/videos', { model: 'kiln-video-1', prompt: 'x' }],
  ])('%s', async (path, body) => {
    for (const key of ['k'.repeat(256), 'a b', '']) {
      const r = await request(app, 'POST', path, { body, headers: { 'Idempotency-Key': key } });
      expect(r.status, r.text).toBe(400);
      expect(r.json.error.code).toBe('invalid_request');
      expect(r.json.error.message).toContain('Idempotency-Key');
    }
    expect(app.started).toHaveLength(0);
  });
});

describe('client', () => {
  const submitted = {
    id: 'task_' + '0'.repeat(32),
    object: 'image.task',
    model: 'm',
    status: 'accepted',
    created_at: 1,
  };

  it('sends one fresh key per submit and the same key on its retries', async () => {
    const f = fakeFetch((_call, n) =>
      n === 1
        ? transportError()
        : n === 2
          ? { status: 503, json: { error: { code: 'service_unavailable', message: 'x' } } }
          : { status: 202, json: submitted },
    );
    const kiln = new Kiln({
      baseURL: 'http://kiln.test',
      apiKey: 'k',
      fetch: f.fetch,
      polling: { retryInitialMs: 1, retryMaxMs: 1 },
    });
    await kiln.tasks.create({ model: 'm', prompt: 'p' });
    const keys = f.calls.map((c) => c.headers.get('idempotency-key'));
    expect(keys).toHaveLength(3);
    expect(keys[0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set(keys).size).toBe(1);
    await kiln.tasks.create({ model: 'm', prompt: 'p' });
    expect(f.calls[3].headers.get('idempotency-key')).not.toBe(keys[0]);
    await kiln.videos.create({ model: 'v', prompt: 'p' }, { idempotencyKey: 'mine-1' });
    expect(f.calls[4].headers.get('idempotency-key')).toBe('mine-1');
  });

  it('types 422 idempotency_key_reused', async () => {
    const f = fakeFetch(() => ({ status: 422, json: { error: { code: 'idempotency_key_reused', message: 'x' } } }));
    const kiln = new Kiln({ baseURL: 'http://kiln.test', apiKey: 'k', fetch: f.fetch });
    await expect(kiln.tasks.create({ model: 'm', prompt: 'p' }, { idempotencyKey: 'k1' })).rejects.toBeInstanceOf(
      IdempotencyKeyReusedError,
    );
    expect(f.calls).toHaveLength(1);
  });

  it('makes UUIDs without crypto.randomUUID too', () => {
    const saved = globalThis.crypto.randomUUID;
    try {
      Object.defineProperty(globalThis.crypto, 'randomUUID', { value: undefined, configurable: true });
      const k = newIdempotencyKey();
      expect(k).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(newIdempotencyKey()).not.toBe(k);
    } finally {
      Object.defineProperty(globalThis.crypto, 'randomUUID', { value: saved, configurable: true });
    }
  });
});
