// Benchmark plumbing: processes, load runs, percentiles, resident memory.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { openSync, readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { ROOT } from '../scripts/services.js';
import { startBackingServices } from '../scripts/stack.js';
import { SA } from '../src/temporal/search-attributes.js';
import { taskSummary } from '../src/tasks/summary.js';

/** The local models the benchmarks run: zero latency, so Kiln, Redis and Temporal are what is measured. */
export const BENCH_MODELS = [
  { id: 'bench-image', provider: 'local', latencyMs: 0, idempotent: true, concurrency: 64 },
  // The same model with its call as a local activity (an inline model: 6 history events).
  {
    id: 'bench-image-inline',
    provider: 'local',
    latencyMs: 0,
    idempotent: true,
    concurrency: 64,
    inline: true,
    timeoutMs: 1000,
  },
  { id: 'bench-video', kind: 'video', provider: 'local', latencyMs: 0, pollIntervalMs: 100 },
];

/** The benchmark's own backing services (scripts/stack.ts), with the bench models and no rate limits. */
export async function startBenchStack(name: string, extra: Record<string, string> = {}) {
  const stack = await startBackingServices({
    name,
    models: BENCH_MODELS,
    env: { RATE_LIMIT_TASK_MS: '0', RATE_LIMIT_BATCH_MS: '0', ...extra },
  });
  // A benchmark that fails mid-run exits at once: its Redis and Temporal server must not outlive it
  // (they would load the machine under the next run). Sends the signals; nothing to await at exit.
  process.once('exit', () => void stack.stop());
  return stack;
}

/** The benchmarks' image submit: a 1024×10 picture, so the "upstream" costs next to nothing. */
export const SUBMIT_BODY = JSON.stringify({
  contents: [{ role: 'user', parts: [{ text: 'bench' }] }],
  generationConfig: { imageConfig: { aspectRatio: '99:1', output: 'url' } },
});

/**
 * The image task workflow's input for SUBMIT_BODY, as Kiln's submit starts it (the raw starts the
 * benchmarks set beside it). `activityQueue`: where its upstream call goes (`upstreamQueue`).
 */
export function benchTaskInput(id: string, owner: string, activityQueue: string) {
  return {
    task: {
      id,
      owner,
      model: 'bench-image',
      created_at: Math.floor(Date.now() / 1000),
      request: JSON.parse(SUBMIT_BODY) as Record<string, unknown>,
    },
    policy: { timeoutMs: 120_000, heartbeatTimeoutMs: 10_000, maxAttempts: 3 },
    activityQueue,
  };
}

/**
 * What Kiln's start of a `bench-image` task carries for operators (src/tasks/start.ts): owner and
 * model search attributes (visibility writes) and the Web UI summary, for raw starts made as Kiln's.
 */
export function benchOperatorView(owner: string, summaryPromptChars: number) {
  return {
    typedSearchAttributes: [
      { key: SA.owner, value: owner },
      { key: SA.model, value: 'bench-image' },
    ],
    staticSummary: taskSummary('image', 'bench-image', owner, 'bench', summaryPromptChars),
  };
}

/**
 * Waits until the read model's unfinished gauge is empty _and_ Temporal runs no task workflow (raw
 * starts hold no place in the gauge: until session 13 the next round ran beside their backlog,
 * which cost Kiln's submit rounds a third of their rate). 10-minute deadline.
 */
export async function drainTasks(
  store: { unfinishedCount(): Promise<number> },
  client: { workflow: { count(q: string): Promise<{ count: number }> } },
  label: string,
): Promise<void> {
  const running = async () =>
    (await client.workflow.count(`WorkflowType = 'imageTaskWorkflow' AND ExecutionStatus = 'Running'`)).count;
  const deadline = Date.now() + 10 * 60_000;
  while ((await store.unfinishedCount()) > 0 || (await running()) > 0) {
    if (Date.now() > deadline) throw new Error(`${label}: tasks still running 10 minutes after a round`);
    await sleep(200);
  }
}

export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
}

export function spawnTs(file: string, env: NodeJS.ProcessEnv, nodeArgs: string[] = []): ChildProcess {
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', join(ROOT, file)], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  process.once('exit', () => child.kill('SIGKILL'));
  return child;
}

let built = false;

/**
 * The API as production runs it: `bin/kiln-run api` (what `npm run start:api` and the Docker image
 * run): compiled JavaScript (`npm run build:server`, once per run; not tsx, whose loader thread
 * alone costs ~35 MiB per process), jemalloc when installed, 4 MiB semi-spaces. `nodeArgs` (e.g.
 * the CPU profiler's, which NODE_OPTIONS refuses) go on node's command line (KILN_NODE_FLAGS).
 */
export function spawnApi(env: NodeJS.ProcessEnv, nodeArgs: string[] = [], logFile?: string): ChildProcess {
  return spawnLaunched('api', nodeArgs.length ? { ...env, KILN_NODE_FLAGS: nodeArgs.join(' ') } : env, logFile);
}

