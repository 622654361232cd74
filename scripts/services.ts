// Starts the real backing services (redis-server, the Temporal dev server) on free ports.
// Used by `npm run dev` and by the test setup; binaries come from .tools/bin (scripts/bootstrap.sh).
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, openSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { Redis } from 'ioredis';
import { Connection } from '@temporalio/client';
import { SEARCH_ATTRIBUTES } from '../src/shared/task.js';
import { PROJECT_ROOT } from '../src/infra/project-root.js';

// The project's root whether this runs from source or compiled (dist/server/scripts, for `npm run dev`).
export const ROOT = PROJECT_ROOT;

export function binary(name: 'temporal' | 'redis-server', envVar: string): string {
  const fromEnv = process.env[envVar];
  if (fromEnv) return fromEnv;
  const local = join(ROOT, '.tools', 'bin', name);
  if (existsSync(local)) return local;
  return name; // on PATH, or spawn fails with a message naming it
}

export function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => res(port));
    });
  });
}

async function waitFor(
  what: string,
  check: () => Promise<boolean>,
  child: ChildProcess,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${what} exited with code ${child.exitCode} during start-up`);
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 150));
  }
  throw new Error(`${what} did not become ready within ${timeoutMs} ms`);
}

/** Signals a child and waits for it to exit; SIGKILL after `graceMs`. */
export function stopChild(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM', graceMs = 5000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((res) => {
    const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(t);
      res();
    });
    child.kill(signal);
  });
}

export interface Service {
  url: string;
  port: number;
  stop(signal?: NodeJS.Signals): Promise<void>;
  start(): Promise<void>;
}

export interface RedisService extends Service {
  /**
   * Its Unix socket (`dir`/redis.sock), for Kiln processes on this machine: REDIS_URL takes the
   * path. Undefined when the path is too long for a socket address (108 bytes on Linux).
   */
  socket?: string;
}

/** The longest socket path Linux's sockaddr_un holds (108 bytes, one for the terminating NUL). */
export const MAX_SOCKET_PATH = 107;

/** Redis's socket in `dir`, or undefined when its path would not fit a socket address. */
export function redisSocketIn(dir: string): string | undefined {
  const path = join(dir, 'redis.sock');
  return Buffer.byteLength(path) <= MAX_SOCKET_PATH ? path : undefined;
}

/**
 * Redis settings for Kiln's data, on every redis-server Kiln's scripts start. A task's hash (its
 * record, list entry, owner, status: ~1.3 KB) has values over the 64 bytes up to which Redis keeps a
 * hash as one compact listpack; at 1,024 it stays one, 1,460 bytes a task against 1,996 as a hash
 * table (10,000 task hashes, used_memory). A longer record falls back to a hash table, as before.
 */
export const REDIS_SIZING_ARGS = ['--hash-max-listpack-value', '1024'];

/**
 * redis-server with an append-only file in `dir`, so a restart keeps its data. It listens on
 * loopback TCP and on a Unix socket in `dir`, only for this user (mode 700).
 */
export async function startRedis(opts: {
  dir: string;
  port?: number;
  persist?: boolean;
  quiet?: boolean;
}): Promise<RedisService> {
  mkdirSync(opts.dir, { recursive: true });
  const port = opts.port ?? (await freePort());
  const url = `redis://127.0.0.1:${port}`;
  const socket = redisSocketIn(opts.dir);
  let child: ChildProcess;
  const start = async () => {
    const args = [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      opts.dir,
      '--save',
      '',
      '--appendonly',
      opts.persist === false ? 'no' : 'yes',
      ...REDIS_SIZING_ARGS,
      ...(socket ? ['--unixsocket', socket, '--unixsocketperm', '700'] : []),
    ];
    child = spawn(binary('redis-server', 'REDIS_SERVER_BIN'), args, {
      stdio: opts.quiet === false ? 'inherit' : 'ignore',
    });
    child.on('error', (err) => {
      throw new Error(`cannot start redis-server (${err.message}); run npm run bootstrap`);
    });
    await waitFor(
      'redis-server',
      async () => {
        const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
        r.on('error', () => undefined); // not up yet: the next check tries again
        try {
          await r.connect();
          return (await r.ping()) === 'PONG';
        } finally {
          r.disconnect();
        }
      },
      child,
      15_000,
    );
  };
  await start();
  return { url, port, ...(socket ? { socket } : {}), start, stop: (signal) => stopChild(child, signal) };
}

