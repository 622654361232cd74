// Limits, reservations and settlement (src/usage/) on a real Kiln in keys mode, real Redis and
// Temporal: concurrent submits never take more than a quota, each limit answers 429 with its code
// and Retry-After before any workflow starts, a resent Idempotency-Key never counts twice, and each
// terminal state settles as documented (charged, released, held until an operator releases it).
// The sweep after a killed API process, and Redis Cluster: quota-sweep.test.ts and quota-store.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyStore } from '../../../src/keys/store.js';
import { createQuota } from '../../../src/usage/settlement.js';
import { dayOf } from '../../../src/usage/store.js';
import type { Limits } from '../../../src/config/limits.js';
import { drop, fail, fakeGeminiModel, startFakeGemini, type FakeGemini } from '../providers/gemini/fake-gemini.js';
import { closedPortUrl } from '../../support/fake-server.js';
import { OPERATOR_TOKEN } from '../../support/keys.js';
import { http, listIds, startKiln, submitBody, waitForStatus, TERMINAL, type Kiln } from '../../support/kiln.js';

let kiln: Kiln;
let fake: FakeGemini;
let keys: KeyStore;
let quota: ReturnType<typeof createQuota>;

beforeAll(async () => {
  fake = await startFakeGemini();
  const down = await closedPortUrl();
  const gem = (over: Record<string, unknown>) => ({
    kind: 'image',
    ...fakeGeminiModel(fake, { maxAttempts: 1, credential: 'none', ...over }),
  });
  kiln = await startKiln({
    env: { AUTH_MODE: 'keys', KILN_OPERATOR_TOKEN: OPERATOR_TOKEN, RECONCILE_EVERY_MS: '1000' },
    models: [
      { id: 'img', provider: 'local', latencyMs: 20 },
      { id: 'img3', provider: 'local', latencyMs: 20, units: 3 },
      { id: 'slow', provider: 'local', latencyMs: 3000 },
      {
        id: 'vid',
        kind: 'video',
        provider: 'local',
        latencyMs: 50,
        pollIntervalMs: 100,
        seconds: ['4'],
        units: 0,
        unitsPerSecond: 2,
      },
      { id: 'gem', ...gem({}) },
      { id: 'gem-charged', ...gem({ chargeFailed: true }) },
      // queueTimeoutMs 0: the refused connection ends the task at once instead of waiting to send again.
      { id: 'down', ...gem({ baseUrl: down, queueTimeoutMs: 0 }) },
    ],
  });
  keys = new KeyStore(kiln.api.redis, kiln.config.redisPrefix);
  quota = createQuota(kiln.config, kiln.api.redis);
}, 120_000);
afterAll(async () => {
  await kiln?.stop();
  await fake?.close();
});

let owners = 0;
/** A key of a new owner, with the owner's and the key's own limits. */
async function newKey(own: Partial<Limits> = {}, key: Partial<Limits> = {}) {
  const owner = `quota-${++owners}-${Date.now()}`;
  if (Object.keys(own).length) await quota.setOwnerLimits(`key:${owner}`, own);
  const k = await keys.create(owner, { limits: key });
  return { key: k.key, keyId: k.record.id, owner: `key:${owner}` };
}
const submit = (key: string, model = 'img', headers: Record<string, string> = {}) =>
  http(kiln.baseUrl, key)(`/v1beta/models/${model}:generateContent`, { method: 'POST', json: submitBody(), headers });
const finish = (key: string, id: string) => waitForStatus(() => http(kiln.baseUrl, key)(`/v1/tasks/${id}`), TERMINAL);
const workflowsOf = (owner: string) => listIds(kiln.api.client, `KilnOwner = '${owner}'`);
async function ledger(owner: string) {
  const day = (await quota.usage(owner, [dayOf(Date.now())])).get(dayOf(Date.now()));
  return Object.fromEntries([...(day ?? new Map())].map(([m, c]) => [m, c]));
}

