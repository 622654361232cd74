// Long-running child processes for the production-shaped stack, with what failure drills need:
// the pid, a graceful stop, a kill -9, and a restart with the same arguments (same ports, same data).
// scripts/services.ts keeps its waitFor/stopChild private and ties them to one start; this wraps
// a process that can be stopped and started many times, so it has its own small versions.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, openSync, closeSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from '../services.js';

export const TEMPORAL_SERVER_VERSION = process.env.TEMPORAL_SERVER_VERSION ?? 'v1.29.1';
/** Where scripts/production/install.sh caches the Temporal build (outside the clone, once per machine). */
export const TEMPORAL_CACHE_DIR = join(
  process.env.KILN_CACHE ?? join(process.env.HOME ?? homedir(), '.cache', 'kiln'),
  `temporal-server-${TEMPORAL_SERVER_VERSION}`,
);
export const PG_BIN = process.env.KILN_PG_BIN ?? '/usr/lib/postgresql/15/bin';

/** A binary: $envVar, else .tools/bin/name, else the install cache, else PATH (spawn then names it). */
export function tool(name: string, envVar?: string, cacheDir?: string): string {
  const fromEnv = envVar ? process.env[envVar] : undefined;
  if (fromEnv) return fromEnv;
  for (const dir of [join(ROOT, '.tools', 'bin'), ...(cacheDir ? [cacheDir] : [])]) {
    if (existsSync(join(dir, name))) return join(dir, name);
  }
  return name;
}

export interface RunAs {
  uid: number;
  gid: number;
}

/** Runs a command to completion; rejects with its output when it fails. */
export function run(
  cmd: string,
  args: string[],
  opts: { runAs?: RunAs; env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number } = {},
): Promise<string> {
  return new Promise((res, rej) => {
    execFile(
      cmd,
      args,
      {
        ...opts.runAs,
        env: { ...process.env, ...opts.env },
        cwd: opts.cwd,
        timeout: opts.timeoutMs ?? 120_000,
        maxBuffer: 16 << 20,
      },
      (err, stdout, stderr) => {
        if (err) rej(new Error(`${cmd} ${args.join(' ')} failed: ${err.message}\n${stdout}${stderr}`.trim()));
        else res(stdout);
      },
    );
  });
}

/**
 * A free loopback port below 32768. Temporal stores each service's membership port in a SMALLINT
 * column (cluster_membership.rpc_port), and the kernel's ephemeral ports (freePort) start at 32768.
 */
export async function freeLowPort(taken = new Set<number>()): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (!taken.has(port) && (await isFree(port))) {
      taken.add(port);
      return port;
    }
  }
  throw new Error('no free port in 20000-31999');
}

/** `n` distinct free loopback ports: all are held open until the last is bound, so none repeats. */
export async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<Server>((res, rej) => {
          const s = createServer();
          s.once('error', rej);
          s.listen(0, '127.0.0.1', () => res(s));
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise((res) => s.close(res))));
  return ports;
}

export function isFree(port: number): Promise<boolean> {
  return new Promise((res) => {
    const s = createServer();
    s.once('error', () => res(false));
    s.listen(port, '127.0.0.1', () => s.close(() => res(true)));
  });
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` until it returns true; fails early when `proc` dies (its log file is named). */
export async function waitUntil(
  what: string,
  check: () => Promise<boolean>,
  opts: { proc?: Proc; timeoutMs: number; intervalMs?: number },
): Promise<void> {
  const deadline = Date.now() + opts.timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    if (opts.proc && !opts.proc.running())
      throw new Error(
        `${what}: ${opts.proc.name} exited (${opts.proc.exitStatus()}) during start-up; see ${opts.proc.logFile}`,
      );
    try {
      if (await check()) return;
    } catch (err) {
      last = err;
    }
    await sleep(opts.intervalMs ?? 200);
  }
  throw new Error(
    `${what} not ready within ${opts.timeoutMs} ms${last ? ` (last error: ${(last as Error).message})` : ''}`,
  );
}

const live = new Set<ChildProcess>();
// Whatever ends this process (an exception, process.exit), no server is left behind.
process.once('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

/** One server process; start() may be called again after stop()/kill() and reuses the arguments. */
export class Proc {
  private child?: ChildProcess;
  private exited?: Promise<void>;
  constructor(
    readonly name: string,
    private readonly cmd: string,
    private readonly args: string[],
    /** stdout and stderr are appended here, so a failed drill can be traced afterwards. */
    readonly logFile: string,
    private readonly opts: {
      runAs?: RunAs;
      env?: NodeJS.ProcessEnv;
      cwd?: string;
      stopSignal?: NodeJS.Signals;
      graceMs?: number;
    } = {},
  ) {}

  running(): boolean {
    return !!this.child && !this.spawnError && this.child.exitCode === null && this.child.signalCode === null;
  }
  pid(): number | undefined {
    return this.running() ? this.child!.pid : undefined;
  }
  exitStatus(): string {
    if (this.spawnError) return `cannot run ${this.cmd}: ${this.spawnError.message}; run scripts/production/install.sh`;
    return this.child ? `code ${this.child.exitCode}, signal ${this.child.signalCode}` : 'never started';
  }

  start(): void {
    if (this.running()) return;
    this.spawnError = undefined;
    const fd = openSync(this.logFile, 'a');
    const child = spawn(this.cmd, this.args, {
      ...this.opts.runAs,
      env: { ...process.env, ...this.opts.env },
      cwd: this.opts.cwd,
      stdio: ['ignore', fd, fd],
    });
    closeSync(fd); // the child has its own copy
    this.child = child;
    live.add(child);
    this.exited = new Promise((res) =>
      child.once('exit', () => {
        live.delete(child);
        res();
      }),
    );
    // A missing binary surfaces as an 'error' event; keep it for waitUntil's message instead of crashing.
    child.once('error', (err) => {
      live.delete(child);
      this.spawnError = err;
    });
  }
  private spawnError?: Error;

  /** Graceful stop (the component's own shutdown signal), SIGKILL after the grace period. */
  async stop(
    signal: NodeJS.Signals = this.opts.stopSignal ?? 'SIGTERM',
    graceMs = this.opts.graceMs ?? 15_000,
  ): Promise<void> {
    if (!this.running()) return;
    const t = setTimeout(() => this.child?.kill('SIGKILL'), graceMs);
    this.child!.kill(signal);
    await this.exited;
    clearTimeout(t);
  }

  /** kill -9: no shutdown work at all, as in a crash or an OOM kill. */
  async kill(): Promise<void> {
    if (!this.running()) return;
    this.child!.kill('SIGKILL');
    await this.exited;
  }
}

/** When root, the uid/gid of `user` (PostgreSQL refuses to run as root); otherwise undefined. */
export async function runAsIfRoot(user: string): Promise<RunAs | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const [uid, gid] = await Promise.all([run('id', ['-u', user]), run('id', ['-g', user])]).catch(() => {
    throw new Error(
      `running as root, but there is no '${user}' user to run PostgreSQL as; run scripts/production/install.sh`,
    );
  });
  return { uid: Number(uid.trim()), gid: Number(gid.trim()) };
}
