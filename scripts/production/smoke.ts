// Proof that the production-shaped stack works, with timings: start it, check each component
// through its real client, optionally run the failure drills, stop it and look for stray processes.
//
//   tsx scripts/production/smoke.ts [--fresh] [--drills] [--dir DIR]
//
// Exits non-zero on the first failed check. Workflows are started without a worker (nothing runs
// them): they prove persistence, visibility and Kiln's search attributes, then are terminated.
import { randomUUID } from 'node:crypto';
import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Client, Connection } from '@temporalio/client';
import { Cluster } from 'ioredis';
import { SEARCH_ATTRIBUTES } from '../../src/shared/task.js';
import { run, tool, waitUntil } from './proc.js';
import { startProductionStack, type ProductionStack } from './stack.js';

const argv = process.argv.slice(2);
const arg = (name: string) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const timings: [string, number][] = [];
const say = (l: string) => console.error(`[smoke] ${l}`);

async function phase<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const t0 = Date.now();
  const v = await fn();
  timings.push([name, Date.now() - t0]);
  say(`ok  ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  return v;
}

function check(cond: unknown, what: string): asserts cond {
  if (!cond) throw new Error(`check failed: ${what}`);
}

const temporalCli = (s: ProductionStack, ...args: string[]) =>
  run(tool('temporal', 'TEMPORAL_BIN'), [
    ...args,
    '--address',
    s.temporal.address,
    '--namespace',
    s.temporal.namespace,
  ]);

/** Starts a workflow nobody runs, finds it by a Kiln search attribute, terminates it. */
async function temporalRoundTrip(s: ProductionStack): Promise<void> {
  const connection = await Connection.connect({ address: s.temporal.address });
  try {
    const client = new Client({ connection, namespace: s.temporal.namespace });
    const owner = `smoke-${randomUUID()}`;
    const handle = await client.workflow.start('kilnSmokeNoWorker', {
      taskQueue: 'kiln-smoke',
      workflowId: owner,
      args: [],
      searchAttributes: { [SEARCH_ATTRIBUTES.owner]: [owner], [SEARCH_ATTRIBUTES.status]: ['queued'] },
    });
    await waitUntil(
      'visibility',
      async () => {
        for await (const wf of client.workflow.list({ query: `${SEARCH_ATTRIBUTES.owner} = '${owner}'` }))
          return wf.workflowId === owner;
        return false;
      },
      { timeoutMs: 20_000, intervalMs: 250 },
    );
    await handle.terminate('smoke check');
    check((await handle.describe()).status.name === 'TERMINATED', 'workflow terminated');
  } finally {
    await connection.close();
  }
}

async function redisRoundTrip(s: ProductionStack): Promise<void> {
  const cluster = new Cluster(
    s.redis.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })),
    { redisOptions: { connectTimeout: 2000 } },
  );
  try {
    const keys = Array.from({ length: 200 }, (_, i) => `smoke:${i}`);
    await Promise.all(keys.map((k, i) => cluster.set(k, String(i))));
    const values = await Promise.all(keys.map((k) => cluster.get(k)));
    check(
      values.every((v, i) => v === String(i)),
      'redis cluster round trip of 200 keys',
    );
  } finally {
    cluster.disconnect();
  }
}

async function drills(s: ProductionStack): Promise<void> {
  // 1. kill -9 a Redis primary: its replica must take over its slots (node timeout 5 s).
  const [victim] = await s.redis.masters();
  await phase(`drill: kill -9 redis primary ${victim.port} -> replica promoted, cluster ok`, async () => {
    await victim.kill();
    // Until the others flag it failed (node timeout 5 s) and a replica owns its slots.
    await waitUntil(
      'failover',
      async () => {
        const m = await s.redis.masters();
        return m.length === 3 && !m.includes(victim);
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    await s.redis.waitHealthy(30_000);
    await redisRoundTrip(s);
  });
  await phase('drill: restart the killed node -> rejoins as a replica', async () => {
    await victim.start();
    await s.redis.waitHealthy(30_000);
    const me = (await s.redis.topology()).find((t) => t.port === victim.port);
    check(me?.role === 'replica', `node ${victim.port} rejoined as a replica (is ${me?.role})`);
  });
  // 2. The Temporal server: a graceful restart, then a crash.
  await phase('drill: temporal-server graceful restart', async () => {
    await s.temporal.stop();
    await s.temporal.start();
    await temporalRoundTrip(s);
  });
  await phase('drill: temporal-server kill -9 + start', async () => {
    await s.temporal.kill();
    await s.temporal.start();
    await temporalRoundTrip(s);
  });
  // 3. PostgreSQL crash under a running Temporal server: crash recovery, then Temporal reconnects.
  await phase('drill: postgres kill -9 + start, temporal recovers', async () => {
    await s.postgres.kill();
    await s.postgres.start();
    await waitUntil('temporal after postgres restart', () => temporalRoundTrip(s).then(() => true), {
      timeoutMs: 60_000,
      intervalMs: 1000,
    });
  });
}

async function strays(pids: number[]): Promise<string[]> {
  const out = await run('ps', ['-eo', 'pid=,stat=,args=']);
  return out.split('\n').filter((l) => {
    const [pid, stat] = l.trim().split(/\s+/);
    // Zombies (Z) are already dead; the container's init reaps them.
    return pids.includes(Number(pid)) && !stat.startsWith('Z');
  });
}

async function main(): Promise<void> {
  const s = await phase('start stack', () =>
    startProductionStack({ dir: arg('--dir'), fresh: argv.includes('--fresh'), log: (l) => say(`    ${l}`) }),
  );
  const allProcs = () => [s.postgres.proc, s.temporal.proc, s.s3.proc, ...s.redis.nodes.map((n) => n.proc)];
  const pids = new Set<number>();
  const notePids = () =>
    allProcs().forEach((p) => {
      const pid = p.pid();
      if (pid) pids.add(pid);
    });
  notePids();
  try {
    await phase('temporal CLI: workflow list / cluster health / search attributes', async () => {
      await temporalCli(s, 'workflow', 'list');
      check(
        (
          await run(tool('temporal', 'TEMPORAL_BIN'), [
            'operator',
            'cluster',
            'health',
            '--address',
            s.temporal.address,
          ])
        ).includes('SERVING'),
        'cluster health SERVING',
      );
      const sa = await temporalCli(s, 'operator', 'search-attribute', 'list');
      check(
        Object.values(SEARCH_ATTRIBUTES).every((n) => new RegExp(`${n}\\s+Keyword`).test(sa)),
        'Kiln search attributes are Keyword',
      );
    });
    await phase('temporal: start (no worker) + visibility query by KilnOwner + terminate', () => temporalRoundTrip(s));
    await phase('redis: redis-cli -c across slots, 3 masters + 3 replicas', async () => {
      const p1 = String(s.redis.nodes[0].port);
      const cli = tool('redis-cli', 'REDIS_CLI_BIN');
      for (const k of ['a', 'b', 'c', 'd', 'e', 'f'])
        check((await run(cli, ['-c', '-p', p1, 'set', k, '1'])).trim() === 'OK', `redis-cli -c set ${k}`);
      const nodes = await run(cli, ['-p', p1, 'cluster', 'nodes']);
      const masters = nodes.split('\n').filter((l) => / (myself,)?master /.test(l)).length;
      const replicas = nodes.split('\n').filter((l) => / (myself,)?slave /.test(l)).length;
      check(masters === 3 && replicas === 3, `3 masters + 3 replicas (saw ${masters} + ${replicas})`);
      await redisRoundTrip(s);
    });
    await phase('s3: put + get an object', async () => {
      const c = new S3Client({
        endpoint: s.s3.endpoint,
        region: s.s3.region,
        forcePathStyle: true,
        credentials: { accessKeyId: s.s3.accessKeyId, secretAccessKey: s.s3.secretAccessKey },
      });
      await c.send(new PutObjectCommand({ Bucket: s.s3.bucket, Key: 'smoke.txt', Body: 'kiln' }));
      const got = await (
        await c.send(new GetObjectCommand({ Bucket: s.s3.bucket, Key: 'smoke.txt' }))
      ).Body?.transformToString();
      check(got === 'kiln', 's3 round trip');
    });
    if (argv.includes('--drills')) {
      await drills(s);
      notePids();
    }
  } finally {
    notePids();
    await phase('stop stack', () => s.stop());
  }
  const left = await strays([...pids]);
  check(left.length === 0, `no stray processes (left: ${left.join('; ')})`);
  say('no stray processes');
  console.log(
    [
      'Phase timings:',
      ...timings.map(([n, ms]) => `  ${(ms / 1000).toFixed(1).padStart(6)} s  ${n}`),
      `  start-up breakdown: ${Object.entries(s.timings)
        .map(([k, v]) => `${k} ${(v / 1000).toFixed(1)}s`)
        .join(', ')}`,
    ].join('\n'),
  );
}

main().catch((err) => {
  console.error(
    `[smoke] FAILED: ${err instanceof Error ? err.message : err}` +
      (err?.cause ? ` (cause: ${err.cause.message ?? err.cause})` : ''),
  );
  process.exit(1);
});
