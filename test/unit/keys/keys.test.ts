// Managed keys' pure parts (src/keys/record.ts, allowed.ts, the CLI's option parsers) and the
// authenticator's cache timing, on an in-memory store and a fake clock.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { expiresAt, keyLine, modelList } from '../../../src/cli/admin-keys.js';
import { FRESH_MS, IssuedKeyAuth } from '../../../src/keys/key-auth.js';
import { allowedModels, assertModelAllowed } from '../../../src/keys/allowed.js';
import {
  byCreation,
  keyState,
  keyView,
  legacyId,
  newKey,
  pageAfter,
  patched,
  readRecord,
  recordJson,
  sha256,
  type KeyRecord,
} from '../../../src/keys/record.js';
import type { KeyStore } from '../../../src/keys/store.js';

const record = (over: Partial<KeyRecord> = {}): KeyRecord => ({
  id: 'key_a',
  owner: 'alice',
  label: null,
  hint: 'kiln_sk_abcd',
  created_at: 100,
  expires_at: null,
  revoked_at: null,
  models: null,
  ...over,
});

describe('records', () => {
  it('issues 192-bit keys with ids that sort in issue order', () => {
    const a = newKey(1_000);
    const b = newKey(1_001);
    expect(a.secret).toMatch(/^kiln_sk_[A-Za-z0-9_-]{32}$/);
    expect(a.id).toMatch(/^key_[a-f0-9]{24}$/);
    expect(a.id < b.id).toBe(true);
  });

  it('reads a record written before managed keys as an active, unrestricted key', () => {
    const hash = sha256('kiln_sk_x');
    const legacy = JSON.stringify({ owner: 'bob', name: 'ci', created_at: 5, hint: 'kiln_sk_x' });
    expect(readRecord(hash, legacy)).toEqual(
      record({ id: legacyId(hash), owner: 'bob', label: 'ci', created_at: 5, hint: 'kiln_sk_x' }),
    );
    expect(readRecord(hash, recordJson(record()))).toEqual(record());
    expect(readRecord(hash, 'not json')).toBeUndefined();
    expect(readRecord(hash, '{"name":"no owner"}')).toBeUndefined();
  });

  it('tells active, revoked and expired keys apart, expiry to the second', () => {
    expect(keyState(record(), 0)).toBe('active');
    expect(keyState(record({ expires_at: 10 }), 9_999)).toBe('active');
    expect(keyState(record({ expires_at: 10 }), 10_000)).toBe('expired');
    expect(keyState(record({ expires_at: 10, revoked_at: 3 }), 0)).toBe('revoked');
  });

  it('pages after a cursor, whether or not the cursor passes the filter', () => {
    const keys = [1, 2, 3, 4, 5].map((i) => record({ id: `key_${i}`, created_at: 100 + (i >> 1) }));
    const sorted = [...keys].reverse().sort(byCreation);
    expect(sorted.map((k) => k.id)).toEqual(keys.map((k) => k.id));
    expect(pageAfter(sorted, undefined, 2)).toEqual({ page: keys.slice(0, 2), hasMore: true });
    expect(pageAfter(sorted, keys[3], 2)).toEqual({ page: [keys[4]], hasMore: false });
    expect(pageAfter([keys[0], keys[4]], keys[2], 2)).toEqual({ page: [keys[4]], hasMore: false });
    expect(pageAfter(sorted, keys[4], 2)).toEqual({ page: [], hasMore: false });
  });

  it('patches only what is sent; null clears', () => {
    const r = record({ label: 'x', models: ['a'], expires_at: 9 });
    expect(patched(r, {})).toEqual(r);
    expect(patched(r, { label: null, models: null })).toEqual({ ...r, label: null, models: null });
    expect(patched(r, { expires_at: 20 })).toEqual({ ...r, expires_at: 20 });
  });
});

describe('allow-lists', () => {
  it('lets an unrestricted caller use anything and a restricted one only its list', () => {
    expect(() => assertModelAllowed({ owner: 'o' }, 'm')).not.toThrow();
    expect(() => assertModelAllowed({ owner: 'o', models: ['a'] }, 'a')).not.toThrow();
    expect(() => assertModelAllowed({ owner: 'o', models: ['a', 'b'] }, 'c')).toThrow(
      expect.objectContaining({ code: 'model_not_allowed', status: 403 }),
    );
    const models = [{ id: 'a' }, { id: 'b' }];
    expect(allowedModels({ owner: 'o', models: ['b'] }, models)).toEqual([{ id: 'b' }]);
    expect(allowedModels({ owner: 'o' }, models)).toBe(models);
  });
});

