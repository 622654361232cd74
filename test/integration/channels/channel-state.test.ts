// The channels' shared state (src/channels/redis-state.ts) on a real redis-server and on a real
// Redis Cluster (3 primaries + 3 replicas, started here): the same behaviours on both. Each test
// has its own prefix and model, so tests neither share state nor all land on one slot.
import { randomBytes } from 'node:crypto';
import { BACKENDS, type Backend } from '../../support/redis-backends.js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { RedisChannelState } from '../../../src/channels/redis-state.js';
import {
  LATENCY_BUCKETS_MS,
  type CallOutcome,
  type CallReport,
  type ChannelLimits,
  type ChannelRef,
} from '../../../src/channels/state.js';
import { keySlot } from '../../../src/tasks/store/cluster-slots.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/**
 * Time here is Redis's (TIME), which a test cannot stop. So a lease, cool-down or window that must
 * still hold when the test looks is LIMITS' minute, and one that must lapse is short and waited out
 * by polling; no check depends on how quickly two calls follow each other.
 */
const until_ = async <T>(probe: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 10_000): Promise<T> => {
  const deadline = Date.now() + timeoutMs;
  let v = await probe();
  while (!ok(v) && Date.now() < deadline) {
    await sleep(20);
    v = await probe();
  }
  return v;
};
const LIMITS: ChannelLimits = {
  concurrency: 10,
  cools: true,
  cooldownAfter: 3,
  cooldownWindowMs: 60_000,
  cooldownMs: 60_000,
  leaseMs: 60_000,
};
const OK = { ok: true, probe: false };
const PROBE = { ok: true, probe: true };
const FULL = { ok: false, reason: 'full' };
const PROBING = { ok: false, reason: 'probing' };
const report = (outcome: CallOutcome, extra: Partial<CallReport> = {}): CallReport => ({
  outcome,
  durationMs: 100,
  jitter: 0,
  ...extra,
});

