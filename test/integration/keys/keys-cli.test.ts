// Managed API keys from the command line, on a real Kiln in keys mode: `kiln admin keys …` over
// HTTP with the operator token, the `npm run keys` bootstrap straight over Redis, keys issued before
// managed keys, the key routes in passthrough mode, and the store on a Redis Cluster. The admin
// API itself: test/integration/keys/keys-admin.test.ts.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePorts } from '../../../scripts/production/proc.js';
import { startRedisCluster } from '../../../scripts/production/redis-cluster.js';
import { legacyId, sha256 } from '../../../src/keys/record.js';
import { admin, afterAuthCache, OPERATOR_TOKEN, runCli } from '../../support/keys.js';
import { http, startKiln, submitBody, type Kiln } from '../../support/kiln.js';

const KEYS = '/admin/v1/keys';

let kiln: Kiln;
beforeAll(async () => {
  kiln = await startKiln({
    workers: false,
    env: { AUTH_MODE: 'keys', KILN_OPERATOR_TOKEN: OPERATOR_TOKEN },
    models: [
      { id: 'img', provider: 'local', idempotent: true },
      { id: 'chat', kind: 'chat', provider: 'local' },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
});

const op = () => admin(kiln.baseUrl);
const as = (key: string) => http(kiln.baseUrl, key);
const submit = (key: string) => as(key)('/v1beta/models/img:generateContent', { method: 'POST', json: submitBody() });

describe('the CLI', () => {
  const env = () => ({ KILN_BASE_URL: kiln.baseUrl, KILN_OPERATOR_TOKEN: OPERATOR_TOKEN });
  const cli = (...args: string[]) => runCli(['admin', 'keys', ...args], env());

  it('kiln admin keys create | list | show | update | revoke, over HTTP with the operator token', async () => {
    const expiry = new Date(Date.now() + 86_400_000).toISOString();
    const made = await cli(
      'create',
      '--owner',
      'cli',
      '--label',
      'from cli',
      '--models',
      'img,chat',
      '--expires-at',
      expiry,
      '--json',
    );
    expect(made.code, made.stderr).toBe(0);
    expect(made.json).toMatchObject({ owner: 'cli', label: 'from cli', models: ['img', 'chat'] });
    expect(made.json.expires_at).toBe(Math.ceil(Date.parse(expiry) / 1000));
    expect((await submit(made.json.key)).status).toBe(202);
    const text = await cli('create', '--owner', 'cli');
    expect(text.stdout.trim()).toMatch(/^kiln_sk_\S{32}$/);
    expect(text.stderr).toContain('Shown once');

    const listed = await cli('list', '--owner', 'cli', '--json');
    expect(listed.json.map((k: any) => k.id)).toEqual([made.json.id, expect.stringMatching(/^key_/)]);
    expect(listed.stdout).not.toContain(made.json.key);
    const shown = await cli('show', made.json.id);
    expect(shown.stdout).toContain(
      `${made.json.id}  ${made.json.hint}…  active  owner=cli  label=from cli  models=img,chat`,
    );

    const updated = await cli('update', made.json.id, '--all-models', '--no-expiry', '--no-label', '--json');
    expect(updated.json).toMatchObject({ models: null, expires_at: null, label: null });
    expect((await cli('update', made.json.id)).code).toBe(2);
    expect((await cli('update', made.json.id, '--models', 'img', '--all-models')).code).toBe(2);
    const past = await cli('update', made.json.id, '--expires-at', '2001-01-01T00:00:00Z');
    expect([past.code, past.stderr]).toEqual([1, expect.stringContaining('must be in the future')]);

    const revoked = await cli('revoke', made.json.id, '--json');
    const revokedAt = Date.now();
    expect(revoked.json.revoked_at).toEqual(expect.any(Number));
    expect((await cli('show', made.json.id)).stdout).toContain('  revoked  ');
    expect((await afterAuthCache(() => as(made.json.key)('/v1/tasks'), revokedAt)).status).toBe(401);
    const missing = await cli('show', 'key_000000000000000000000000');
    expect([missing.code, missing.stderr]).toEqual([1, expect.stringContaining('No API key with id')]);
    expect(
      (await runCli(['admin', 'keys', 'list'], { KILN_BASE_URL: kiln.baseUrl, KILN_OPERATOR_TOKEN: '' })).code,
    ).toBe(2);
  });

  it('npm run keys (kiln keys) still bootstraps keys straight over Redis', async () => {
    const boot = await runCli(['keys', 'create', '--owner', 'boot', '--label', 'first', '--json'], kiln.env);
    expect(boot.code, boot.stderr).toBe(0);
    expect((await as(boot.json.key)('/v1/tasks')).status).toBe(200);
    expect((await op()(`${KEYS}/${boot.json.id}`)).json).toMatchObject({ owner: 'boot', label: 'first' });
    const listed = await runCli(['keys', 'list', '--json'], kiln.env);
    expect(listed.json.map((k: any) => k.id)).toContain(boot.json.id);
    const revoked = await runCli(['keys', 'revoke', boot.json.key], kiln.env);
    const revokedAt = Date.now();
    expect(revoked.stdout.trim()).toBe(`revoked ${boot.json.id}`);
    expect((await afterAuthCache(() => as(boot.json.key)('/v1/tasks'), revokedAt)).status).toBe(401);
  });
});

describe('keys issued before managed keys', () => {
  it('keep working, list with an id derived from their hash, and can be revoked by it', async () => {
    // As `npm run keys` wrote them: the record under the key's SHA-256, no id.
    const key = 'kiln_sk_legacyLegacyLegacyLegacyLegacy0123';
    const hash = sha256(key);
    const legacy = { owner: 'old', name: 'default', created_at: 1_700_000_000, hint: key.slice(0, 12) };
    await kiln.api.redis.hset(`${kiln.config.redisPrefix}apikeys`, hash, JSON.stringify(legacy));
    expect((await as(key)('/v1/tasks')).status).toBe(200);
    const listed = (await op()(`${KEYS}?owner=old`)).json.data;
    expect(listed).toEqual([
      expect.objectContaining({ id: legacyId(hash), owner: 'old', label: 'default', revoked_at: null, models: null }),
    ]);
    const revoked = await op()(`${KEYS}/${legacyId(hash)}/revoke`, { method: 'POST' });
    const revokedAt = Date.now();
    expect(revoked.json.revoked_at).toEqual(expect.any(Number));
    expect((await afterAuthCache(() => as(key)('/v1/tasks'), revokedAt)).status).toBe(401);
  });
});

describe('passthrough mode', () => {
  it('answers the key routes with not_found: keys mode is off', async () => {
    const pass = await startKiln({ workers: false, env: { KILN_OPERATOR_TOKEN: OPERATOR_TOKEN } });
    try {
      const r = await admin(pass.baseUrl)(KEYS, { method: 'POST', json: { owner: 'x' } });
      expect([r.status, r.json.error.code]).toEqual([404, 'not_found']);
      expect(r.json.error.message).toMatch(/only in keys mode.*AUTH_MODE=keys/);
    } finally {
      await pass.stop();
    }
  });
});

describe('on a Redis Cluster', () => {
  it('issues, restricts, lists and revokes keys: every command names the one hash', async () => {
    const ports = await freePorts(6);
    const cluster = await startRedisCluster({
      dir: join(inject('tmpRoot'), `keys-cluster-${randomBytes(3).toString('hex')}`),
      ports: ports.slice(0, 3),
      busPorts: ports.slice(3),
      replicas: 0,
      fresh: true,
    });
    const k = await startKiln({
      workers: false,
      env: { AUTH_MODE: 'keys', KILN_OPERATOR_TOKEN: OPERATOR_TOKEN, REDIS_CLUSTER_NODES: cluster.nodeList },
      models: [{ id: 'img', provider: 'local', idempotent: true }],
    });
    try {
      const api = admin(k.baseUrl);
      const made = await api(KEYS, { method: 'POST', json: { owner: 'clustered', models: ['img'] } });
      expect(made.status, made.text).toBe(201);
      expect((await http(k.baseUrl, made.json.key)('/v1/models')).json.data.map((m: any) => m.id)).toEqual(['img']);
      const patched = await api(`${KEYS}/${made.json.id}`, { method: 'PATCH', json: { label: 'on a cluster' } });
      expect(patched.json).toMatchObject({ label: 'on a cluster', models: ['img'] });
      expect((await api(`${KEYS}?owner=clustered`)).json.data).toEqual([patched.json]);
      await api(`${KEYS}/${made.json.id}/revoke`, { method: 'POST' });
      const revokedAt = Date.now();
      expect((await afterAuthCache(() => http(k.baseUrl, made.json.key)('/v1/tasks'), revokedAt)).status).toBe(401);
    } finally {
      await k.stop();
      await cluster.stop();
    }
  }, 120_000);
});
