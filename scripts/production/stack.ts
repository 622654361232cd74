// A production-shaped backing stack on loopback, without Docker: PostgreSQL 15, the real Temporal
// server on it, a 6-node Redis Cluster and an S3 (moto) server. Binaries: scripts/production/install.sh.
//
//   npm run stack:production              # start, print addresses, stay up until Ctrl-C
//   tsx scripts/production/stack.ts --fresh --shards 8 --dir /tmp/kiln-prod
//
// State (PostgreSQL data, Redis AOF + nodes.conf, Temporal config, logs) lives under --dir
// (default .data/production/) and survives restarts; --fresh wipes it first. S3 (moto) is in memory.
// Each component's handle has start/stop/kill (kill = SIGKILL) for failure drills.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { freePort, ROOT } from '../services.js';
import { startPostgres, type Postgres } from './postgres.js';
import { freePorts, isFree, Proc, tool, waitUntil } from './proc.js';
import { startRedisCluster, type RedisCluster } from './redis-cluster.js';
import { startTemporalServer, type TemporalServer } from './temporal-server.js';

export interface S3Server {
  endpoint: string;
  region: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
  proc: Proc;
  /** Restarts moto; its buckets live in memory, so the bucket is created again. */
  start(): Promise<void>;
  stop(signal?: NodeJS.Signals): Promise<void>;
  kill(): Promise<void>;
}

export interface ProductionStackOptions {
  dir?: string;
  /** Wipe the state directory first. */
  fresh?: boolean;
  /** Temporal history shards; fixed once the database exists (use fresh to change it). */
  numHistoryShards?: number;
  redisNodes?: number;
  redisReplicas?: number;
  namespace?: string;
  /** Progress lines (default: none). */
  log?: (line: string) => void;
}

export interface ProductionStack {
  dir: string;
  postgres: Postgres;
  temporal: TemporalServer;
  redis: RedisCluster;
  s3: S3Server;
  /** Environment for Kiln's API and worker processes against this stack. */
  env: Record<string, string>;
  /** Milliseconds each phase of start-up took. */
  timings: Record<string, number>;
  stop(): Promise<void>;
}

interface SavedState {
  pgPort: number;
  redisPorts: number[];
  redisBusPorts: number[];
  numHistoryShards: number;
}

async function timed<T>(
  timings: Record<string, number>,
  name: string,
  log: (l: string) => void,
  fn: () => Promise<T>,
): Promise<T> {
  const t0 = Date.now();
  const v = await fn();
  timings[name] = Date.now() - t0;
  log(`${name} ready in ${(timings[name] / 1000).toFixed(1)} s`);
  return v;
}

export async function startS3(opts: { dir: string; port: number; bucket?: string }): Promise<S3Server> {
  mkdirSync(opts.dir, { recursive: true });
  const endpoint = `http://127.0.0.1:${opts.port}`;
  const s = {
    endpoint,
    region: 'us-east-1',
    bucket: opts.bucket ?? 'kiln',
    accessKeyId: 'test',
    secretAccessKey: 'test',
  };
  const proc = new Proc(
    'moto_server',
    tool('moto_server', 'MOTO_SERVER_BIN'),
    ['-H', '127.0.0.1', '-p', String(opts.port)],
    join(opts.dir, 'moto.log'),
  );
  const client = new S3Client({
    endpoint,
    region: s.region,
    forcePathStyle: true,
    credentials: { accessKeyId: s.accessKeyId, secretAccessKey: s.secretAccessKey },
  });
  const start = async () => {
    proc.start();
    await waitUntil('moto_server', async () => (await fetch(`${endpoint}/moto-api/`)).ok, { proc, timeoutMs: 60_000 });
    await client.send(new CreateBucketCommand({ Bucket: s.bucket }));
  };
  await start();
  return { ...s, proc, start, stop: (signal) => proc.stop(signal), kill: () => proc.kill() };
}

