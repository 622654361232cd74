// The Temporal dev server Kiln's scripts start (scripts/services.ts) keeps its search-attribute
// cache: a start carrying Kiln's search attributes must not read the cluster metadata from SQLite
// again. The dev server's own default (forced refresh) did so 5–7 times a task, ~9 % of its CPU
// (BENCHMARKS.md, `npm run bench:server-ops`). Read from the server's Prometheus counters; the same
// starts against a server forced to refresh show that the counter sees those reads.
import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { describe, expect, inject, it } from 'vitest';
import { freePort, startTemporal, temporalCounters } from '../../../scripts/services.js';
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
    await start(); // the first use may fill the cache
    const before = await clusterMetadataReads(metricsPort);
    for (let i = 0; i < STARTS; i++) await start();
    return (await clusterMetadataReads(metricsPort)) - before;
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
});