/**
 * SQLite pragmas for the dev server. WAL lets readers (visibility, polls) proceed during writes;
 * synchronous=NORMAL syncs at checkpoints instead of every commit: a power cut may lose the last
 * moments, a process crash loses nothing. KILN_SQLITE_PRAGMAS overrides (comma-separated, "" for none).
 */
export const DEV_SQLITE_PRAGMAS = (process.env.KILN_SQLITE_PRAGMAS ?? 'journal_mode=wal,synchronous=normal')
  .split(',')
  .filter(Boolean);

/**
 * What a single-cluster Temporal server need not hold (issue 42), for the dev server and the
 * production-shaped one alike. Measured on the dev server after 3,000 tasks (bench:memory's phases,
 * 2026-11-29): Temporal 237 MiB against 197 with both, for the same server CPU a task (26.5–26.7 ms
 * against 27.2):
 *   - the cross-cluster (XDC) cache kept 8 MiB of serialized history batches, ~17 MiB of Go heap
 *     with its entries, for replication to other clusters, which a single cluster never reads:
 *     at its floor (64 KiB) Temporal held 209–214 MiB, not 237;
 *   - the history queues' task schedulers ran 512 goroutines each (transfer, timer, visibility;
 *     replication 512 + 128), whose stacks grow under load and stay grown: 32 each (8 for
 *     replication and in-memory timers) held 222 MiB, 3,173 goroutines → 1,053, stacks 22 → 12 MiB.
 *     The dev server has one shard on one SQLite file; 3,000 tasks ran at the same rate (39.2
 *     against 38.8 a second). The production-shaped server's drills pass with them, and
 *     `npm run bench:production` ran 16.5–18.8 tasks/s on two vCPUs with them (BENCHMARKS.md); at a
 *     busy deployment's rates, raise them if `task_latency_queue` grows.
 */
export const LEAN_HISTORY_CONFIG: Record<string, unknown> = {
  'history.xdcCacheMaxSizeBytes': 64 * 1024,
  'history.transferProcessorSchedulerWorkerCount': 32,
  'history.timerProcessorSchedulerWorkerCount': 32,
  'history.visibilityProcessorSchedulerWorkerCount': 32,
  'history.memoryTimerProcessorSchedulerWorkerCount': 8,
  'history.ReplicationProcessorSchedulerWorkerCount': 8,
  'history.ReplicationLowPriorityProcessorSchedulerWorkerCount': 8,
};

/**
 * The dev server sized for a gateway (issue 42; `npm run bench:memory` measures it):
 *   - its history cache kept up to 128,000 workflows' mutable state for an hour; a gateway's
 *     workflows are short, and one whose state was evicted is read back from SQLite;
 *   - one partition per task queue instead of 4: a single server gains nothing from spreading a
 *     queue, and each partition is a queue manager of its own;
 *   - its search-attribute cache on, as a production server has it: the dev server reads the
 *     cluster metadata from SQLite on every use instead (5–7 reads a task, counted by
 *     `npm run bench:server-ops`), so that attributes added while it runs are seen at once. Kiln's
 *     are registered at start (`--search-attribute`); the forced reads cost ~9 % more server CPU a task.
 * KILN_TEMPORAL_DYNAMIC_CONFIG (a JSON object) adds to or replaces these.
 */
export const DEV_DYNAMIC_CONFIG: Record<string, unknown> = {
  'history.hostLevelCacheMaxSize': 512,
  ...LEAN_HISTORY_CONFIG,
  'matching.numTaskqueueReadPartitions': 1,
  'matching.numTaskqueueWritePartitions': 1,
  'system.forceSearchAttributesCacheRefreshOnRead': false,
  ...(process.env.KILN_TEMPORAL_DYNAMIC_CONFIG ? JSON.parse(process.env.KILN_TEMPORAL_DYNAMIC_CONFIG) : {}),
};

/**
 * Go's collector for the dev server: a heap goal of 1.5× the live heap (GOGC=50), not 2×. Measured
 * on the production form (bench:memory, 2026-11-27): Temporal 176 MiB idle and 209 at its peak
 * instead of 213 and 268, for 26.3 ms of server CPU per task against 24.9 (run-to-run noise is
 * ~3 ms). A soft limit (GOMEMLIMIT=100MiB) saved ~25 MiB more but cost 33–57 % more server CPU
 * per task: the live heap under load is near it, so it is not set. The operator's own GOGC or
 * GOMEMLIMIT wins.
 */
