// `npm run bench:levers`: Temporal's write levers (issue 42), each before and after in one run.
// One Temporal dev server (eager activity execution and eager workflow start enabled in its
// dynamic config) and one Redis; per variant its own Kiln worker and API on a task queue of its
// own, all started at once and idle but for their turn; the minimal workflow's worker as the
// baseline (bench/minimal); and bench/levers-host.ts, a single-process Kiln (worker and starts over
// one NativeConnection) for eager workflow start, with and without it. In alternating rounds (the
// order rotates): submit (16 connections; raw `client.workflow.start` as the baseline), then 200
// tasks first submit → all terminal. Medians of the rounds; ratios are medians of per-round ratios.
// BENCH_LEVERS=base,eagerActivity,… picks variants (base always runs); BENCH_SECONDS (8), BENCH_ROUNDS (3).
import { randomBytes } from 'node:crypto';
import { cpus, totalmem } from 'node:os';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { binary, freePort, ROOT } from '../scripts/services.js';
import { startBackingServices } from '../scripts/stack.js';
import { loadConfig } from '../src/config/env.js';
import { ownerOfKey } from '../src/infra/callers.js';
import { modelTaskQueue } from '../src/config/models.js';
import { connectTemporal } from '../src/temporal/client.js';
import { createTaskStore } from '../src/tasks/store/create.js';
import {
  fanOut,
  benchTaskInput,
  BENCH_MODELS,
  SUBMIT_BODY,
  drainTasks,
  cpuByRole,
  fmt,
  load,
  loop,
  pct,
  pinRoles,
  sleep,
  spawnApi,
  spawnTs,
  spawnWorker,
  waitHttp,
  type CpuRole,
  type LoadResult,
} from './lib.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const BATCH = Number(process.env.BENCH_BATCH ?? 200);
const KEY = 'bench-key-owner-0000000000';

/** Each lever's setting, as the environment of its own worker and API. */
const VARIANTS: Record<string, Record<string, string>> = {
  base: {},
  eagerActivity: { TEMPORAL_UPSTREAM_QUEUE: 'workflow' },
  noStickyCache: { WORKER_MAX_CACHED_WORKFLOWS: '0' },
  // Redis over loopback TCP instead of its Unix socket (the stack's default): REDIS_URL is set below.
  tcpRedis: {},
  wfPollers2: { WORKER_WORKFLOW_TASK_POLLERS: '2' },
  wfSlots100Pollers20: { WORKER_WORKFLOW_TASK_SLOTS: '100', WORKER_WORKFLOW_TASK_POLLERS: '20' },
};
const picked = process.env.BENCH_LEVERS?.split(',').filter(Boolean);
const variants = Object.keys(VARIANTS).filter((v) => v === 'base' || !picked || picked.includes(v));

