// Managed API keys (src/keys/) on a real Kiln in keys mode: the admin API (/admin/v1/keys) and its
// limits, the secret kept nowhere, revocation, expiry and allow-list changes reaching two API
// processes once their readings of the key are FRESH_MS old (src/keys/key-auth.ts), and 403
// model_not_allowed before any workflow starts. The CLI, the Redis bootstrap and older keys:
// test/integration/keys/keys-cli.test.ts.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { FRESH_MS } from '../../../src/keys/key-auth.js';
import { SEARCH_ATTRIBUTES } from '../../../src/shared/task.js';
import { AesGcmCodec } from '../../../src/temporal/codec.js';
import { admin, afterAuthCache, OPERATOR_TOKEN, redisDump } from '../../support/keys.js';
import { eventually, http, listIds, startKiln, submitBody, waitForStatus, type Kiln } from '../../support/kiln.js';

const MODELS = [
  { id: 'img', provider: 'local', latencyMs: 20, idempotent: true },
  { id: 'img-b', provider: 'local', latencyMs: 20, idempotent: true },
  { id: 'img-direct', provider: 'local', form: 'direct', latencyMs: 20, idempotent: true },
  { id: 'vid', kind: 'video', provider: 'local', latencyMs: 30_000, pollIntervalMs: 1000, seconds: ['4'] },
  { id: 'chat', kind: 'chat', provider: 'local' },
  { id: 'chat-b', kind: 'chat', provider: 'local' },
  // Enough models for an allow-list at its limit (chat models: no worker each).
  ...Array.from({ length: 64 }, (_, i) => ({ id: `c${i}`, kind: 'chat', provider: 'local' })),
];
const KEYS = '/admin/v1/keys';

const logLines: string[] = [];
const sink = new Writable({
  write(chunk, _enc, cb) {
    logLines.push(String(chunk));
    cb();
  },
});
/** Two API processes on one Redis: `kiln` (with workers) and `other`. */
let kiln: Kiln;
let other: Kiln;
beforeAll(async () => {
  kiln = await startKiln({
    env: { AUTH_MODE: 'keys', KILN_OPERATOR_TOKEN: OPERATOR_TOKEN },
    models: MODELS,
    log: pino({ level: 'trace' }, sink),
  });
  other = await startKiln({ workers: false, env: { ...kiln.env } });
}, 120_000);
afterAll(async () => {
  await other?.stop();
  await kiln?.stop();
});

const op = () => admin(kiln.baseUrl);
async function create(body: object): Promise<any> {
  const r = await op()(KEYS, { method: 'POST', json: body });
  expect(r.status, r.text).toBe(201);
  return r.json;
}
const as = (key: string, k: Kiln = kiln) => http(k.baseUrl, key);
const submit = (key: string, model = 'img', k: Kiln = kiln) =>
  as(key, k)(`/v1beta/models/${model}:generateContent`, { method: 'POST', json: submitBody() });
const chat = (key: string, model = 'chat', k: Kiln = kiln) =>
  as(key, k)('/v1/chat/completions', {
    method: 'POST',
    json: { model, messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }] },
  });
const now = () => Math.floor(Date.now() / 1000);