/** The worker as production runs it (`bin/kiln-run worker`), with more node flags when given. */
export function spawnWorker(env: NodeJS.ProcessEnv, nodeArgs: string[] = []): ChildProcess {
  return spawnLaunched('worker', nodeArgs.length ? { ...env, KILN_NODE_FLAGS: nodeArgs.join(' ') } : env);
}

/** Whether a process has jemalloc mapped (bin/kiln-run preloads it when installed). */
export const usesJemalloc = (pid: number): boolean => readFileSync(`/proc/${pid}/maps`, 'utf8').includes('libjemalloc');

/**
 * `logFile`: where the process's log lines go (appended), as a production log file or pipe would
 * take them. The launcher `exec`s node: the child's PID is node's (RSS, CPU time, signals).
 */
function spawnLaunched(mode: 'api' | 'worker', env: NodeJS.ProcessEnv, logFile?: string): ChildProcess {
  if (!built) {
    // tsc, then the bundles bin/kiln-run starts: package.json says the steps once.
    execFileSync('npm', ['run', '-s', 'build:server'], { cwd: ROOT, stdio: 'inherit' });
    built = true;
  }
  const child = spawn('sh', [join(ROOT, 'bin/kiln-run'), mode], {
    env: { ...process.env, ...env },
    stdio: ['ignore', logFile ? openSync(logFile, 'a') : 'ignore', 'inherit'],
  });
  process.once('exit', () => child.kill('SIGKILL'));
  return child;
}