describe('kiln admin keys options', () => {
  it('reads --expires-at as epoch seconds or an ISO date, and --models as a list', () => {
    expect(expiresAt('1900000000')).toBe(1_900_000_000);
    expect(expiresAt('2030-01-01T00:00:00Z')).toBe(1_893_456_000);
    expect(expiresAt('2030-01-01T00:00:00.5Z')).toBe(1_893_456_001);
    for (const bad of ['tomorrow', '', '12/31/2030', '2030-13-45'])
      expect(() => expiresAt(bad)).toThrow(/--expires-at/);
    expect(modelList(' a, b ,,c')).toEqual(['a', 'b', 'c']);
    expect(() => modelList(' , ')).toThrow(/--models/);
    const line = keyLine({ ...keyView(record({ models: ['a', 'b'] }), null), label: 'ci' });
    expect(line).toBe(
      'key_a  kiln_sk_abcd…  active  owner=alice  label=ci  models=a,b  created=1970-01-01T00:01:40Z  ' +
        'last_used=-  expires=-',
    );
  });
});

describe('IssuedKeyAuth', () => {
  afterEach(() => vi.useRealTimers());

  /** A store of one key in memory, counting reads and last-use writes. */
  function setup(r: KeyRecord) {
    const secret = 'kiln_sk_unit';
    const stored = { record: r };
    const counts = { reads: 0, touches: [] as number[] };
    const store = {
      lookup: async (hash: string) => {
        counts.reads++;
        return hash === sha256(secret) ? { record: stored.record, lastUsedAt: null } : null;
      },
      touch: async (_hash: string, at: number) => void counts.touches.push(at),
    } as unknown as KeyStore;
    return { auth: new IssuedKeyAuth(store), header: `Bearer ${secret}`, stored, counts };
  }

  it('answers from memory while fresh, re-reads in the background, and refuses a revoke within FRESH_MS', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const { auth, header, stored, counts } = setup(record({ models: ['a'] }));
    expect(auth.known(header)).toBeUndefined();
    expect(await auth.authenticate(header)).toEqual({ owner: 'key:alice', keyId: 'key_a', models: ['a'] });
    expect(auth.known(header)).toEqual({ owner: 'key:alice', keyId: 'key_a', models: ['a'] });
    expect(counts.reads).toBe(1);
    // Past half its freshness, a hit still answers from memory and starts a re-read.
    stored.record = { ...stored.record, revoked_at: 1 };
    vi.advanceTimersByTime(FRESH_MS / 2);
    expect(auth.known(header)).toBeDefined();
    await new Promise((r) => setImmediate(r));
    expect(counts.reads).toBe(2);
    expect(auth.known(header)).toBeUndefined();
    await expect(auth.authenticate(header)).rejects.toMatchObject({
      code: 'invalid_api_key',
      message: 'The API key was revoked.',
    });
    // Last use: written once for the first request, then not again within the minute.
    expect(counts.touches).toHaveLength(1);
  });

  it('stops trusting a reading after FRESH_MS even without traffic, and refuses an expired key at once', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: 1_000_000 });
    const { auth, header, stored } = setup(record({ expires_at: 1_001 }));
    await auth.authenticate(header);
    stored.record = { ...stored.record, models: ['b'] };
    vi.advanceTimersByTime(FRESH_MS);
    expect(auth.known(header)).toBeUndefined();
    expect((await auth.authenticate(header)).models).toEqual(['b']);
    vi.setSystemTime(1_001_000);
    expect(auth.known(header)).toBeUndefined();
    await expect(auth.authenticate(header)).rejects.toMatchObject({ message: /^The API key expired at 1970-/ });
    await expect(auth.authenticate('Bearer kiln_sk_other')).rejects.toMatchObject({
      code: 'invalid_api_key',
      message: 'The API key is not known.',
    });
  });
});