describe('issuing keys', () => {
  it('answers the key once; it works at once and is kept nowhere (Redis, logs, Temporal)', async () => {
    const c = await create({ owner: 'alice', label: 'ci runner' });
    expect(Object.keys(c)).toEqual([
      ...['id', 'object', 'key', 'owner', 'label', 'hint', 'created_at'],
      ...['last_used_at', 'expires_at', 'revoked_at', 'models', 'limits'],
    ]);
    expect(c).toMatchObject({ object: 'api_key', owner: 'alice', label: 'ci runner', last_used_at: null });
    expect(c).toMatchObject({ expires_at: null, revoked_at: null, models: null, hint: c.key.slice(0, 12) });
    expect(c.key).toMatch(/^kiln_sk_[A-Za-z0-9_-]{32}$/);
    expect(c.id).toMatch(/^key_[a-f0-9]{24}$/);

    const sub = await submit(c.key);
    expect(sub.status, sub.text).toBe(202);
    await waitForStatus(() => as(c.key)(`/v1/tasks/${sub.json.id}`), 'succeeded');
    expect((await as(c.key, other)('/v1/tasks')).json.items.map((t: any) => t.id)).toEqual([sub.json.id]);

    const shown = await op()(`${KEYS}/${c.id}`);
    expect(shown.json).not.toHaveProperty('key');
    expect(shown.json.last_used_at).toBeGreaterThanOrEqual(c.created_at);
    const listed = await op()(`${KEYS}?owner=alice`);
    expect(listed.json).toEqual({ object: 'list', data: [shown.json], has_more: false });
    expect(shown.headers.get('cache-control')).toBe('no-store');

    const secret = c.key.slice('kiln_sk_'.length);
    for (const text of [shown.text, listed.text, ...(await redisDump(kiln)), logLines.join('')])
      expect(text.includes(secret)).toBe(false);
    // Temporal: keys mode forwards no credential, so not even the encrypted input holds it.
    const raw = await kiln.api.client.workflowService.getWorkflowExecutionHistory({
      namespace: 'default',
      execution: { workflowId: sub.json.id },
    });
    const [input] = await new AesGcmCodec(kiln.config.payloadKey).decode(
      raw.history!.events![0].workflowExecutionStartedEventAttributes!.input!.payloads!,
    );
    expect(Buffer.from(input.data!).toString()).toContain('"owner":"key:alice"');
    expect(JSON.stringify(raw.history).includes(secret) || Buffer.from(input.data!).includes(secret)).toBe(false);
  });

  it('refuses bad bodies with a clear message: each limit at its edge and one past it', async () => {
    const models = (n: number) => Array.from({ length: n }, (_, i) => `c${i}`);
    const ok = [
      { owner: 'o'.repeat(64) },
      { owner: 'edge', label: 'l'.repeat(128) },
      { owner: 'edge', models: models(64) },
      { owner: 'edge', expires_at: now() + 5 },
      { owner: 'edge', label: null, expires_at: null, models: null },
    ];
    for (const body of ok) await create(body);
    const bad: [object, RegExp][] = [
      [{}, /^body\.owner: /],
      [{ owner: 'o'.repeat(65) }, /^body\.owner: must be 1-64 characters/],
      [{ owner: 'a b' }, /^body\.owner: must be 1-64 characters/],
      [{ owner: 'x', label: 'l'.repeat(129) }, /^body\.label: must be at most 128 characters/],
      [{ owner: 'x', label: '' }, /^body\.label: must not be empty/],
      [{ owner: 'x', label: 'a\nb' }, /^body\.label: must not contain control characters/],
      [{ owner: 'x', models: models(65) }, /^body\.models: must name at most 64 models/],
      [{ owner: 'x', models: [] }, /^body\.models: must name at least one model/],
      [{ owner: 'x', models: ['img', 'img'] }, /^body\.models: must not name a model twice/],
      [{ owner: 'x', models: ['img', 'nope'] }, /^body\.models\[1\]: model "nope" does not exist/],
      [{ owner: 'x', expires_at: now() }, /^body\.expires_at: must be in the future/],
      [{ owner: 'x', expires_at: now() - 1 }, /^body\.expires_at: must be in the future/],
      [{ owner: 'x', expires_at: now() + 60.5 }, /^body\.expires_at: must be a whole number/],
      [{ owner: 'x', expires_at: '2030-01-01' }, /^body\.expires_at: /],
      [{ owner: 'x', name: 'old option' }, /^body: .*name/],
    ];
    for (const [body, message] of bad) {
      const r = await op()(KEYS, { method: 'POST', json: body });
      expect([r.status, r.json?.error?.code], JSON.stringify(body).slice(0, 80)).toEqual([400, 'invalid_request']);
      expect(r.json.error.message).toMatch(message);
    }
    for (const [q, status] of [
      ['limit=100', 200],
      ['limit=101', 400],
      ['limit=0', 400],
      ['after=key_nope', 400],
    ] as const)
      expect((await op()(`${KEYS}?${q}`)).status, q).toBe(status);
  });

  it('needs the operator token: an issued key is no operator', async () => {
    const { key } = await create({ owner: 'mallory' });
    for (const token of [null, key, 'wrong-token']) {
      const r = await admin(kiln.baseUrl, token)(KEYS, { method: 'POST', json: { owner: 'mallory' } });
      expect([r.status, r.json.error.code]).toEqual([401, 'missing_api_key']);
    }
  });
});