export const DEV_GO_ENV: Record<string, string> = { GOGC: process.env.GOGC ?? '50' };

/** The Temporal dev server with a SQLite file, Kiln's search attributes registered, UI optional. */
export async function startTemporal(opts: {
  dbFile: string;
  port?: number;
  uiPort?: number;
  ui?: boolean;
  quiet?: boolean;
  codecEndpoint?: string;
  pragmas?: string[];
  /** Server dynamic config (`--dynamic-config-value KEY=JSON`), e.g. system.enableActivityEagerExecution: true. */
  dynamicConfig?: Record<string, unknown>;
  /** Where the server serves its Prometheus metrics (`/metrics`); none when unset. */
  metricsPort?: number;
}): Promise<Service & { uiUrl?: string }> {
  mkdirSync(dirname(opts.dbFile), { recursive: true });
  const port = opts.port ?? (await freePort());
  const uiPort = opts.ui ? (opts.uiPort ?? (await freePort())) : undefined;
  const address = `127.0.0.1:${port}`;
  let child: ChildProcess;
  const start = async () => {
    const args = [
      'server',
      'start-dev',
      '--ip',
      '127.0.0.1',
      '--port',
      String(port),
      '--db-filename',
      opts.dbFile,
      '--log-level',
      'error',
      ...(opts.metricsPort ? ['--metrics-port', String(opts.metricsPort)] : []),
      ...(opts.pragmas ?? DEV_SQLITE_PRAGMAS).flatMap((p) => ['--sqlite-pragma', p]),
      ...Object.values(SEARCH_ATTRIBUTES).flatMap((n) => ['--search-attribute', `${n}=Keyword`]),
      // A caller's value replaces the default of the same key: each key is passed once.
      ...Object.entries({ ...DEV_DYNAMIC_CONFIG, ...opts.dynamicConfig }).flatMap(([k, v]) => [
        '--dynamic-config-value',
        `${k}=${JSON.stringify(v)}`,
      ]),
      ...(uiPort
        ? ['--ui-port', String(uiPort), ...(opts.codecEndpoint ? ['--ui-codec-endpoint', opts.codecEndpoint] : [])]
        : ['--headless']),
    ];
    // The server logs errors while it (or a test) shuts things down; keep them in a file beside the database.
    const logFd = opts.quiet === false ? 'inherit' : openSync(`${opts.dbFile}.log`, 'a');
    child = spawn(binary('temporal', 'TEMPORAL_BIN'), args, {
      stdio: ['ignore', logFd, logFd],
      env: { ...process.env, ...DEV_GO_ENV },
    });
    child.on('error', (err) => {
      throw new Error(`cannot start the Temporal CLI (${err.message}); run npm run bootstrap`);
    });
    await waitFor(
      'temporal dev server',
      async () => {
        const c = await Connection.connect({ address, connectTimeout: 1000 });
        try {
          await c.workflowService.getSystemInfo({});
          // The namespace is usable only once its search attributes are listed.
          const sa = await c.operatorService.listSearchAttributes({ namespace: 'default' });
          return Object.values(SEARCH_ATTRIBUTES).every((n) => n in (sa.customAttributes ?? {}));
        } finally {
          await c.close();
        }
      },
      child,
      60_000,
    );
  };
  await start();
  return {
    url: address,
    port,
    start,
    stop: (signal) => stopChild(child, signal),
    ...(uiPort ? { uiUrl: `http://127.0.0.1:${uiPort}` } : {}),
  };
}

/**
 * A dev server's Prometheus counters (`metricsPort` of startTemporal) of the given families, summed
 * by `<family> <service> <operation>`. The server hands them over about once a second.
 */
export async function temporalCounters(metricsPort: number, families: string[]): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^(\w+)\{(.*)\} (\S+)$/.exec(line);
    if (!m || !families.includes(m[1])) continue;
    const label = (name: string) => new RegExp(`${name}="([^"]*)"`).exec(m[2])?.[1] ?? '-';
    const key = `${m[1]} ${label('service_name')} ${label('operation')}`;
    out.set(key, (out.get(key) ?? 0) + Number(m[3]));
  }
  if (!out.size) throw new Error(`no Temporal server counters at 127.0.0.1:${metricsPort}/metrics`);
  return out;
}