describe('admission', () => {
  it('50 concurrent submits against a daily quota of 10 units: exactly 10 accepted, 10 workflows', async () => {
    const k = await newKey({ daily_units: 10 });
    const answers = await Promise.all(Array.from({ length: 50 }, () => submit(k.key)));
    const accepted = answers.filter((a) => a.status === 202);
    const refused = answers.filter((a) => a.status !== 202);
    expect(accepted).toHaveLength(10);
    expect(new Set(refused.map((r) => `${r.status} ${r.json?.error?.code}`))).toEqual(new Set(['429 quota_exceeded']));
    // Retry-After: the seconds to the next UTC midnight.
    const midnight = Math.ceil(
      (Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate() + 1) - Date.now()) /
        1000,
    );
    const retry = Number(refused[0].headers.get('retry-after'));
    expect(Math.abs(retry - midnight)).toBeLessThanOrEqual(5);
    expect(refused[0].json.error.message).toMatch(/daily quota of units \(daily_units\)/);
    await Promise.all(accepted.map((a) => finish(k.key, a.json.id)));
    await expect.poll(() => workflowsOf(k.owner).then((ids) => ids.length), { timeout: 15_000 }).toBe(10);
    expect(await quota.standing(k.owner)).toMatchObject({ max_unfinished: 0, daily_units: 10 });
    expect((await ledger(k.owner)).img).toMatchObject({ submitted: 10, succeeded: 10, units: 10 });
    // Operators see refusals by code; owner ids never become labels.
    const metrics = await (await fetch(`${kiln.baseUrl}/metrics`)).text();
    const line = metrics.split('\n').find((l) => l.startsWith('kiln_limit_refusals_total{'));
    expect(line).toMatch(/route="\/v1beta\/models\/:modelAction",code="quota_exceeded"\} (\d+)/);
    expect(Number(line!.split(' ').pop())).toBeGreaterThanOrEqual(40);
    expect(metrics).not.toContain(k.owner.slice(4));
  });

  it('a quota at the edge: a task of 3 units fits 9 of 10 used? no; 3 of 3 left? yes', async () => {
    const k = await newKey({ daily_units: 7 });
    expect((await submit(k.key, 'img3')).status).toBe(202);
    expect((await submit(k.key, 'img3')).status).toBe(202);
    // 6 used: a 3-unit task would make 9 > 7; a 1-unit task makes exactly 7.
    expect((await submit(k.key, 'img3')).json.error.code).toBe('quota_exceeded');
    expect((await submit(k.key, 'img')).status).toBe(202);
    expect((await submit(k.key, 'img')).json.error.code).toBe('quota_exceeded');
  });

  it("a key's own limits count over that key alone; the owner's over all its keys", async () => {
    const a = await newKey({ monthly_units: 3 }, { monthly_units: 1 });
    const b = await keys.create(a.owner.slice(4), {});
    expect((await submit(a.key)).status).toBe(202);
    const r = await submit(a.key);
    expect([r.status, r.json.error.code]).toEqual([429, 'quota_exceeded']);
    expect(r.json.error.message).toMatch(/^This API key's monthly quota/);
    expect((await submit(b.key)).status).toBe(202);
    expect((await submit(b.key)).status).toBe(202);
    const o = await submit(b.key);
    expect([o.status, o.json.error.code]).toEqual([429, 'quota_exceeded']);
    expect(o.json.error.message).toMatch(/^Your account's monthly quota/);
  });

  it('max_unfinished: the next submit is refused while the tasks run, accepted once one ends', async () => {
    const k = await newKey({}, { max_unfinished: 2 });
    const ids = [(await submit(k.key, 'slow')).json.id, (await submit(k.key, 'slow')).json.id];
    const r = await submit(k.key, 'slow');
    expect([r.status, r.json.error.code]).toEqual([429, 'concurrency_limit_exceeded']);
    expect(Number(r.headers.get('retry-after'))).toBe(kiln.config.pollAfterSeconds);
    await finish(k.key, ids[0]);
    expect((await submit(k.key, 'slow')).status).toBe(202);
  });

  it('submits_per_minute: exactly N in a minute, then 429 rate_limited with Retry-After ≤ 60', async () => {
    const k = await newKey({ submits_per_minute: 3 });
    for (let i = 0; i < 3; i++) expect((await submit(k.key)).status).toBe(202);
    const r = await submit(k.key);
    expect([r.status, r.json.error.code]).toEqual([429, 'rate_limited']);
    const retry = Number(r.headers.get('retry-after'));
    expect(retry).toBeGreaterThanOrEqual(55);
    expect(retry).toBeLessThanOrEqual(60);
  });

  it('a limit of 0 refuses every submit; no workflow starts for a refused one', async () => {
    const k = await newKey({ max_unfinished: 0 });
    expect((await submit(k.key)).json.error.code).toBe('concurrency_limit_exceeded');
    const v = await http(kiln.baseUrl, k.key)('/v1/videos', { method: 'POST', json: { model: 'vid', prompt: 'x' } });
    expect([v.status, v.json.error.code]).toEqual([429, 'concurrency_limit_exceeded']);
    expect(await workflowsOf(k.owner)).toEqual([]);
    expect(await quota.reservations(k.owner)).toEqual([]);
  });

  it('an Idempotency-Key sent again never counts twice, even at the quota', async () => {
    const k = await newKey({ daily_units: 2 });
    const first = await submit(k.key, 'img', { 'idempotency-key': 'same-1' });
    expect(first.status).toBe(202);
    const again = await Promise.all(
      Array.from({ length: 5 }, () => submit(k.key, 'img', { 'idempotency-key': 'same-1' })),
    );
    for (const a of again) {
      expect([200, 202]).toContain(a.status);
      expect(a.json.id).toBe(first.json.id);
    }
    expect((await submit(k.key)).status).toBe(202);
    expect((await submit(k.key)).json.error.code).toBe('quota_exceeded');
    // The first key's task finished: its replay is still answered, and counts nothing.
    await finish(k.key, first.json.id);
    const late = await submit(k.key, 'img', { 'idempotency-key': 'same-1' });
    expect([late.status, late.json.id]).toEqual([202, first.json.id]);
    expect((await quota.standing(k.owner)).daily_units).toBe(2);
    expect((await ledger(k.owner)).img.submitted).toBe(2);
  });

  it('video units: per second of video', async () => {
    const k = await newKey({ daily_units: 8 });
    const v = await http(kiln.baseUrl, k.key)('/v1/videos', {
      method: 'POST',
      json: { model: 'vid', prompt: 'x', seconds: '4' },
    });
    expect(v.status, v.text).toBe(200);
    expect((await quota.standing(k.owner)).daily_units).toBe(8);
    const again = await http(kiln.baseUrl, k.key)('/v1/videos', {
      method: 'POST',
      json: { model: 'vid', prompt: 'y' },
    });
    expect(again.json.error.code).toBe('quota_exceeded');
    await waitForStatus(() => http(kiln.baseUrl, k.key)(`/v1/videos/${v.json.id}`), 'completed');
    await expect.poll(async () => (await ledger(k.owner)).vid?.units).toBe(8);
  });
});

