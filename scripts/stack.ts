// A whole Kiln on this machine for the fuzz and soak runs: its own redis-server and Temporal dev
// server (in a temporary directory), one worker process and one API process, all on loopback.
// Process logs go to files in that directory, so a failure can be traced to its server-side cause.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, ROOT, startRedis, startTemporal, stopChild } from './services.js';

export interface Stack {
  base: string;
  dir: string;
  redisUrl: string;
  api: ChildProcess;
  worker: ChildProcess;
  /** Path of a process's log (pino JSON at the configured LOG_LEVEL), e.g. for the causes of 500s. */
  logFile: (which: 'api' | 'worker') => string;
  stop(opts?: { keepDir?: boolean }): Promise<void>;
}

async function waitHttp(url: string, children: ChildProcess[], timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const dead = children.find((c) => c.exitCode !== null);
    if (dead) throw new Error(`${dead.spawnargs.at(-1)} exited with code ${dead.exitCode} during start-up`);
    if (
      await fetch(url).then(
        (r) => r.ok,
        () => false,
      )
    )
      return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms`);
}

/**
 * A redis-server and a Temporal dev server of their own in a fresh temp dir, and the environment a
 * Kiln API or worker needs to use them (API on a free port); `env` adds to and overrides the
 * defaults, `models` becomes MODELS_FILE.
 */
export async function startBackingServices(opts: {
  name: string;
  env?: Record<string, string>;
  models?: unknown[];
  /** The Temporal dev server's dynamic config (startTemporal). */
  temporalDynamicConfig?: Record<string, unknown>;
  /** Where the Temporal dev server serves its Prometheus metrics (startTemporal). */
  temporalMetricsPort?: number;
}) {
  const dir = mkdtempSync(join(tmpdir(), `kiln-${opts.name}-`));
  const [redis, temporal] = await Promise.all([
    startRedis({ dir: join(dir, 'redis'), persist: false }),
    startTemporal({
      dbFile: join(dir, 'temporal.sqlite'),
      dynamicConfig: opts.temporalDynamicConfig,
      metricsPort: opts.temporalMetricsPort,
    }),
  ]);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env: Record<string, string> = {
    KILN_SECRET: randomBytes(32).toString('hex'),
    // Kiln and its Redis share this machine: the Unix socket costs each command less than loopback TCP.
    REDIS_URL: redis.socket ?? redis.url,
    TEMPORAL_ADDRESS: temporal.url,
    PORT: String(port),
    HOST: '127.0.0.1',
    PUBLIC_BASE_URL: base,
    BLOB_DIR: join(dir, 'blobs'),
    LOG_LEVEL: 'warn',
    ...opts.env,
  };
  if (opts.models) {
    writeFileSync(join(dir, 'models.json'), JSON.stringify({ models: opts.models }));
    env.MODELS_FILE = join(dir, 'models.json');
  }
  return { dir, redis, temporal, port, base, env, stop: () => Promise.all([redis.stop(), temporal.stop()]) };
}

/** Starts everything; `env` adds to (and overrides) the defaults, `models` becomes MODELS_FILE. */
export async function startStack(opts: {
  name: string;
  env?: Record<string, string>;
  models?: unknown[];
}): Promise<Stack> {
  const { dir, redis, temporal, base, env } = await startBackingServices(opts);
  const logFile = (which: 'api' | 'worker') => join(dir, `${which}.log`);
  const run = (file: string, which: 'api' | 'worker') => {
    const fd = openSync(logFile(which), 'a');
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, file)], {
      env: { ...process.env, ...env },
      stdio: ['ignore', fd, fd],
    });
    // Never leave processes behind, whatever ends this one.
    process.once('exit', () => child.kill('SIGKILL'));
    return child;
  };
  const worker = run('src/worker/main.ts', 'worker');
  const api = run('src/api/main.ts', 'api');
  const stop = async ({ keepDir = false } = {}) => {
    await Promise.all([stopChild(api, 'SIGTERM', 10_000), stopChild(worker, 'SIGTERM', 10_000)]);
    await Promise.all([temporal.stop(), redis.stop()]);
    if (!keepDir) rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitHttp(`${base}/healthz`, [api, worker]);
    // The worker must poll before work is submitted, or the first tasks wait for it.
    await waitHttp(`${base}/readyz`, [api, worker]);
  } catch (err) {
    await stop({ keepDir: true });
    throw new Error(`${(err as Error).message}; logs in ${dir}`);
  }
  return { base, dir, redisUrl: env.REDIS_URL!, api, worker, logFile, stop };
}
