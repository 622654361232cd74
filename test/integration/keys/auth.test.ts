// Authentication over HTTP: bearer-token format checks (both modes), issued keys and revocation.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyStore } from '../../../src/keys/store.js';
import { afterAuthCache } from '../../support/keys.js';
import { startKiln, http, submitBody, type Kiln } from '../../support/kiln.js';

const SUBMIT = '/v1beta/models/kiln-image-1:generateContent';
type Res = Awaited<ReturnType<ReturnType<typeof http>>>;

function expectError(r: Res, status: number, code: string) {
  expect({ status: r.status, code: r.json?.error?.code }, r.text.slice(0, 300)).toEqual({ status, code });
  expect(Object.keys(r.json)).toEqual(['error']);
  expect(Object.keys(r.json.error).sort()).toEqual(['code', 'message']);
  expect(r.json.error.message.length).toBeGreaterThan(0);
}

/** A request with exactly this Authorization header (or none). */
const withHeader = (kiln: Kiln, authorization: string | null) => {
  const api = http(kiln.baseUrl, null);
  return (path: string, init: RequestInit & { json?: unknown } = {}) =>
    api(path, {
      ...init,
      headers: authorization === null ? init.headers : { ...(init.headers as Record<string, string>), authorization },
    });
};

const ENDPOINTS: [string, RequestInit & { json?: unknown }][] = [
  [SUBMIT, { method: 'POST', json: submitBody() }],
  ['/v1beta/models/no-such-model:generateContent', { method: 'POST', json: submitBody() }],
  ['/v1/tasks', {}],
  [`/v1/tasks/task_${'0'.repeat(32)}`, {}],
  [`/v1/tasks/task_${'0'.repeat(32)}/content`, {}],
  ['/v1/tasks/batch-get', { method: 'POST', json: { ids: ['x'] } }],
  ['/v1/models', {}],
];

const MALFORMED: [string, string | null][] = [
  ['no header', null],
  ['Basic', 'Basic dXNlcjpwYXNzd29yZA=='],
  ['scheme only', 'Bearer'],
  ['empty token', 'Bearer '],
  ['token without scheme', 'sk-0123456789abcdef'],
  ['Token scheme', 'Token sk-0123456789abcdef'],
  ['space in token', 'Bearer abc def'],
  ['comma in token', 'Bearer abc,def'],
  ['quote in token', 'Bearer "abc"'],
  ['dollar in token', 'Bearer abc$def'],
  ['angle brackets', 'Bearer <script>'],
  ['latin-1 character', 'Bearer cl\u00e9'],
  ['two tokens', 'Bearer abc, Bearer def'],
  ['padding only', 'Bearer ===='],
  ['padding in the middle', 'Bearer ab=cd'],
  ['1025 characters', `Bearer ${'k'.repeat(1025)}`],
  ['1024 characters and padding', `Bearer ${'k'.repeat(1024)}=`],
  ['short token with huge padding', `Bearer abc${'='.repeat(4000)}`],
  ['8 KB token', `Bearer ${'k'.repeat(8192)}`],
];

describe.each(['passthrough', 'keys'] as const)('bearer token format (%s mode)', (mode) => {
  let kiln: Kiln;
  beforeAll(async () => {
    kiln = await startKiln({ workers: false, env: { AUTH_MODE: mode } });
  });
  afterAll(async () => {
    await kiln?.stop();
  });

  it.each(MALFORMED)('%s → 401 missing_api_key on every endpoint', async (_name, header) => {
    for (const [path, init] of ENDPOINTS) {
      const r = await withHeader(kiln, header)(path, init);
      expectError(r, 401, 'missing_api_key');
    }
  });

  it('accepts well-formed tokens up to 1024 characters, padding included', async () => {
    const expected = mode === 'keys' ? [401, 'invalid_api_key'] : [200, undefined];
    for (const token of ['k', 'k'.repeat(1024), `${'k'.repeat(1023)}=`, 'abc-._~+/XYZ09==', 'sk-proj-AbC_dEf.123~+/']) {
      const r = await withHeader(kiln, `Bearer ${token}`)('/v1/tasks');
      expect([r.status, r.json?.error?.code], token.slice(0, 40)).toEqual(expected);
    }
  });
});

describe('issued keys (AUTH_MODE=keys)', () => {
  let kiln: Kiln;
  let keys: KeyStore;
  beforeAll(async () => {
    kiln = await startKiln({ workers: false, env: { AUTH_MODE: 'keys' } });
    keys = new KeyStore(kiln.api.redis, kiln.config.redisPrefix);
  });
  afterAll(async () => {
    await kiln?.stop();
  });

  it('accepts an issued key and scopes its tasks to its owner', async () => {
    const alice = http(kiln.baseUrl, (await keys.create('alice')).key);
    const alice2 = http(kiln.baseUrl, (await keys.create('alice', { label: 'second' })).key);
    const bob = http(kiln.baseUrl, (await keys.create('bob')).key);
    const sub = await alice(SUBMIT, { method: 'POST', json: submitBody() });
    expect(sub.status).toBe(202);
    const id = sub.json.id;
    expect((await alice(`/v1/tasks/${id}`)).status).toBe(200);
    // Another key of the same owner sees the task; another owner does not.
    expect((await alice2(`/v1/tasks/${id}`)).status).toBe(200);
    expect((await alice2('/v1/tasks')).json.items.map((t: { id: string }) => t.id)).toEqual([id]);
    expectError(await bob(`/v1/tasks/${id}`), 404, 'not_found');
    expect((await bob('/v1/tasks')).json.items).toEqual([]);
  });

  it('answers an unknown well-formed key with 401 invalid_api_key', async () => {
    for (const key of [`kiln_sk_${randomBytes(24).toString('base64url')}`, 'test-key-owner-a-0123456789']) {
      const api = http(kiln.baseUrl, key);
      expectError(await api(SUBMIT, { method: 'POST', json: submitBody() }), 401, 'invalid_api_key');
      expectError(await api('/v1/tasks'), 401, 'invalid_api_key');
      expectError(await api('/v1/tasks/batch-get', { method: 'POST', json: { ids: ['x'] } }), 401, 'invalid_api_key');
    }
  });

  it('rejects a key revoked before its first use at once', async () => {
    const { key, record } = await keys.create('carol');
    expect((await keys.revoke(record.id))?.revoked_at).toEqual(expect.any(Number));
    expectError(await http(kiln.baseUrl, key)('/v1/tasks'), 401, 'invalid_api_key');
  });

  it('stops a revoked key once the auth cache (FRESH_MS) has passed', async () => {
    const { key, record } = await keys.create('dave');
    const api = http(kiln.baseUrl, key);
    expect((await api(SUBMIT, { method: 'POST', json: submitBody() })).status).toBe(202);
    expect(await keys.revoke(record.id)).not.toBeNull();
    // Each API process trusts what it read of a key for FRESH_MS: the key may work until then, never after.
    const r = await afterAuthCache(() => api('/v1/tasks'), Date.now());
    expectError(r, 401, 'invalid_api_key');
    expect(r.json.error.message).toMatch(/was revoked/);
    expectError(await api(SUBMIT, { method: 'POST', json: submitBody() }), 401, 'invalid_api_key');
  }, 15_000);
});
