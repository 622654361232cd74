// /healthz and /readyz: unready soon after losing Redis or the worker, ready again after, and
// never slow to answer while something is down.
import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startRedis, startTemporal, type Service } from '../../../scripts/services.js';
import { CHECK_TIMEOUT_MS } from '../../../src/ops/readiness.js';
import { startKiln, type Kiln } from '../../support/kiln.js';

let redis: Service;
let kiln: Kiln;

/**
 * A /readyz answer: its checks run under CHECK_TIMEOUT_MS (1 s), so about a second at most; a check
 * left unbounded would wait as long as Redis or Temporal stays away. 5 s tells them apart on a
 * loaded machine.
 */
const ANSWER_MS = 5 * CHECK_TIMEOUT_MS;
/**
 * Turning unready: at the next answer for Redis or a stopped worker, within the beacon's STALE_MS
 * (2 s, src/ops/worker-beacon.ts) for a killed one; Temporal's own poller list would show a gone
 * worker for a minute or more.
 */
const UNREADY_MS = 15_000;

beforeAll(async () => {
  redis = await startRedis({ dir: mkdtempSync(join(inject('tmpRoot'), 'redis-ready-')) });
  kiln = await startKiln({ redisUrl: redis.url });
});
afterAll(async () => {
  await kiln?.stop();
  await redis?.stop();
});

async function readyz() {
  const t0 = performance.now();
  const res = await fetch(`${kiln.baseUrl}/readyz`);
  return { status: res.status, body: (await res.json()) as any, ms: performance.now() - t0 };
}

/** Polls /readyz until it answers `status`; returns how long that took. Every answer must be fast. */
async function until(status: number, limitMs: number): Promise<{ after: number; last: any }> {
  const t0 = performance.now();
  for (;;) {
    const r = await readyz();
    expect(r.ms, 'a /readyz answer').toBeLessThan(ANSWER_MS);
    if (r.status === status) return { after: performance.now() - t0, last: r.body };
    if (performance.now() - t0 > limitMs)
      throw new Error(`/readyz still ${r.status} after ${limitMs} ms: ${JSON.stringify(r.body)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('health and readiness', () => {
  it('is ready with Redis, Temporal and a polling worker', async () => {
    const { last } = await until(200, 10_000);
    expect(last.status).toBe('ready');
    expect(last.checks.redis.ok && last.checks.temporal.ok && last.checks.worker.ok).toBe(true);
    expect(last.checks.worker.detail).toMatch(/1 worker process/);
    const health = await fetch(`${kiln.baseUrl}/healthz`);
    expect(health.status).toBe(200);
  });

  it('turns unready soon after Redis stops, and ready again after it restarts', async () => {
    await until(200, 10_000);
    await redis.stop('SIGKILL');
    const down = await until(503, UNREADY_MS);
    console.info(`/readyz unready ${Math.round(down.after)} ms after Redis was killed`);
    expect(down.last.checks.redis.ok).toBe(false);
    expect(down.last.checks.temporal.ok).toBe(true);
    // Liveness is about the process only.
    expect((await fetch(`${kiln.baseUrl}/healthz`)).status).toBe(200);
    await redis.start();
    const up = await until(200, 10_000);
    console.info(`/readyz ready ${Math.round(up.after)} ms after Redis restarted`);
    expect(up.last.checks.redis.ok).toBe(true);
  });

  it('turns unready soon after the worker stops, and ready again after it restarts', async () => {
    await until(200, 10_000);
    await kiln.stopWorker();
    const down = await until(503, UNREADY_MS);
    console.info(`/readyz unready ${Math.round(down.after)} ms after the worker stopped`);
    expect(down.last.checks.worker.ok).toBe(false);
    expect(down.last.checks.redis.ok).toBe(true);
    await kiln.startWorker();
    await until(200, 10_000);
  });

  it('answers within its deadline, unready, while the Temporal server is down', async () => {
    const temporal = await startTemporal({
      dbFile: join(mkdtempSync(join(inject('tmpRoot'), 'temporal-ready-')), 'dev.sqlite'),
    });
    const k = await startKiln({ temporalAddress: temporal.url });
    try {
      const r = async () => {
        const t0 = performance.now();
        const res = await fetch(`${k.baseUrl}/readyz`);
        return { status: res.status, body: (await res.json()) as any, ms: performance.now() - t0 };
      };
      const up = performance.now();
      while ((await r()).status !== 200) {
        if (performance.now() - up > 10_000) throw new Error('never ready');
        await new Promise((res) => setTimeout(res, 100));
      }
      await temporal.stop('SIGKILL');
      const t0 = performance.now();
      let last = await r();
      while (last.status !== 503 && performance.now() - t0 < UNREADY_MS) last = await r();
      expect(last.status).toBe(503);
      expect(last.ms).toBeLessThan(ANSWER_MS);
      expect(last.body.checks.temporal.ok).toBe(false);
      expect(last.body.checks.redis.ok).toBe(true);
      // Still bounded on repeat (no hanging connection attempts piling up).
      for (let i = 0; i < 3; i++) expect((await r()).ms).toBeLessThan(ANSWER_MS);
    } finally {
      await k.stop().catch(() => undefined);
      await temporal.stop();
    }
  }, 60_000);

  it('reports unready while draining for shutdown', async () => {
    await until(200, 10_000);
    kiln.api.drain();
    const r = await readyz();
    expect(r.status).toBe(503);
    expect(r.body.status).toBe('unready');
  });
});
