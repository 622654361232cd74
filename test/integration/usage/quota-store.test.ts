// The quota store (src/usage/store.ts) on a real redis-server and on a real Redis Cluster
// (3 primaries + 3 replicas): concurrent admissions never exceed a quota, settlement is exact and
// idempotent, a day boundary splits the ledger and the day quota, and the sweep's reads work.
import { randomBytes } from 'node:crypto';
import { BACKENDS, type Backend } from '../../support/redis-backends.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NO_LIMITS, type Limits } from '../../../src/config/limits.js';
import { dayOf, QuotaStore, type Admission } from '../../../src/usage/store.js';

describe.each(BACKENDS('quota'))('quota store on %s', (_name, start) => {
  let backend: Backend;
  let prefix: string;
  let seq = 0;
  const stores = (defaults: Limits = NO_LIMITS) =>
    backend.clients.map((c) => new QuotaStore(c, prefix, defaults)) as [QuotaStore, QuotaStore];
  const owner = () => `owner-${++seq}-${randomBytes(2).toString('hex')}`;
  const task = (o: string, over: Partial<Admission> = {}): Admission => ({
    owner: o,
    id: `task_${randomBytes(8).toString('hex')}`,
    model: 'm',
    units: 1,
    chargeFailed: false,
    ...over,
  });

  beforeAll(async () => {
    backend = await start();
    prefix = `qs${randomBytes(3).toString('hex')}:`;
  }, 120_000);
  afterAll(() => backend?.stop());

  it('50 concurrent admissions from two connections against 10 units: exactly 10 admitted', async () => {
    const [a, b] = stores({ ...NO_LIMITS, daily_units: 10 });
    const o = owner();
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => (i % 2 ? a : b).admit(task(o))));
    expect(results.filter((r) => r.admitted)).toHaveLength(10);
    expect(results.filter((r) => !r.admitted && r.code === 'quota_exceeded')).toHaveLength(40);
    expect(await a.standing(o)).toMatchObject({ daily_units: 10, monthly_units: 10, max_unfinished: 10 });
    expect(await a.owners()).toContain(o);
  });

  it('runs its scripts by SHA, and again after Redis forgot them (SCRIPT FLUSH, as after a restart)', async () => {
    const [q] = stores();
    const o = owner();
    const [a, b] = [task(o), task(o)];
    expect(await q.admit(a)).toEqual({ admitted: true, fresh: true });
    const client = backend.clients[0];
    const nodes = () => ('nodes' in client ? client.nodes('master') : [client]);
    const flushAll = () => Promise.all(nodes().map((n) => n.script('FLUSH')));
    // EVAL calls over every primary: a script sent as text each time would add one per call.
    const evals = async () => {
      const infos = await Promise.all(nodes().map((n) => n.info('commandstats')));
      return infos.reduce((sum, i) => sum + Number(/cmdstat_eval:calls=(\d+)/.exec(i)?.[1] ?? 0), 0);
    };
    // Each script's first call on a Redis that lacks it is one EVAL (after a NOSCRIPT); then none.
    await q.settle(o, 'task_warm', 'succeeded', true, 0);
    const before = await evals();
    const c = task(o);
    await q.admit(c);
    await q.settle(o, c.id, 'succeeded', true, 10);
    expect(await evals()).toBe(before);
    await flushAll();
    expect(await q.admit(b)).toEqual({ admitted: true, fresh: true });
    await flushAll();
    expect(await q.settle(o, a.id, 'succeeded', true, 10)).toBe('charged');
    expect(await q.settle(o, b.id, 'failed', true, 0)).toBe('released');
    expect(await q.standing(o)).toMatchObject({ daily_units: 2, max_unfinished: 0 });
  });

  it('settles each task once: a second settlement of any kind changes nothing', async () => {
    const [q] = stores({ ...NO_LIMITS, daily_units: 3 });
    const o = owner();
    const [s, f, u] = [task(o), task(o), task(o)];
    for (const t of [s, f, u]) expect(await q.admit(t)).toEqual({ admitted: true, fresh: true });
    expect(await q.admit(s)).toEqual({ admitted: true, fresh: false });
    expect(await q.settle(o, s.id, 'succeeded', true, 2000)).toBe('charged');
    expect(await q.settle(o, s.id, 'succeeded', true, 2000)).toBe('none');
    expect(await q.settle(o, f.id, 'failed', true, 0)).toBe('released');
    expect(await q.settle(o, f.id, 'failed', true, 0)).toBe('none');
    expect(await q.settle(o, u.id, 'uncertain', true, 1000)).toBe('held');
    expect(await q.settle(o, u.id, 'uncertain', true, 1000)).toBe('none');
    expect(await q.settle(o, u.id, 'failed', false, 0)).toBe('none');
    expect(await q.void(o, u.id)).toBe(false);
    expect(await q.standing(o)).toMatchObject({ daily_units: 2, max_unfinished: 0 });
    expect((await q.reservations(o)).map((r) => [r.id, r.held])).toEqual([[u.id, true]]);
    expect(await q.release(o, s.id)).toBe('not_found');
    expect(await q.release(o, u.id)).toBe('released');
    expect(await q.release(o, u.id)).toBe('not_found');
    const day = dayOf(Date.now());
    expect((await q.usage(o, [day])).get(day)?.get('m')).toEqual({
      submitted: 3,
      succeeded: 1,
      failed: 1,
      canceled: 0,
      uncertain: 1,
      released: 1,
      units: 1,
      upstream_ms: 3000,
    });
    expect(await q.standing(o)).toMatchObject({ daily_units: 1 });
  });

  it('a day boundary: tasks on each side count on their own day, and the day quota starts afresh', async () => {
    const [q] = stores({ ...NO_LIMITS, daily_units: 2, monthly_units: 3 });
    const o = owner();
    const midnight = Date.UTC(2026, 10, 28);
    const before = midnight - 1;
    const after = midnight;
    const early = [task(o, { nowMs: before - 1000 }), task(o, { nowMs: before })];
    for (const t of early) expect((await q.admit(t)).admitted).toBe(true);
    const late = await q.admit(task(o, { nowMs: before }));
    expect(late).toMatchObject({ admitted: false, code: 'quota_exceeded', limit: 'daily_units', retryAfterMs: 1 });
    const next = task(o, { nowMs: after });
    expect(await q.admit(next)).toEqual({ admitted: true, fresh: true });
    // The month (November) has 3 units: the fourth is refused by it, until December 1st.
    const fourth = await q.admit(task(o, { nowMs: after + 1000 }));
    expect(fourth).toMatchObject({
      admitted: false,
      limit: 'monthly_units',
      retryAfterMs: Date.UTC(2026, 11, 1) - after - 1000,
    });
    // A task settled after midnight still counts on the day it was submitted.
    expect(await q.settle(o, early[1].id, 'succeeded', true, 0)).toBe('charged');
    expect(await q.settle(o, next.id, 'succeeded', true, 0)).toBe('charged');
    const usage = await q.usage(o, ['20261127', '20261128']);
    expect(usage.get('20261127')?.get('m')).toMatchObject({ submitted: 2, succeeded: 1, units: 1 });
    expect(usage.get('20261128')?.get('m')).toMatchObject({ submitted: 1, succeeded: 1, units: 1 });
    expect(await q.standing(o, undefined, before)).toMatchObject({ daily_units: 2, monthly_units: 3 });
    expect(await q.standing(o, undefined, after)).toMatchObject({ daily_units: 1, monthly_units: 3 });
  });

  it("a key's limits over its own counters, the owner's over all; an owner's own limits over the default", async () => {
    const [q] = stores({ ...NO_LIMITS, max_unfinished: 1 });
    const o = owner();
    const key = { id: 'key_a', limits: { ...NO_LIMITS, submits_per_minute: 1 } };
    expect((await q.admit(task(o, { key }))).admitted).toBe(true);
    expect(await q.admit(task(o, { key }))).toMatchObject({
      admitted: false,
      code: 'concurrency_limit_exceeded',
      scope: 'owner',
    });
    await q.setOwnerLimits(o, { max_unfinished: null });
    expect(await q.ownerLimits(o)).toEqual({ limits: NO_LIMITS, own: { max_unfinished: null } });
    const r = await q.admit(task(o, { key }));
    expect(r).toMatchObject({ admitted: false, code: 'rate_limited', scope: 'key' });
    expect(r.admitted === false && r.retryAfterMs).toBeGreaterThan(55_000);
    expect((await q.admit(task(o, { key: { id: 'key_b', limits: NO_LIMITS } }))).admitted).toBe(true);
    expect(await q.standing(o, 'key_a')).toMatchObject({ max_unfinished: 1, submits_per_minute: 1 });
    expect(await q.standing(o)).toMatchObject({ max_unfinished: 2, submits_per_minute: 2 });
    await q.setOwnerLimits(o, {}, ['max_unfinished']);
    expect((await q.ownerLimits(o)).limits.max_unfinished).toBe(1);
  });

  it('void undoes a reservation as if never made, its submit and its place in the minute included', async () => {
    const [q] = stores({ ...NO_LIMITS, submits_per_minute: 1, daily_units: 1 });
    const o = owner();
    const t = task(o);
    expect((await q.admit(t)).admitted).toBe(true);
    expect(await q.void(o, t.id)).toBe(true);
    expect(await q.void(o, t.id)).toBe(false);
    expect(await q.standing(o)).toMatchObject({ max_unfinished: 0, submits_per_minute: 0, daily_units: 0 });
    const day = dayOf(Date.now());
    expect((await q.usage(o, [day])).get(day)?.get('m')?.submitted ?? 0).toBe(0);
    expect((await q.admit(task(o))).admitted).toBe(true);
  });
});