export async function startProductionStack(opts: ProductionStackOptions = {}): Promise<ProductionStack> {
  const dir = resolve(opts.dir ?? join(ROOT, '.data', 'production'));
  const log = opts.log ?? (() => undefined);
  if (opts.fresh) rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const stateFile = join(dir, 'stack.json');
  const saved: Partial<SavedState> = existsSync(stateFile) ? JSON.parse(readFileSync(stateFile, 'utf8')) : {};
  const numHistoryShards = opts.numHistoryShards ?? saved.numHistoryShards ?? 4;
  if (saved.numHistoryShards && saved.numHistoryShards !== numHistoryShards) {
    throw new Error(
      `${dir} holds a Temporal database with ${saved.numHistoryShards} history ` +
        `shards; pass fresh to recreate it with ${numHistoryShards}`,
    );
  }

  // Ports are kept across runs when still free: Redis nodes find each other by the ports in
  // nodes.conf, so new ports mean a new (empty) cluster.
  const redisCount = opts.redisNodes ?? 6;
  let redisPorts = saved.redisPorts ?? [];
  let redisBusPorts = saved.redisBusPorts ?? [];
  const redisReused =
    redisPorts.length === redisCount &&
    redisBusPorts.length === redisCount &&
    (await Promise.all([...redisPorts, ...redisBusPorts].map(isFree))).every(Boolean);
  if (!redisReused) {
    const ports = await freePorts(2 * redisCount);
    [redisPorts, redisBusPorts] = [ports.slice(0, redisCount), ports.slice(redisCount)];
  }
  const pgPort = saved.pgPort && (await isFree(saved.pgPort)) ? saved.pgPort : await freePort();
  const state: SavedState = { pgPort, redisPorts, redisBusPorts, numHistoryShards };
  writeFileSync(stateFile, `${JSON.stringify(state, null, 2)}\n`);

  const timings: Record<string, number> = {};
  const dbUser = 'temporal';
  const dbPassword = process.env.KILN_TEMPORAL_DB_PASSWORD ?? 'temporal';
  const started: { stop(): Promise<void> }[] = [];
  let temporalHandle: TemporalServer | undefined;
  const stopAll = async () => {
    // Temporal first (it holds PostgreSQL connections), then the rest together.
    const t0 = Date.now();
    const temporal = started.find((s) => s === temporalHandle);
    if (temporal) {
      await temporal.stop();
      log(`temporal-server stopped in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    }
    await Promise.all(started.filter((s) => s !== temporalHandle).map((s) => s.stop()));
    log(`all stopped in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  };

  try {
    const t0 = Date.now();
    const [postgres, redis, s3] = await Promise.all([
      timed(timings, 'postgres', log, async () => {
        const pg = await startPostgres({
          dir: join(dir, 'postgres'),
          port: pgPort,
          user: dbUser,
          password: dbPassword,
        });
        started.push(pg);
        return pg;
      }),
      timed(timings, 'redis-cluster', log, async () => {
        const r = await startRedisCluster({
          dir: join(dir, 'redis'),
          ports: redisPorts,
          busPorts: redisBusPorts,
          replicas: opts.redisReplicas ?? 1,
          fresh: !redisReused,
        });
        started.push(r);
        return r;
      }),
      timed(timings, 's3', log, async () => {
        const s = await startS3({ dir: join(dir, 's3'), port: await freePort() });
        started.push(s);
        return s;
      }),
    ]);
    const temporal = await timed(timings, 'temporal-server', log, async () => {
      temporalHandle = await startTemporalServer({
        dir: join(dir, 'temporal'),
        pg: postgres,
        dbUser,
        dbPassword,
        namespace: opts.namespace,
        numHistoryShards,
      });
      started.push(temporalHandle);
      return temporalHandle;
    });
    timings.total = Date.now() - t0;

    const env: Record<string, string> = {
      TEMPORAL_ADDRESS: temporal.address,
      TEMPORAL_NAMESPACE: temporal.namespace,
      REDIS_CLUSTER_NODES: redis.nodeList,
      BLOB_STORE: 's3',
      S3_ENDPOINT: s3.endpoint,
      S3_BUCKET: s3.bucket,
      S3_REGION: s3.region,
      S3_ACCESS_KEY_ID: s3.accessKeyId,
      S3_SECRET_ACCESS_KEY: s3.secretAccessKey,
      S3_FORCE_PATH_STYLE: 'true',
    };
    // For shells and the next step (Kiln's own processes): `set -a; . .data/production/stack.env`.
    writeFileSync(
      join(dir, 'stack.env'),
      Object.entries(env)
        .map(([k, v]) => `${k}=${v}`)
        .join('\n') + '\n',
    );
    return { dir, postgres, temporal, redis, s3, env, timings, stop: stopAll };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

async function main(argv: string[]): Promise<void> {
  const arg = (name: string) => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  if (argv.includes('--help')) {
    console.log('usage: tsx scripts/production/stack.ts [--dir DIR] [--fresh] [--shards N]');
    return;
  }
  const log = (l: string) => console.error(`[production] ${l}`);
  const stack = await startProductionStack({
    dir: arg('--dir'),
    fresh: argv.includes('--fresh'),
    numHistoryShards: arg('--shards') ? Number(arg('--shards')) : undefined,
    log,
  });
  const pids = (p: Proc) => p.pid() ?? '-';
  console.log(
    [
      `Temporal    ${stack.temporal.address}  namespace ${stack.temporal.namespace}  ` +
        `(pid ${pids(stack.temporal.proc)}, HTTP ${stack.temporal.httpUrl}, metrics ${stack.temporal.metricsUrl})`,
      `PostgreSQL  127.0.0.1:${stack.postgres.port}  ` +
        `(pid ${pids(stack.postgres.proc)}, socket dir ${stack.postgres.socketDir})`,
      `Redis       ${stack.redis.nodeList}  (pids ${stack.redis.nodes.map((n) => pids(n.proc)).join(' ')})`,
      `S3 (moto)   ${stack.s3.endpoint}  bucket ${stack.s3.bucket}  (pid ${pids(stack.s3.proc)})`,
      `State       ${stack.dir}   env: ${join(stack.dir, 'stack.env')}`,
      `Started in  ${Object.entries(stack.timings)
        .map(([k, v]) => `${k} ${(v / 1000).toFixed(1)}s`)
        .join(', ')}`,
      'Ctrl-C stops everything.',
    ].join('\n'),
  );
  // Ctrl-C reaches tsx and this process both, and tsx relays it again: the listeners stay, so a
  // repeated signal cannot take Node's default exit halfway through the stop and orphan servers.
  let signals = 0;
  await new Promise<void>((res) => {
    const onSignal = () => {
      if (++signals === 1) return res();
      if (signals >= 3) process.exit(130); // impatient: the 'exit' hook SIGKILLs every server
      log('already stopping; Ctrl-C once more kills everything now');
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
  log('stopping');
  await stack.stop();
  log('stopped');
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main(process.argv.slice(2)).catch((err) => {
    console.error(`[production] ${err instanceof Error ? err.message : err}`);
    process.exit(1);
  });
}
