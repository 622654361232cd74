// Kiln itself on the production-shaped stack: API processes (src/api/main.ts, each API_PROCESSES=1 on
// its own port, so a drill can kill -9 one PID) and worker processes (src/worker/main.ts), as separate
// OS processes with their own log files. Used by test/production/ and bench/production.ts.
//
// Redis: KILN_PRODUCTION_REDIS=cluster passes the stack's REDIS_CLUSTER_NODES (needs Kiln's
// Redis Cluster support in src/config/env.ts); single runs against one redis-server (REDIS_URL).
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, ROOT, startRedis, type Service } from '../services.js';
import { Proc, waitUntil } from './proc.js';
import { startProductionStack, type ProductionStack } from './stack.js';

export type RedisMode = 'single' | 'cluster';

/** Whether Kiln's configuration knows REDIS_CLUSTER_NODES (the Redis Cluster client has landed). */
export function kilnSupportsRedisCluster(): boolean {
  return readFileSync(join(ROOT, 'src', 'config', 'env.ts'), 'utf8').includes('REDIS_CLUSTER_NODES');
}

/** KILN_PRODUCTION_REDIS, else cluster when Kiln supports it, else single. */
export function redisMode(): RedisMode {
  const v = process.env.KILN_PRODUCTION_REDIS;
  if (v === 'single' || v === 'cluster') return v;
  if (v) throw new Error(`KILN_PRODUCTION_REDIS is single or cluster, not ${v}`);
  return kilnSupportsRedisCluster() ? 'cluster' : 'single';
}

export interface KilnProcess {
  name: string;
  /** Base URL (API processes only). */
  url: string;
  proc: Proc;
  pid(): number | undefined;
  /** (Re)starts it and waits until it serves (API: /healthz; worker: its "running" log line). */
  start(): Promise<void>;
  stop(): Promise<void>;
  kill(): Promise<void>;
}

export interface KilnDeployment {
  apis: KilnProcess[];
  workers: KilnProcess[];
  env: Record<string, string>;
  dir: string;
  stop(): Promise<void>;
}

export interface KilnDeploymentOptions {
  /** The stack's env (TEMPORAL_ADDRESS, S3_*, REDIS_CLUSTER_NODES). */
  stackEnv: Record<string, string>;
  redis: { mode: 'single'; url: string } | { mode: 'cluster'; nodes: string };
  dir: string;
  models: unknown[];
  apis?: number;
  workers?: number;
  env?: Record<string, string>;
  /**
   * A prebuilt workflow bundle: workers then run test/support/worker-process.ts (the same
   * startWorkers as src/worker/main.ts, without bundling the workflows at every start), so a drill can
   * restart a killed worker in seconds on a loaded 2-core machine. Default: src/worker/main.ts.
   */
  workflowBundle?: string;
}

const count = (file: string, text: string) =>
  existsSync(file) ? readFileSync(file, 'utf8').split(text).length - 1 : 0;