describe('list, show, update, revoke', () => {
  it('pages oldest first with a stable cursor', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await create({ owner: 'pager', label: `k${i}` })).id);
    const seen: string[] = [];
    let after = '';
    for (;;) {
      const r = await op()(`${KEYS}?owner=pager&limit=2${after && `&after=${after}`}`);
      seen.push(...r.json.data.map((k: any) => k.id));
      // A key issued while paging lands at the end, never shifts a page.
      if (seen.length === 2) ids.push((await create({ owner: 'pager' })).id);
      if (!r.json.has_more) break;
      after = seen[seen.length - 1];
    }
    expect(seen).toEqual(ids);
  });

  it('updates label, expiry and models (null clears); revoke is idempotent; unknown ids are not_found', async () => {
    const c = await create({ owner: 'bob', models: ['img'], expires_at: now() + 3600 });
    const patch = (json: object, id = c.id) => op()(`${KEYS}/${id}`, { method: 'PATCH', json });
    const set = await patch({ label: 'renamed', models: ['img', 'chat'], expires_at: now() + 7200 });
    expect(set.json).toMatchObject({ label: 'renamed', models: ['img', 'chat'] });
    const cleared = await patch({ label: null, models: null, expires_at: null });
    expect(cleared.json).toMatchObject({ id: c.id, label: null, models: null, expires_at: null, revoked_at: null });
    expect(cleared.json).not.toHaveProperty('key');
    expect((await patch({ expires_at: now() - 10 })).json.error.message).toMatch(/^body\.expires_at: .*future/);
    expect((await patch({ owner: 'eve' })).status).toBe(400);

    const first = await op()(`${KEYS}/${c.id}/revoke`, { method: 'POST' });
    expect(first.json.revoked_at).toBeGreaterThanOrEqual(c.created_at);
    await new Promise((r) => setTimeout(r, 1100));
    expect((await op()(`${KEYS}/${c.id}/revoke`, { method: 'POST' })).json).toEqual(first.json);

    const unknown = 'key_000000000000000000000000';
    for (const r of [
      await op()(`${KEYS}/${unknown}`),
      await patch({ label: 'x' }, unknown),
      await op()(`${KEYS}/${unknown}/revoke`, { method: 'POST' }),
    ])
      expect([r.status, r.json.error.code, r.json.error.message]).toEqual([
        404,
        'not_found',
        `No API key with id "${unknown}".`,
      ]);
  });
});