describe.each(BACKENDS('channels'))('channel state on %s', (_name, start) => {
  let backend: Backend;
  let state: RedisChannelState;
  let other: RedisChannelState;
  let ref: ChannelRef;
  let seq = 0;

  beforeAll(async () => {
    backend = await start();
  }, 180_000);
  afterAll(async () => {
    await backend?.stop();
  });
  beforeEach(() => {
    const prefix = `chtest-${randomBytes(4).toString('hex')}:`;
    state = new RedisChannelState(backend.clients[0], prefix);
    other = new RedisChannelState(backend.clients[1], prefix);
    ref = { model: `model-${randomBytes(4).toString('hex')}`, channel: 'primary' };
  });

  /** One whole call: a lease for a new holder, then its release with `outcome`. */
  const call = async (outcome: CallOutcome, limits: ChannelLimits, extra: Partial<CallReport> = {}) => {
    const holder = `call-${++seq}`;
    expect(await state.acquire(ref, holder, limits)).toMatchObject({ ok: true });
    await state.release(ref, holder, limits, report(outcome, extra));
  };
  const acquireUntil = async (holder: string, limits: ChannelLimits) => {
    const r = await state.acquire(ref, holder, limits);
    if (r.ok || r.reason !== 'cooling') throw new Error(`expected cooling, got ${JSON.stringify(r)}`);
    return r.untilMs;
  };
  /** When the cool-down ends, read whether or not it already has (a short one may have by now). */
  const coolingUntil = async (limits: ChannelLimits) => {
    const until = (await state.snapshot(ref, limits)).coolingUntil;
    if (until === null) throw new Error('expected a cool-down');
    return until;
  };
  const retryInOf = async (holder: string, limits: ChannelLimits) => {
    const r = await state.acquire(ref, holder, limits);
    if (r.ok || r.reason !== 'rate') throw new Error(`expected rate, got ${JSON.stringify(r)}`);
    return r.retryInMs;
  };

  it('keeps every key of a channel in one slot, each expiring when the channel stays idle', async () => {
    await call('refused', LIMITS);
    expect(await state.acquire(ref, 'held', LIMITS)).toEqual(OK);
    const keys = Object.values(state.keys(ref));
    expect(new Set(keys.map(keySlot)).size).toBe(1);
    for (const key of keys) {
      const ttl = await backend.clients[0].pttl(key);
      expect(ttl, key).toBeGreaterThan(86_000_000);
      expect(ttl, key).toBeLessThanOrEqual(86_400_000);
    }
  });

  it('admits exactly `concurrency` calls, and another once one is released', async () => {
    const limits = { ...LIMITS, concurrency: 2 };
    expect(await state.acquire(ref, 'a', limits)).toEqual(OK);
    expect(await state.acquire(ref, 'b', limits)).toEqual(OK);
    expect(await state.acquire(ref, 'c', limits)).toEqual(FULL);
    await state.release(ref, 'a', limits, report('succeeded'));
    expect(await state.acquire(ref, 'c', limits)).toEqual(OK);
    expect(await state.acquire(ref, 'd', limits)).toEqual(FULL);
    expect((await state.snapshot(ref, limits)).inFlight).toBe(2);
  });

  it('admits exactly 5 of 50 parallel acquires from two clients with concurrency 5', async () => {
    const limits = { ...LIMITS, concurrency: 5 };
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => (i % 2 ? state : other).acquire(ref, `p${i}`, limits)),
    );
    expect(results.filter((r) => r.ok)).toHaveLength(5);
    expect(results.filter((r) => !r.ok && r.reason === 'full')).toHaveLength(45);
    expect((await other.snapshot(ref, limits)).inFlight).toBe(5);
  });

  it('frees the slot of a lease whose holder never released it', async () => {
    const limits = { ...LIMITS, concurrency: 1 };
    expect(await state.acquire(ref, 'dead', limits)).toEqual(OK);
    expect(await state.acquire(ref, 'b', limits)).toEqual(FULL);
    // Its last renewal asked for 300 ms; then it died.
    expect(await state.acquire(ref, 'dead', { ...limits, leaseMs: 300 })).toEqual(OK);
    expect(
      (
        await until_(
          () => state.snapshot(ref, limits),
          (s) => s.inFlight === 0,
        )
      ).inFlight,
    ).toBe(0);
    expect(await state.acquire(ref, 'b', limits)).toEqual(OK);
    // The dead holder's late release does not free b's slot.
    await state.release(ref, 'dead', limits, report('ambiguous'));
    expect(await state.acquire(ref, 'c', limits)).toEqual(FULL);
  });

  it('gives a holder its own lease again without taking a second slot, refreshing its expiry', async () => {
    const limits = { ...LIMITS, concurrency: 2 };
    const expiry = async (holder: string) => Number(await backend.clients[0].zscore(state.keys(ref).leases, holder));
    expect(await state.acquire(ref, 'a', limits)).toEqual(OK);
    const first = await expiry('a');
    expect(await state.acquire(ref, 'a', limits)).toEqual(OK);
    expect((await state.snapshot(ref, limits)).inFlight).toBe(1);
    expect(await state.acquire(ref, 'b', limits)).toEqual(OK);
    await sleep(10);
    expect(await state.acquire(ref, 'a', limits)).toEqual(OK);
    expect(await state.acquire(ref, 'c', limits)).toEqual(FULL);
    expect(await expiry('a')).toBeGreaterThan(first);
    // A refresh sets the expiry it asks for: a's 300 ms lapses, b's minute holds.
    expect(await state.acquire(ref, 'a', { ...limits, leaseMs: 300 })).toEqual(OK);
    expect(
      (
        await until_(
          () => state.snapshot(ref, limits),
          (s) => s.inFlight < 2,
        )
      ).inFlight,
    ).toBe(1);
    expect(await state.acquire(ref, 'c', limits)).toEqual(OK);
    expect(await state.acquire(ref, 'd', limits)).toEqual(FULL);
  });

  it('limits the rate: a burst of ratePerSecond calls, then one per interval', async () => {
    const limits = { ...LIMITS, concurrency: 100, ratePerSecond: 5 };
    const redisNow = async () => Number((await backend.clients[0].time())[0]) * 1000;
    /** Acquires until refused: how many were admitted, over how many ms (Redis's clock, whole seconds). */
    const burst = async (from: number) => {
      const t0 = await redisNow();
      let n = 0;
      while ((await state.acquire(ref, `r${from + n}`, limits)).ok) n++;
      return { n, ms: (await redisNow()) - t0 + 1000 };
    };
    // However slowly the calls follow each other: 5 at once, then one more per 200 ms at most.
    const first = await burst(0);
    expect(first.n).toBeGreaterThanOrEqual(5);
    expect(first.n).toBeLessThanOrEqual(5 + Math.ceil(first.ms / 200));
    const retryIn = await retryInOf('late', limits);
    expect(retryIn).toBeGreaterThan(0);
    expect(retryIn).toBeLessThanOrEqual(200);
    // A refused call costs nothing: asking again does not push the next slot further.
    expect(await retryInOf('late', limits)).toBeLessThanOrEqual(retryIn);
    expect((await state.snapshot(ref, limits)).inFlight).toBe(first.n);
    await sleep(retryIn + 20);
    const next = await burst(first.n);
    expect(next.n).toBeGreaterThanOrEqual(1);
    expect(next.n).toBeLessThanOrEqual(1 + Math.ceil((next.ms + retryIn + 20) / 200));
  });

  it('cools down after cooldownAfter refusals within the window, for cooldownMs × (1 + 0.5 × jitter)', async () => {
    const limits = { ...LIMITS, cooldownMs: 30_000 };
    await call('refused', limits, { jitter: 0.5 });
    await call('refused', limits, { jitter: 0.5 });
    expect(await state.acquire(ref, 'x', limits)).toEqual(OK);
    const before = Date.now();
    await state.release(ref, 'x', limits, report('refused', { jitter: 0.5 }));
    const until = await acquireUntil('y', limits);
    expect(until - before).toBeGreaterThanOrEqual(30_000 * 1.25 - 20);
    expect(until - Date.now()).toBeLessThanOrEqual(30_000 * 1.25);
    expect(await state.snapshot(ref, limits)).toMatchObject({ state: 'open', coolingUntil: until, inFlight: 0 });
  });

  it('does not cool down for refusals spread past the window', async () => {
    const limits = { ...LIMITS, cooldownWindowMs: 300 };
    await call('refused', limits);
    await call('refused', limits);
    await sleep(400);
    await call('refused', limits);
    expect(await state.acquire(ref, 'x', limits)).toEqual(OK);
    expect((await state.snapshot(ref, limits)).state).toBe('closed');
    // The third still counts: two more, each with a window of a minute (so however slowly they
    // follow it), and it cools down.
    await state.release(ref, 'x', LIMITS, report('refused'));
    await call('refused', LIMITS);
    expect(await state.acquire(ref, 'y', limits)).toMatchObject({ ok: false, reason: 'cooling' });
  });

  it("a channel that never cools down (a model's only one) records no refusal, and clears a cool-down left from before", async () => {
    const never = { ...LIMITS, cools: false, cooldownAfter: 1 };
    await call('refused', never, { retryAfterMs: 60_000 });
    await call('not_sent', never);
    expect(await state.acquire(ref, 'x', never)).toEqual(OK);
    await state.release(ref, 'x', never, report('succeeded'));
    // Cooling from when the channel had company: ignored at once, and reset closed by the next call.
    await call('refused', { ...LIMITS, cooldownAfter: 1 });
    expect(await state.acquire(ref, 'y', LIMITS)).toMatchObject({ ok: false, reason: 'cooling' });
    expect(await state.acquire(ref, 'y', never)).toEqual(OK);
    await state.release(ref, 'y', never, report('refused'));
    expect((await state.snapshot(ref, LIMITS)).state).toBe('closed');
    expect(await state.acquire(ref, 'z', LIMITS)).toEqual(OK);
  });

  it('counts not_sent like refused', async () => {
    await call('not_sent', LIMITS);
    await call('refused', LIMITS);
    await call('not_sent', LIMITS);
    expect(await state.acquire(ref, 'x', LIMITS)).toMatchObject({ ok: false, reason: 'cooling' });
  });

  it('does not count failed or ambiguous calls; a success clears the refusals', async () => {
    const limits = { ...LIMITS, cooldownAfter: 2 };
    for (let i = 0; i < 3; i++) await call('failed', limits);
    for (let i = 0; i < 3; i++) await call('ambiguous', limits);
    await call('refused', limits);
    await call('failed', limits);
    await call('succeeded', limits);
    await call('refused', limits);
    expect(await state.acquire(ref, 'x', limits)).toEqual(OK);
    expect((await state.snapshot(ref, limits)).state).toBe('closed');
    await state.release(ref, 'x', limits, report('refused'));
    expect(await state.acquire(ref, 'y', limits)).toMatchObject({ ok: false, reason: 'cooling' });
  });

  it("cools down at once for a 429's Retry-After, for that long", async () => {
    const limits = { ...LIMITS, cooldownAfter: 100 };
    const before = Date.now();
    await call('refused', limits, { retryAfterMs: 600 });
    const until = await coolingUntil(limits);
    expect(until - before).toBeGreaterThanOrEqual(600 - 20);
    expect(until - Date.now()).toBeLessThanOrEqual(600);
    expect(
      await until_(
        () => state.acquire(ref, 'x', limits),
        (r) => r.ok,
      ),
    ).toEqual(PROBE);
    expect(Date.now()).toBeGreaterThanOrEqual(until - 20);
  });

  describe('half-open', () => {
    const limits = { ...LIMITS, cooldownAfter: 1, cooldownMs: 300, leaseMs: 5000 };
    /** Cools the channel down and waits out the cool-down. */
    const halfOpen = async () => {
      await call('refused', limits);
      expect((await state.snapshot(ref, limits)).coolingUntil).not.toBeNull();
      expect(
        (
          await until_(
            () => state.snapshot(ref, limits),
            (s) => s.state !== 'open',
          )
        ).state,
      ).toBe('half_open');
    };

    it('lets exactly one of many concurrent callers probe; the others are told another probes', async () => {
      await halfOpen();
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => (i % 2 ? state : other).acquire(ref, `h${i}`, limits)),
      );
      expect(results.filter((r) => r.ok)).toEqual([PROBE]);
      expect(results.filter((r) => !r.ok)).toEqual(Array.from({ length: 19 }, () => PROBING));
      // The probe asking again keeps its role.
      const probe = `h${results.findIndex((r) => r.ok)}`;
      expect(await state.acquire(ref, probe, limits)).toEqual(PROBE);
    });

    it('closes the channel when the probe succeeds', async () => {
      await halfOpen();
      expect(await state.acquire(ref, 'p', limits)).toEqual(PROBE);
      await state.release(ref, 'p', limits, report('succeeded'));
      expect(await state.snapshot(ref, limits)).toMatchObject({ state: 'closed', coolingUntil: null });
      expect(await state.acquire(ref, 'a', limits)).toEqual(OK);
      expect(await state.acquire(ref, 'b', limits)).toEqual(OK);
    });

    it('closes the channel when the probe fails or is ambiguous (the upstream answered)', async () => {
      for (const outcome of ['failed', 'ambiguous'] as const) {
        await halfOpen();
        expect(await state.acquire(ref, `p-${outcome}`, limits)).toEqual(PROBE);
        await state.release(ref, `p-${outcome}`, limits, report(outcome));
        expect((await state.snapshot(ref, limits)).state).toBe('closed');
      }
    });

    it('opens the channel again, for a fresh cool-down, when the probe is refused', async () => {
      await halfOpen();
      expect(await state.acquire(ref, 'p', limits)).toEqual(PROBE);
      const before = Date.now();
      await state.release(ref, 'p', limits, report('refused', { jitter: 1 }));
      const until = await coolingUntil(limits);
      expect(until - before).toBeGreaterThanOrEqual(450 - 20);
      expect(until - Date.now()).toBeLessThanOrEqual(450);
      expect(
        await until_(
          () => state.acquire(ref, 'x', limits),
          (r) => r.ok,
        ),
      ).toEqual(PROBE);
      expect(Date.now()).toBeGreaterThanOrEqual(until - 20);
    });

    it('stays half-open when the probe is canceled: the next call probes', async () => {
      await halfOpen();
      expect(await state.acquire(ref, 'p', limits)).toEqual(PROBE);
      expect(await other.acquire(ref, 'q', limits)).toEqual(PROBING);
      await state.release(ref, 'p', limits, report('canceled'));
      expect((await state.snapshot(ref, limits)).state).toBe('half_open');
      expect(await other.acquire(ref, 'q', limits)).toEqual(PROBE);
      expect(await state.acquire(ref, 'r', limits)).toEqual(PROBING);
    });

    it('lets another call probe once a dead probe’s lease expires', async () => {
      await halfOpen();
      expect(await state.acquire(ref, 'dead', limits)).toEqual(PROBE);
      expect(await state.acquire(ref, 'q', limits)).toEqual(PROBING);
      // Its last renewal asked for 300 ms; then it died.
      expect(await state.acquire(ref, 'dead', { ...limits, leaseMs: 300 })).toEqual(PROBE);
      expect(
        await until_(
          () => state.acquire(ref, 'q', limits),
          (r) => r.ok,
        ),
      ).toEqual(PROBE);
    });

    it('does not make a caller the probe when the capacity refuses it', async () => {
      const one = { ...limits, concurrency: 1 };
      await halfOpen();
      // A call that started before the cool-down still holds the only slot.
      await backend.clients[0].zadd(state.keys(ref).leases, Date.now() + 60_000, 'straggler');
      expect(await state.acquire(ref, 'p', one)).toEqual(FULL);
      expect(await other.acquire(ref, 'q', one)).toEqual(FULL);
      await state.release(ref, 'straggler', one, report('failed'));
      expect(await other.acquire(ref, 'q', one)).toEqual(PROBE);
    });
  });

  it('reports the window, the percentiles, the last error, the totals and the histogram', async () => {
    const limits = { ...LIMITS, cooldownAfter: 100 };
    const calls: [CallOutcome, number][] = [
      ['succeeded', 100],
      ['succeeded', 200],
      ['succeeded', 300],
      ['failed', 400],
      ['ambiguous', 500],
      ['refused', 50],
      ['canceled', 9999],
    ];
    const before = Date.now();
    for (const [outcome, durationMs] of calls) {
      const error = outcome === 'refused' ? { code: 'upstream_refused', message: '429 Too Many Requests' } : undefined;
      await call(outcome, limits, { durationMs, error });
    }
    const after = Date.now();
    expect(await state.acquire(ref, 'busy-1', limits)).toEqual(OK);
    expect(await state.acquire(ref, 'busy-2', limits)).toEqual(OK);

    const snap = await other.snapshot(ref, limits);
    expect(snap).toMatchObject({
      state: 'closed',
      coolingUntil: null,
      inFlight: 2,
      recent: { succeeded: 3, failed: 1, ambiguous: 1, refused: 1, not_sent: 0, canceled: 1 },
      successRate: 0.5,
      // Nearest rank over 50, 100, 200, 300, 400, 500 (the canceled call left out).
      p50Ms: 200,
      p95Ms: 500,
      lastError: { code: 'upstream_refused', message: '429 Too Many Requests' },
      totals: { succeeded: 3, failed: 1, ambiguous: 1, refused: 1, not_sent: 0, canceled: 1 },
    });
    expect(snap.lastError!.at).toBeGreaterThanOrEqual(before - 1000);
    expect(snap.lastError!.at).toBeLessThanOrEqual(after + 1000);
    // Buckets ≤50, ≤100, ≤250, ≤500, then every larger one, then +Inf.
    expect(snap.latency).toEqual({
      buckets: [1, 2, 3, 6, 6, 6, 6, 6, 6, 6, 6, 6],
      count: 6,
      sumMs: 1550,
    });
    expect(snap.latency.buckets).toHaveLength(LATENCY_BUCKETS_MS.length + 1);

    // A window that ends before the calls: nothing recent, the totals stay.
    await sleep(50);
    expect(await state.snapshot(ref, limits, 20)).toMatchObject({
      recent: { succeeded: 0, failed: 0, ambiguous: 0, refused: 0, not_sent: 0, canceled: 0 },
      successRate: null,
      p50Ms: null,
      p95Ms: null,
      totals: snap.totals,
      latency: snap.latency,
    });
  });

  it('reports an untouched channel as closed and empty', async () => {
    expect(await state.snapshot(ref, LIMITS)).toEqual({
      state: 'closed',
      coolingUntil: null,
      inFlight: 0,
      recent: { succeeded: 0, refused: 0, not_sent: 0, failed: 0, ambiguous: 0, canceled: 0 },
      successRate: null,
      p50Ms: null,
      p95Ms: null,
      lastError: null,
      totals: { succeeded: 0, refused: 0, not_sent: 0, failed: 0, ambiguous: 0, canceled: 0 },
      latency: { buckets: LATENCY_BUCKETS_MS.map(() => 0).concat(0), count: 0, sumMs: 0 },
    });
  });
});