async function main() {
  const started = new Date();
  const stack = await startBackingServices({
    name: 'levers',
    models: BENCH_MODELS,
    env: { RATE_LIMIT_TASK_MS: '0', RATE_LIMIT_BATCH_MS: '0', MAX_UNFINISHED_TASKS: '1000000', LOG_LEVEL: 'info' },
    temporalDynamicConfig: { 'system.enableActivityEagerExecution': true, 'system.enableEagerWorkflowStart': true },
  });
  process.once('exit', () => void stack.stop());
  const { dir, redis: redisSvc, temporal, env } = stack;
  const config = loadConfig({ ...process.env, ...env });

  // Per variant: a worker and an API (2 processes, as bench/run.ts) on task queue kiln-<variant>.
  const kilns = await Promise.all(
    variants.map(async (name) => {
      const port = await freePort();
      const venv: Record<string, string> = {
        ...env,
        ...VARIANTS[name],
        ...(name === 'tcpRedis' ? { REDIS_URL: redisSvc.url } : {}),
        TEMPORAL_TASK_QUEUE: `kiln-${name}`,
        PORT: String(port),
        PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
      };
      const worker = spawnWorker(venv);
      const api = spawnApi({ ...venv, API_PROCESSES: '2' }, [], join(dir, `api-${name}.log`));
      return { name, base: `http://127.0.0.1:${port}`, worker, api };
    }),
  );
  const minimalWorker = spawnTs('bench/minimal/worker.ts', {
    TEMPORAL_ADDRESS: temporal.url,
    MINIMAL_QUEUE: 'bench-min',
  });
  const hostPort = await freePort();
  const host = spawnTs('bench/levers-host.ts', {
    ...env,
    TEMPORAL_TASK_QUEUE: 'kiln-host',
    HOST_PORT: String(hostPort),
    LOG_LEVEL: 'warn',
  });
  for (const k of kilns) await waitHttp(`${k.base}/readyz`, 180_000);
  await waitHttp(`http://127.0.0.1:${hostPort}/probe`, 180_000).catch(() => undefined);
  const serverRole: CpuRole = { cmdline: (c) => /temporal/.test(c) && c.includes(`--port ${temporal.port} `) };
  const redisRole: CpuRole = { cmdline: (c) => c.includes('redis-server') && c.includes(`:${redisSvc.port}`) };
  const pinned =
    process.env.BENCH_PIN === '1' &&
    pinRoles({
      server: { ...serverRole, cpu: 0 },
      redis: { ...redisRole, cpu: 0 },
      workers: { tree: [...kilns.map((k) => k.worker.pid!), minimalWorker.pid!, host.pid!], cpu: 0 },
      api: { tree: kilns.map((k) => k.api.pid!), cpu: 1 },
      driver: { pid: process.pid, cpu: 1 },
    });
  if (process.env.BENCH_PIN === '1' && !pinned) throw new Error('BENCH_PIN=1 needs taskset and 2 CPUs');
  const cpuRoles: Record<string, CpuRole> = {
    server: serverRole,
    redis: redisRole,
    workers: { tree: [...kilns.map((k) => k.worker.pid!), minimalWorker.pid!, host.pid!] },
    apis: { tree: kilns.map((k) => k.api.pid!) },
    driver: { pid: process.pid },
  };

  const redis = new Redis(redisSvc.url);
  const store = createTaskStore(redis, { prefix: config.redisPrefix, retentionSeconds: config.retentionSeconds });
  const { client } = await connectTemporal(config);
  const owner = ownerOfKey(config.ownerKey, KEY);
  const auth = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
  const submitOne = async (base: string) =>
    (await (
      await fetch(`${base}/v1beta/models/bench-image:generateContent`, {
        method: 'POST',
        headers: auth,
        body: SUBMIT_BODY,
      })
    ).json()) as { id: string };
  const drain = () => drainTasks(store, client, 'levers');
  const hostCall = async <T>(path: string): Promise<T> => {
    const r = await fetch(`http://127.0.0.1:${hostPort}${path}`);
    const v = (await r.json()) as T & { error?: string };
    if (!r.ok) throw new Error(`levers host ${path}: ${v.error}`);
    return v;
  };

  // Warm-up, and evidence that each lever is in effect.
  const evidence: string[] = [];
  for (const k of kilns) {
    for (let i = 0; i < 50; i++) await submitOne(k.base);
    await drain();
    const { id } = await submitOne(k.base);
    await drain();
    const events = (await client.workflow.getHandle(id).fetchHistory()).events ?? [];
    const at = (type: string) => {
      const e = events.find((x) => String(x.eventType) === type || x.eventType === (EVENT_NUMBERS[type] as never));
      return e?.eventTime ? Number(e.eventTime.seconds) * 1000 + Math.round((e.eventTime.nanos ?? 0) / 1e6) : NaN;
    };
    evidence.push(
      `${k.name}: ${events.length} history events; activity scheduled → started ${fmt(at('ActivityTaskStarted') - at('ActivityTaskScheduled'), 0)} ms`,
    );
  }
  for (let i = 0; i < 20; i++) await hostCall('/batch?n=16&eager=' + (i % 2));
  evidence.push(`single-process host: eager start taken by the server: ${await hostCall<boolean>('/probe')}`);
  const startMinimal = () =>
    client.workflow.start('minimalBaselineWorkflow', {
      workflowId: `min_${randomBytes(16).toString('hex')}`,
      taskQueue: 'bench-min',
      args: ['bench-min.act'],
    });
  for (let i = 0; i < 20; i++) await (await startMinimal()).result();
  await drain();

  const rawStart = () => {
    const id = `task_${randomBytes(16).toString('hex')}`;
    return client.workflow.start('imageTaskWorkflow', {
      workflowId: id,
      taskQueue: 'kiln-base',
      args: [benchTaskInput(id, owner, modelTaskQueue('kiln-base', 'bench-image'))],
    });
  };

  // Kinds: each a submit round and a batch round.
  type Kind = { submit: () => Promise<LoadResult>; batch: () => Promise<number> };
  const kinds: Record<string, Kind> = {
    'raw start / minimal': {
      submit: () => loop(16, SECONDS, rawStart),
      batch: async () => {
        const t = performance.now();
        const hs = await fanOut(BATCH, 16, startMinimal);
        await Promise.all(hs.map((h) => h.result()));
        return performance.now() - t;
      },
    },
    ...Object.fromEntries(
      kilns.map((k) => [
        k.name,
        {
          submit: () =>
            load({
              url: `${k.base}/v1beta/models/bench-image:generateContent`,
              method: 'POST',
              headers: auth,
              body: SUBMIT_BODY,
              connections: 16,
              seconds: SECONDS,
            }),
          batch: async () => {
            const t = performance.now();
            await fanOut(BATCH, 16, () => submitOne(k.base));
            while ((await store.unfinishedCount()) > 0) await sleep(5);
            return performance.now() - t;
          },
        } satisfies Kind,
      ]),
    ),
    ...Object.fromEntries(
      (['plain', 'eager'] as const).map((e) => [
        `single process, ${e === 'eager' ? 'eager start' : 'no eager start'}`,
        {
          submit: () => hostCall<LoadResult>(`/submit?seconds=${SECONDS}&eager=${e === 'eager' ? 1 : 0}`),
          batch: () => hostCall<number>(`/batch?n=${BATCH}&eager=${e === 'eager' ? 1 : 0}`),
        } satisfies Kind,
      ]),
    ),
  };
  const names = Object.keys(kinds);
  const submits: Record<string, LoadResult[]> = Object.fromEntries(names.map((n) => [n, []]));
  const batches: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  const cpu: Record<string, Record<string, number>[]> = Object.fromEntries(names.map((n) => [n, []]));
  // One unmeasured batch of each first (the first batch after the warm-up runs slower).
  for (const n of names) {
    await kinds[n].batch();
    await drain();
  }
  for (let round = 0; round < ROUNDS; round++) {
    const order = names.map((_, i) => names[(round + i) % names.length]);
    for (const n of order) {
      submits[n].push(await kinds[n].submit());
      await drain();
    }
    for (const n of order) {
      const before = cpuByRole(cpuRoles);
      batches[n].push(await kinds[n].batch());
      const after = cpuByRole(cpuRoles);
      cpu[n].push(Object.fromEntries(Object.keys(after).map((r) => [r, (after[r] - before[r]) / BATCH])));
      await drain();
    }
    console.error(`levers: round ${round + 1} of ${ROUNDS} done`);
  }

  // The report.
  const med = (xs: number[]) => pct(xs, 50);
  const ratios = (a: number[], b: number[]) => a.map((x, i) => x / b[i]);
  const ratioText = (a: number[], b: number[]) => {
    const r = ratios(a, b);
    return `${fmt(med(r), 2)}× (${r.map((x) => fmt(x, 2)).join(', ')})`;
  };
  const rps = (n: string) => submits[n].map((r) => r.rps);
  const minimal = batches['raw start / minimal'];
  const rows = names.map((n) => {
    const s = submits[n];
    const c = cpu[n];
    const cpuMed = Object.fromEntries(Object.keys(c[0]).map((r) => [r, med(c.map((x) => x[r]))]));
    const total = Object.values(cpuMed).reduce((a, b) => a + b, 0);
    const compare = n.startsWith('single process, eager') ? 'single process, no eager start' : 'base';
    return (
      `| ${n} | ${fmt(med(rps(n)), 0)} req/s · p50 ${fmt(med(s.map((r) => r.p50)))} ms · p99 ${fmt(med(s.map((r) => r.p99)))} ms` +
      `${s.reduce((a, r) => a + r.errors + r.non2xx, 0) ? ` · ${s.reduce((a, r) => a + r.errors + r.non2xx, 0)} errors` : ''} ` +
      `| ${n === compare || !submits[compare] || n.startsWith('raw') ? '' : ratioText(rps(n), rps(compare))} ` +
      `| ${n.startsWith('raw') ? '' : ratioText(rps(n), rps('raw start / minimal'))} ` +
      `| ${fmt(med(batches[n]), 0)} ms (${batches[n].map((x) => fmt(x, 0)).join(', ')}) ` +
      `| ${n.startsWith('raw') ? '' : ratioText(batches[n], minimal)} ` +
      `| ${n === compare || !batches[compare] || n.startsWith('raw') ? '' : ratioText(batches[n], batches[compare])} ` +
      `| ${fmt(total)} (server ${fmt(cpuMed.server)}, workers ${fmt(cpuMed.workers)}, APIs ${fmt(cpuMed.apis)}, Redis ${fmt(cpuMed.redis)}) |`
    );
  });
  const temporalVersion = execFileSync(binary('temporal', 'TEMPORAL_BIN'), ['--version']).toString().trim();
  const commit = execFileSync('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD']).toString().trim();
  const dirty = execFileSync('git', ['-C', ROOT, 'status', '--porcelain', '--untracked-files=no']).toString().trim();
  const text = [
    `Run: \`npm run bench:levers\` (BENCH_SECONDS=${SECONDS}, BENCH_ROUNDS=${ROUNDS}, BENCH_BATCH=${BATCH}, variants ${variants.join(', ')}) ` +
      `${started.toISOString()} → ${new Date().toISOString()}, commit ${commit}${dirty ? ' + uncommitted changes' : ''}`,
    `Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${fmt(totalmem() / 2 ** 30)} GiB; Node ${process.version}; ${temporalVersion}; ` +
      (pinned
        ? 'pinned (server, Redis, every worker and the single-process host on CPU 0; APIs and driver on CPU 1)'
        : 'unpinned'),
    `Server dynamic config: system.enableActivityEagerExecution=true, system.enableEagerWorkflowStart=true`,
    ...evidence.map((e) => `Evidence: ${e}`),
    '',
    '| Kind | Submit (16 connections; median of rounds) | Submit rate vs base (rounds) | Submit rate vs raw start (rounds) | 200 tasks, first submit → all terminal (rounds) | Time vs minimal (rounds) | Time vs base (rounds) | CPU per task in the 200-task rounds (ms) |',
    '|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
    'The single-process rows are compared with each other ("vs base" means vs no eager start); their submit is startTask (gauge reservation + start) in the process, no HTTP.',
  ].join('\n');
  writeFileSync(join(ROOT, 'bench', 'last-levers.md'), `${text}\n`);
  console.log(text);
  for (const k of kilns) {
    k.api.kill('SIGTERM');
    k.worker.kill('SIGTERM');
  }
  minimalWorker.kill('SIGTERM');
  host.kill('SIGTERM');
  redis.disconnect();
  await sleep(1000);
  await stack.stop();
  process.exit(0);
}

/** History event type numbers (temporal.api.enums.v1.EventType) for the events read above. */
const EVENT_NUMBERS: Record<string, number> = { ActivityTaskScheduled: 10, ActivityTaskStarted: 11 };

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