describe('authentication with managed keys', () => {
  it('a revoked key is refused by both API processes once FRESH_MS has passed, polls answered from memory included', async () => {
    const c = await create({ owner: 'dave' });
    const id = (await submit(c.key)).json.id;
    await waitForStatus(() => as(c.key)(`/v1/tasks/${id}`), 'succeeded');
    // Warm both processes: the finished task and the key are then answered from memory.
    for (let i = 0; i < 20; i++)
      for (const k of [kiln, other]) expect((await as(c.key, k)(`/v1/tasks/${id}`)).status).toBe(200);
    expect((await op()(`${KEYS}/${c.id}/revoke`, { method: 'POST' })).status).toBe(200);
    const revokedAt = Date.now();
    const answers = await Promise.all(
      [kiln, other].map((k) => afterAuthCache(() => as(c.key, k)(`/v1/tasks/${id}`), revokedAt)),
    );
    for (const r of answers)
      expect([r.status, r.json.error.code, r.json.error.message]).toEqual([
        401,
        'invalid_api_key',
        'The API key was revoked.',
      ]);
  });

  it('an expired key is refused from its expiry on ("…expired"), polls answered from memory included', async () => {
    // An hour left when the key is first used, so that check cannot race the expiry; then a near
    // expiry, which every process holds once FRESH_MS has passed since the update.
    const c = await create({ owner: 'erin', expires_at: now() + 3600 });
    for (const k of [kiln, other]) expect((await as(c.key, k)('/v1/tasks')).status).toBe(200);
    const expiresAt = now() + 2;
    const set = await op()(`${KEYS}/${c.id}`, { method: 'PATCH', json: { expires_at: expiresAt } });
    expect(set.json.expires_at, set.text).toBe(expiresAt);
    const since = Math.max(Date.now(), expiresAt * 1000 - FRESH_MS);
    const answers = await Promise.all([kiln, other].map((k) => afterAuthCache(() => as(c.key, k)('/v1/tasks'), since)));
    for (const r of answers) {
      expect([r.status, r.json.error.code]).toEqual([401, 'invalid_api_key']);
      expect(r.json.error.message).toMatch(/^The API key expired at \d{4}-/);
    }
  });

  it('a new allow-list reaches both API processes once FRESH_MS has passed', async () => {
    const c = await create({ owner: 'frank' });
    for (const k of [kiln, other]) expect((await chat(c.key, 'chat-b', k)).status).toBe(200);
    expect((await op()(`${KEYS}/${c.id}`, { method: 'PATCH', json: { models: ['chat'] } })).status).toBe(200);
    const patchedAt = Date.now();
    const answers = await Promise.all(
      [kiln, other].map((k) => afterAuthCache(() => chat(c.key, 'chat-b', k), patchedAt)),
    );
    for (const r of answers) expect([r.status, r.json.error.code]).toEqual([403, 'model_not_allowed']);
    for (const k of [kiln, other]) expect((await chat(c.key, 'chat', k)).status).toBe(200);
  });
});

describe('model allow-list', () => {
  it('403 model_not_allowed on the image, direct, video and chat routes, before any workflow starts', async () => {
    const c = await create({ owner: 'restricted', models: ['img', 'chat'] });
    const refused = [
      await submit(c.key, 'img-b'),
      await submit(c.key, 'img-direct'),
      await as(c.key)('/v1/videos', { method: 'POST', json: { model: 'vid', prompt: 'p' } }),
      await chat(c.key, 'chat-b'),
    ];
    for (const r of refused) {
      expect([r.status, r.json.error.code], r.text).toEqual([403, 'model_not_allowed']);
      expect(r.json.error.message).toMatch(/may not use model ".+"; it may use: img, chat\.$/);
    }
    expect((await submit(c.key, 'no-such-model')).json.error.code).toBe('model_not_found');
    const ok = await submit(c.key, 'img');
    expect(ok.status).toBe(202);
    expect((await chat(c.key, 'chat')).status).toBe(200);
    expect((await as(c.key)('/v1/models')).json.data.map((m: any) => m.id)).toEqual(['img', 'chat']);
    // Temporal has the allowed task's workflow only (visibility trails: wait for it to show).
    const listed = () => listIds(kiln.api.client, `${SEARCH_ATTRIBUTES.owner} = 'key:restricted'`);
    expect(await eventually(listed, (ids) => ids.length > 0, 30_000)).toEqual([ok.json.id]);
    const doc = (await http(kiln.baseUrl)('/openapi.json')).json;
    for (const path of ['/v1/videos', '/v1/chat/completions', '/v1beta/models/{model}:generateContent'])
      expect(doc.paths[path].post.responses['403'].description).toContain('model_not_allowed');
  });
});