export async function startKilnDeployment(opts: KilnDeploymentOptions): Promise<KilnDeployment> {
  mkdirSync(opts.dir, { recursive: true });
  const modelsFile = join(opts.dir, 'models.json');
  writeFileSync(modelsFile, JSON.stringify({ models: opts.models }, null, 2));
  const tag = randomBytes(4).toString('hex');
  const { REDIS_CLUSTER_NODES: _nodes, ...stackEnv } = opts.stackEnv;
  const env: Record<string, string> = {
    ...stackEnv,
    ...(opts.redis.mode === 'single' ? { REDIS_URL: opts.redis.url } : { REDIS_CLUSTER_NODES: opts.redis.nodes }),
    KILN_SECRET: randomBytes(32).toString('hex'),
    REDIS_PREFIX: `p${tag}:`,
    TEMPORAL_TASK_QUEUE: `kiln-${tag}`,
    MODELS_FILE: modelsFile,
    RATE_LIMIT_TASK_MS: '0',
    RATE_LIMIT_BATCH_MS: '0',
    MAX_UNFINISHED_TASKS: '100000',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    ...opts.env,
  };
  const entry = (file: string) => ['--import', 'tsx', join(ROOT, file)];

  const apis: KilnProcess[] = [];
  for (let i = 0; i < (opts.apis ?? 2); i++) {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const proc = new Proc(`api-${i}`, process.execPath, entry('src/api/main.ts'), join(opts.dir, `api-${i}.log`), {
      cwd: ROOT,
      env: { ...env, PORT: String(port), API_PROCESSES: '1', PUBLIC_BASE_URL: url },
    });
    const start = async () => {
      proc.start();
      await waitUntil(proc.name, async () => (await fetch(`${url}/healthz`)).ok, { proc, timeoutMs: 180_000 });
    };
    apis.push({
      name: proc.name,
      url,
      proc,
      pid: () => proc.pid(),
      start,
      stop: () => proc.stop(),
      kill: () => proc.kill(),
    });
  }
  const workers: KilnProcess[] = [];
  for (let i = 0; i < (opts.workers ?? 2); i++) {
    const log = join(opts.dir, `worker-${i}.log`);
    // src/worker/main.ts: the "running" line is at info; the SDK's own chatter stays at WARN.
    const [file, readyText] = opts.workflowBundle
      ? ['test/support/worker-process.ts', 'worker-ready']
      : ['src/worker/main.ts', 'kiln worker running'];
    const proc = new Proc(`worker-${i}`, process.execPath, entry(file), log, {
      cwd: ROOT,
      env: {
        ...env,
        LOG_LEVEL: 'info',
        ...(opts.workflowBundle ? { KILN_WORKFLOW_BUNDLE: opts.workflowBundle } : {}),
      },
    });
    const start = async () => {
      const before = count(log, readyText);
      proc.start();
      await waitUntil(proc.name, async () => count(log, readyText) > before, {
        proc,
        timeoutMs: 180_000,
        intervalMs: 250,
      });
    };
    workers.push({
      name: proc.name,
      url: '',
      proc,
      pid: () => proc.pid(),
      start,
      stop: () => proc.stop(),
      kill: () => proc.kill(),
    });
  }
  const all = [...apis, ...workers];
  try {
    await Promise.all(all.map((p) => p.start()));
  } catch (err) {
    await Promise.all(all.map((p) => p.kill()));
    throw err;
  }
  return { apis, workers, env, dir: opts.dir, stop: async () => void (await Promise.all(all.map((p) => p.stop()))) };
}

export interface Backing {
  stack: ProductionStack;
  mode: RedisMode;
  redis: KilnDeploymentOptions['redis'];
  /** The single redis-server (mode single). */
  single?: Service;
  /**
   * Ports of the Redis nodes that execute Kiln's commands (the primaries in cluster mode; replicas only replay them).
   */
  redisPorts(): Promise<number[]>;
  stop(): Promise<void>;
}

/** The production-shaped stack, plus one redis-server when Kiln runs in single-Redis mode. */
export async function startBacking(opts: {
  dir: string;
  fresh?: boolean;
  numHistoryShards?: number;
  mode?: RedisMode;
  log?: (l: string) => void;
}): Promise<Backing> {
  const mode = opts.mode ?? redisMode();
  const stack = await startProductionStack({
    dir: opts.dir,
    fresh: opts.fresh,
    numHistoryShards: opts.numHistoryShards,
    log: opts.log,
  });
  let single: Service | undefined;
  try {
    if (mode === 'single') single = await startRedis({ dir: join(stack.dir, 'redis-single') });
  } catch (err) {
    await stack.stop();
    throw err;
  }
  return {
    stack,
    mode,
    single,
    redis: single ? { mode: 'single', url: single.url } : { mode: 'cluster', nodes: stack.redis.nodeList },
    redisPorts: async () => (single ? [single.port] : (await stack.redis.masters()).map((n) => n.port)),
    stop: async () => {
      await Promise.all([stack.stop(), single?.stop()]);
    },
  };
}