export async function waitHttp(url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (
      await fetch(url).then(
        (r) => r.ok,
        () => false,
      )
    )
      return;
    await sleep(100);
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms`);
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `n` calls handed out to `callers` concurrent loops; resolves with their results once all returned. */
export async function fanOut<T>(n: number, callers: number, fn: () => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (next++ < n) out.push(await fn());
    }),
  );
  return out;
}

/** HTTP load with autocannon: fixed duration, fixed connections. */
export async function load(opts: {
  url: string;
  connections: number;
  seconds: number;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  requests?: autocannon.Request[];
  /**
   * Seconds of the same load first, not measured: a process that sat idle while another scenario
   * ran (its heap collected, its connections new) starts cold, and that second lands in the p99.
   */
  warmupSeconds?: number;
}): Promise<LoadResult> {
  const run = (duration: number) =>
    autocannon({
      url: opts.url,
      connections: opts.connections,
      duration,
      method: opts.method ?? 'GET',
      headers: opts.headers,
      body: opts.body,
      requests: opts.requests,
    });
  if (opts.warmupSeconds) await run(opts.warmupSeconds);
  const r = await run(opts.seconds);
  return {
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    errors: r.errors + r.timeouts,
    non2xx: r.non2xx,
  };
}

/** In-process load: `fn` called by `concurrency` loops for `seconds`; latency per call in ms. */
export async function loop(concurrency: number, seconds: number, fn: () => Promise<unknown>): Promise<LoadResult> {
  const lat: number[] = [];
  let errors = 0;
  const end = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        try {
          await fn();
        } catch {
          errors++;
        }
        lat.push(performance.now() - t);
      }
    }),
  );
  return { rps: lat.length / seconds, p50: pct(lat, 50), p99: pct(lat, 99), errors, non2xx: 0 };
}

export function pct(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

/** Resident set size of a process, in MiB (Linux /proc). */
export function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

interface ProcStat {
  pid: number;
  ppid: number;
  /** user + system CPU so far, in ms. */
  cpuMs: number;
  cmdline: string;
}

/** Every live process, from /proc (Linux). */
function procs(): ProcStat[] {
  const out: ProcStat[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      // Fields after the command name, which may hold spaces: state is [0], ppid [1], utime [11], stime [12].
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8').replace(/\0/g, ' ');
      out.push({ pid: Number(name), ppid: Number(f[1]), cpuMs: statCpuMs(stat), cmdline });
    } catch {
      // Exited while being read.
    }
  }
  return out;
}

/**
 * A group of processes whose CPU is counted together: root pids with their descendants (`tree`),
 * one process alone (`pid`), or the processes whose command line passes a test. `outside`: memory
 * reported beside the stack, not in its total (a stand-in for an upstream that production runs
 * elsewhere, like the local video provider's ffmpeg).
 */
export type CpuRole = ({ tree: number[] } | { pid: number } | { cmdline: (c: string) => boolean }) & {
  outside?: boolean;
};

/** Each role's live processes; a process belongs to the first role that claims it. */
export function resolveRoles(roles: Record<string, CpuRole>): Record<string, ProcStat[]> {
  const all = procs();
  const children = new Map<number, number[]>();
  for (const p of all) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p.pid]);
  const byPid = new Map(all.map((p) => [p.pid, p]));
  const claimed = new Set<number>();
  const out: Record<string, ProcStat[]> = {};
  for (const [name, role] of Object.entries(roles)) {
    let pids: number[];
    if ('pid' in role) pids = [role.pid];
    else if ('tree' in role) {
      pids = [];
      const todo = [...role.tree];
      while (todo.length) {
        const pid = todo.pop()!;
        pids.push(pid);
        todo.push(...(children.get(pid) ?? []));
      }
    } else pids = all.filter((p) => role.cmdline(p.cmdline)).map((p) => p.pid);
    out[name] = [];
    for (const pid of pids) {
      const p = byPid.get(pid);
      if (!p || claimed.has(pid)) continue;
      claimed.add(pid);
      out[name].push(p);
    }
  }
  return out;
}

/** CPU used so far (ms) by each role's live processes; a process counts for the first role that claims it. */
export function cpuByRole(roles: Record<string, CpuRole>): Record<string, number> {
  const resolved = resolveRoles(roles);
  return Object.fromEntries(Object.entries(resolved).map(([name, ps]) => [name, ps.reduce((a, p) => a + p.cpuMs, 0)]));
}

/**
 * BENCH_PIN=1: each role's processes (all their threads) bound to one CPU with `taskset`; children
 * started later inherit it. Returns false, changing nothing, without `taskset` or with fewer CPUs
 * than the roles name.
 */
export function pinRoles(roles: Record<string, CpuRole & { cpu: number }>): boolean {
  const cpusNamed = Math.max(...Object.values(roles).map((r) => r.cpu)) + 1;
  if (cpus().length < cpusNamed) return false;
  try {
    execFileSync('taskset', ['-V'], { stdio: 'ignore' });
  } catch {
    return false;
  }
  for (const [name, ps] of Object.entries(resolveRoles(roles)))
    for (const p of ps)
      execFileSync('taskset', ['-a', '-p', '-c', String(roles[name].cpu), String(p.pid)], { stdio: 'ignore' });
  return true;
}

/** user + system CPU (ms) in one `/proc/.../stat` line; the command name may hold spaces. */
function statCpuMs(stat: string): number {
  const f = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * 10; // USER_HZ = 100
}

/** One process's CPU so far (ms): in total, and by live thread (id → name and CPU). */
export interface ThreadReading {
  total: number;
  threads: Map<string, { name: string; ms: number }>;
}

export function readThreads(pid: number): ThreadReading {
  const threads = new Map<string, { name: string; ms: number }>();
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        threads.set(tid, { name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), ms: statCpuMs(stat) });
      } catch {
        // Ended while being read: its CPU counts with the exited threads.
      }
    }
    return { total: statCpuMs(readFileSync(`/proc/${pid}/stat`, 'utf8')), threads };
  } catch {
    return { total: 0, threads }; // the process is gone
  }
}

/**
 * A Node worker process's CPU between two readings, by part, told apart by thread name (Node 22+
 * names its threads): `main`; `workflow thread` (Node's worker threads: in a Temporal worker, the
 * SDK's workflow sandbox); `V8 helpers` (concurrent GC and compilation); `libuv pool` (file I/O,
 * DNS, crypto); `Temporal Core` (the SDK's Rust threads: gRPC to the server); `exited threads`
 * (CPU of threads that ended in between, which the process total keeps: the sandbox starts a
 * short-lived watchdog thread for every call into a workflow). Older Node names every thread
 * `node`: the busiest of those is taken for the workflow thread and the rest for V8's helpers.
 */
export function threadSplit(pid: number, before: ThreadReading, after: ThreadReading): Record<string, number> {
  const out: Record<string, number> = {
    main: 0,
    'workflow thread': 0,
    'V8 helpers': 0,
    'libuv pool': 0,
    'Temporal Core': 0,
    other: 0,
    'exited threads': 0,
  };
  let live = 0;
  const unnamed: number[] = [];
  for (const [tid, t] of after.threads) {
    const ms = t.ms - (before.threads.get(tid)?.ms ?? 0);
    live += ms;
    if (tid === String(pid)) out.main += ms;
    else if (t.name === 'WorkerThread') out['workflow thread'] += ms;
    else if (t.name === 'V8Worker' || t.name.startsWith('DelayedTask')) out['V8 helpers'] += ms;
    else if (t.name === 'libuv-worker') out['libuv pool'] += ms;
    else if (t.name === 'node') unnamed.push(ms);
    else if (t.name.startsWith('tokio-runtime') || t.name.startsWith('workflow-proces')) out['Temporal Core'] += ms;
    else out.other += ms;
  }
  const busiest = Math.max(0, ...unnamed);
  out['workflow thread'] += busiest;
  out['V8 helpers'] += unnamed.reduce((a, b) => a + b, 0) - busiest;
  out['exited threads'] = Math.max(0, after.total - before.total - live);
  return out;
}

export const fmt = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');