describe('settlement', () => {
  it('failed before anything was sent (upstream unreachable): released, counted failed', async () => {
    const k = await newKey({ daily_units: 1 });
    const id = (await submit(k.key, 'down')).json.id;
    expect((await finish(k.key, id)).status).toBe('failed');
    await expect.poll(() => quota.standing(k.owner)).toMatchObject({ daily_units: 0, max_unfinished: 0 });
    expect((await ledger(k.owner)).down).toMatchObject({ submitted: 1, failed: 1, units: 0 });
    expect((await submit(k.key)).status).toBe(202);
  });

  it('failed after it was sent: released, unless the model says chargeFailed', async () => {
    const k = await newKey({ daily_units: 5 });
    fake.enqueue(fail(500, 'boom'), fail(500, 'boom'));
    const a = (await submit(k.key, 'gem')).json.id;
    expect((await finish(k.key, a)).status).toBe('failed');
    const b = (await submit(k.key, 'gem-charged')).json.id;
    expect((await finish(k.key, b)).status).toBe('failed');
    await expect.poll(() => quota.standing(k.owner)).toMatchObject({ daily_units: 1, max_unfinished: 0 });
    const l = await ledger(k.owner);
    expect(l.gem).toMatchObject({ failed: 1, units: 0 });
    expect(l['gem-charged']).toMatchObject({ failed: 1, units: 1 });
  });

  it('canceled before it was sent: released, counted canceled', async () => {
    const k = await newKey({ daily_units: 1 }, { max_unfinished: 5 });
    const id = (await submit(k.key, 'slow')).json.id;
    const c = await http(kiln.baseUrl, k.key)(`/v1/tasks/${id}/cancel`, { method: 'POST' });
    expect([200, 202]).toContain(c.status);
    const end = await finish(k.key, id);
    expect(end.error.code).toBe('canceled');
    await expect.poll(async () => (await ledger(k.owner)).slow?.canceled).toBe(1);
    // The local provider marks its call sent: a cancel after that is released all the same (no chargeFailed).
    expect((await quota.standing(k.owner)).daily_units).toBe(0);
  });

  it('uncertain (answer lost, non-idempotent): held, then released by the operator', async () => {
    const k = await newKey({ daily_units: 1 });
    fake.enqueue(drop());
    const id = (await submit(k.key, 'gem')).json.id;
    expect((await finish(k.key, id)).status).toBe('uncertain');
    await expect.poll(async () => (await quota.reservations(k.owner)).map((r) => [r.id, r.held])).toEqual([[id, true]]);
    expect(await quota.standing(k.owner)).toMatchObject({ daily_units: 1, max_unfinished: 0 });
    expect((await submit(k.key)).json.error.code).toBe('quota_exceeded');
    expect((await ledger(k.owner)).gem).toMatchObject({ uncertain: 1, units: 1 });

    expect(await quota.release(k.owner, id)).toBe('released');
    expect(await quota.release(k.owner, id)).toBe('not_found');
    expect((await quota.standing(k.owner)).daily_units).toBe(0);
    expect((await ledger(k.owner)).gem).toMatchObject({ uncertain: 1, released: 1, units: 0 });
    expect((await submit(k.key)).status).toBe(202);
  });

  it('a successful task keeps its history as short as before (settlement adds no event)', async () => {
    const k = await newKey({ daily_units: 5 });
    const id = (await submit(k.key)).json.id;
    await finish(k.key, id);
    const history = await kiln.api.client.workflow.getHandle(id).fetchHistory();
    expect(history.events?.length).toBeLessThanOrEqual(11);
    expect((await ledger(k.owner)).img).toMatchObject({ succeeded: 1, units: 1 });
  });
});
