// The Temporal dev server Kiln's scripts start (scripts/services.ts) keeps its search-attribute
// cache: a start carrying Kiln's search attributes must not read the cluster metadata from SQLite
// again. The dev server's own default (forced refresh) did so 5–7 times a task, ~9 % of its CPU
// (BENCHMARKS.md, `npm run bench:server-ops`). Read from the server's Prometheus counters; the same
// starts against a server forced to refresh show that the counter sees those reads.
// It also runs history's task schedulers with Kiln's worker counts (LEAN_HISTORY_CONFIG): seen in its
// goroutine gauge against a server given Temporal's defaults back.
import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { describe, expect, inject, it } from 'vitest';
import { freePort, LEAN_HISTORY_CONFIG, startTemporal, temporalCounters } from '../../../scripts/services.js';
import { SA } from '../../../src/temporal/search-attributes.js';

const STARTS = 20;

/** `persistence_requests` for GetCurrentClusterMetadata, over the server's services, once settled. */
async function clusterMetadataReads(metricsPort: number): Promise<number> {
  await new Promise((r) => setTimeout(r, 2500));
  const counters = await temporalCounters(metricsPort, ['persistence_requests']);
  return [...counters].filter(([k]) => k.endsWith(' GetCurrentClusterMetadata')).reduce((sum, [, v]) => sum + v, 0);
}

/** Cluster-metadata reads made by STARTS workflow starts with Kiln's search attributes. */
async function readsPerStarts(dynamicConfig?: Record<string, unknown>): Promise<number> {
  return withStarts(dynamicConfig, async (metricsPort, start) => {
    await start(); // the first use may fill the cache
    const before = await clusterMetadataReads(metricsPort);
    for (let i = 0; i < STARTS; i++) await start();
    return (await clusterMetadataReads(metricsPort)) - before;
  });
}

/** The server's goroutines (one Go process: every service's), once STARTS starts have settled. */
async function goroutinesAfterStarts(dynamicConfig?: Record<string, unknown>): Promise<number> {
  return withStarts(dynamicConfig, async (metricsPort, start) => {
    for (let i = 0; i < STARTS; i++) await start();
    await new Promise((r) => setTimeout(r, 2500));
    const gauges = await temporalCounters(metricsPort, ['num_goroutines']);
    return gauges.get('num_goroutines history -') ?? NaN;
  });
}

/** A dev server as Kiln's scripts start it (plus `dynamicConfig`), and a start of an image task. */
async function withStarts<T>(
  dynamicConfig: Record<string, unknown> | undefined,
  run: (metricsPort: number, start: () => Promise<unknown>) => Promise<T>,
): Promise<T> {
  const metricsPort = await freePort();
  const dir = mkdtempSync(join(inject('tmpRoot'), 'server-work-'));
  const temporal = await startTemporal({ dbFile: join(dir, 'temporal.sqlite'), metricsPort, dynamicConfig });
  const connection = await Connection.connect({ address: temporal.url });
  try {
    const client = new Client({ connection });
    const start = () =>
      client.workflow.start('imageTaskWorkflow', {
        workflowId: `task_${randomUUID()}`,
        taskQueue: 'no-worker',
        typedSearchAttributes: [
          { key: SA.owner, value: 'owner-hash' },
          { key: SA.model, value: 'a-model' },
        ],
      });
    return await run(metricsPort, start);
  } finally {
    await connection.close();
    await temporal.stop();
  }
}

describe("the dev server Kiln's scripts start", () => {
  it('answers starts with search attributes from its cache, not from SQLite', async () => {
    const forced = await readsPerStarts({ 'system.forceSearchAttributesCacheRefreshOnRead': true });
    const kilns = await readsPerStarts();
    console.info(`[server-work] cluster-metadata reads for ${STARTS} starts: forced ${forced}, Kiln's ${kilns}`);
    // Forced, every start reads at least once (the frontend's check); cached, none (one at most,
    // should the cache's 60 s expiry fall inside the loop).
    expect(forced).toBeGreaterThanOrEqual(STARTS);
    expect(kilns).toBeLessThanOrEqual(1);
  }, 120_000);

  it("runs history's task schedulers with Kiln's worker counts, not Temporal's 512 a queue", async () => {
    // Temporal's defaults back (common/dynamicconfig/constants.go), to see that the settings reach
    // the server: it ignores a misspelt key.
    const defaults: Record<string, number> = {
      'history.transferProcessorSchedulerWorkerCount': 512,
      'history.timerProcessorSchedulerWorkerCount': 512,
      'history.visibilityProcessorSchedulerWorkerCount': 512,
      'history.memoryTimerProcessorSchedulerWorkerCount': 64,
      'history.ReplicationProcessorSchedulerWorkerCount': 512,
      'history.ReplicationLowPriorityProcessorSchedulerWorkerCount': 128,
    };
    expect(Object.keys(LEAN_HISTORY_CONFIG)).toEqual(expect.arrayContaining(Object.keys(defaults)));
    const full = await goroutinesAfterStarts(defaults);
    const kilns = await goroutinesAfterStarts();
    console.info(`[server-work] goroutines: Temporal's scheduler defaults ${full}, Kiln's ${kilns}`);
    // Each scheduler starts its workers up front: the gap is the workers left out (2,120; 2,121 in
    // the first run, 2,327 against 206 goroutines), give or take the server's own.
    const leftOut = Object.entries(defaults).reduce((n, [k, v]) => n + v - (LEAN_HISTORY_CONFIG[k] as number), 0);
    expect(kilns).toBeGreaterThan(0);
    expect(Math.abs(full - kilns - leftOut)).toBeLessThanOrEqual(leftOut * 0.05);
  }, 120_000);
});
