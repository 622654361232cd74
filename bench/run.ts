// `npm run bench`: Kiln side by side with its baselines, in one run, on this machine.
// Starts its own redis-server, Temporal dev server, worker and API (local provider, zero latency);
// the scenarios live in bench/run/ (submit.ts, batch.ts, reads.ts), the report in report.ts.
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { loadConfig } from '../src/config/env.js';
import { ownerOfKey } from '../src/infra/callers.js';
import { modelTaskQueue } from '../src/config/models.js';
import { connectTemporal } from '../src/temporal/client.js';
import { createTaskStore } from '../src/tasks/store/create.js';
import {
  benchTaskInput,
  drainTasks,
  fmt,
  pinRoles,
  rssMiB,
  sleep,
  spawnApi,
  spawnWorker,
  startBenchStack,
  SUBMIT_BODY,
  waitHttp,
  type CpuRole,
} from './lib.js';
import { memoryText, peakSampler, stackMemory } from './memory.js';
import { BATCH_ONLY, KEY, READS_ONLY, SECONDS, SETTLE_SECONDS, type Row, type RunContext } from './run/context.js';
import { batchRows } from './run/batch.js';
import { listFlatnessRows, readRows } from './run/reads.js';
import { apiRss, report } from './run/report.js';
import { endToEndRows, submitRows, sustainedRow } from './run/submit.js';

async function main() {
  // The production default log level: every request writes its log line (to a file, as in production).
  const stack = await startBenchStack('bench', { MAX_UNFINISHED_TASKS: '1000000', LOG_LEVEL: 'info' });
  const { dir, redis: redisSvc, temporal, base, env } = stack;
  const config = loadConfig({ ...process.env, ...env });
  // BENCH_CPU_PROF_DIR: the API's processes and the worker write CPU profiles there (on exit).
  const profDir = process.env.BENCH_CPU_PROF_DIR;
  const prof = profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : [];
  const serverRole: CpuRole = { cmdline: (c) => /temporal/.test(c) && c.includes(`--port ${temporal.port} `) };
  const redisRole: CpuRole = { cmdline: (c) => c.includes('redis-server') && c.includes(`:${redisSvc.port}`) };
  // The memory baseline of the same run: the Temporal dev server and Redis alone, before Kiln starts.
  const backingOnly = stackMemory({ temporal: serverRole, redis: redisRole });
  const worker = spawnWorker(env, prof);
  const api = spawnApi(env, prof, join(dir, 'api.log'));
  await waitHttp(`${base}/healthz`);
  // The whole stack's PSS (bench/memory.ts): what the machine must hold for it.
  const stackRoles: Record<string, CpuRole> = {
    // The local video provider (bench-video) encodes with ffmpeg, a child of the worker: it stands
    // in for a video maker's servers, so it is shown beside the stack, not in it. Listed first to
    // claim its process before the worker's tree does.
    'stand-in upstream (ffmpeg)': { cmdline: (c) => /^(\S*\/)?ffmpeg /.test(c), outside: true },
    temporal: serverRole,
    redis: redisRole,
    api: { tree: [api.pid!] },
    worker: { tree: [worker.pid!] },
  };
  // BENCH_PIN=1: the API on a core of its own, as in production, where it shares no host with the
  // Temporal server; this VM's submit rounds moved by up to 0.4 unpinned, by 0.02 pinned (session 13).
  // The workers share the server's core: every BENCHMARKS row that says "pinned" ran so.
  // BENCH_PIN=apart: the workers move to the API's core too, as production deploys them (no worker
  // on Temporal's host): what a task costs the server's core alone.
  const layout = process.env.BENCH_PIN === '1' ? 'pinned' : process.env.BENCH_PIN === 'apart' ? 'apart' : undefined;
  const workerCpu = layout === 'apart' ? 1 : 0;
  const pinned =
    layout !== undefined &&
    pinRoles({
      server: { ...serverRole, cpu: 0 },
      redis: { ...redisRole, cpu: 0 },
      worker: { tree: [worker.pid!], cpu: workerCpu },
      api: { tree: [api.pid!], cpu: 1 },
      driver: { pid: process.pid, cpu: 1 },
    });
  if (layout && !pinned) throw new Error(`BENCH_PIN=${process.env.BENCH_PIN} needs taskset and 2 CPUs`);
  await sleep(2000);
  const redis = new Redis(redisSvc.url);
  const store = createTaskStore(redis, { prefix: config.redisPrefix, retentionSeconds: config.retentionSeconds });
  const { client } = await connectTemporal(config);
  const owner = ownerOfKey(config.ownerKey, KEY);
  const auth = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
  const rows: Row[] = [];
  const submitOne = async (key = KEY, model = 'bench-image') =>
    (await (
      await fetch(`${base}/v1beta/models/${model}:generateContent`, {
        method: 'POST',
        headers: { ...auth, authorization: `Bearer ${key}` },
        body: SUBMIT_BODY,
      })
    ).json()) as { id: string };
  const drain = () => drainTasks(store, client, 'bench');
  const tally = { submitted: 0 };

  // Warm up: JIT, connections, the workflow cache.
  for (let i = 0; i < 50; i++) await submitOne();
  tally.submitted += 50;
  await drain();
  // Measured once the worker runs (it bundles its workflows first, in a child process).
  await sleep(2000);
  const idle = { api: apiRss(api.pid!), worker: rssMiB(worker.pid!), stack: stackMemory(stackRoles) };
  const peak = peakSampler(stackRoles);

  const input = (id: string) => benchTaskInput(id, owner, modelTaskQueue(config.temporal.taskQueue, 'bench-image'));
  const ctx: RunContext = {
    stack,
    config,
    client,
    store,
    redis,
    owner,
    auth,
    api,
    worker,
    serverRole,
    redisRole,
    pinned,
    workerCpu,
    rows,
    tally,
    submitOne,
    drain,
    input,
  };

  // BENCH_ONLY=reads skips the task rows (submit, batch against the minimal workflow).
  if (!READS_ONLY) {
    if (!BATCH_ONLY) await submitRows(ctx);
    await batchRows(ctx);
  }

  const finish = async () => {
    const stackPeak = peak.stop();
    await sleep(2000);
    const backing = `Temporal dev server + Redis alone, before Kiln started: ${memoryText(backingOnly)}`;
    rows.push(
      { what: 'whole stack PSS, idle after 50 warm-up tasks', kiln: memoryText(idle.stack), note: backing },
      {
        what: `whole stack PSS, peak during the run (sampled every 0.5 s)`,
        kiln: memoryText(stackPeak),
        note: backing,
      },
    );
    rows.push({
      what: 'resident memory, idle after 50 warm-up tasks',
      kiln: `API ${idle.api}; worker ${fmt(idle.worker)} MiB`,
    });
    rows.push({
      what: `resident memory 2 s after ${tally.submitted} tasks`,
      kiln: `API ${apiRss(api.pid!)}; worker ${fmt(rssMiB(worker.pid!))} MiB`,
    });
    // What the processes settle at once idle: V8's memory reducer and jemalloc's decay give memory
    // back some seconds after a load ends (the worker went from 225 to 157 MiB within 30 s of a
    // 2,000-task burst), so the figure 2 s after says little about what a process holds.
    await sleep(SETTLE_SECONDS * 1000);
    rows.push({
      what: `resident memory ${SETTLE_SECONDS + 2} s after, idle`,
      kiln: `API ${apiRss(api.pid!)}; worker ${fmt(rssMiB(worker.pid!))} MiB`,
    });
    rows.push({
      what: `whole stack PSS ${SETTLE_SECONDS + 2} s after, idle`,
      kiln: memoryText(stackMemory(stackRoles)),
    });
    report(rows, { seconds: SECONDS, layout });
    api.kill('SIGTERM');
    worker.kill('SIGTERM');
    redis.disconnect();
    await sleep(1000);
    await Promise.all([temporal.stop(), redisSvc.stop()]);
    process.exit(0);
  };
  // BENCH_QUICK=1: the task rows only (submit, batch against the minimal workflow) and memory;
  // BENCH_ONLY=batch: the batch rows and memory.
  if (process.env.BENCH_QUICK || BATCH_ONLY) return finish();
  const listOwners = await readRows(ctx);
  // BENCH_ONLY=reads: the read scenarios and their baselines, then memory.
  if (READS_ONLY) return finish();
  await listFlatnessRows(ctx, listOwners);
  await endToEndRows(ctx);
  await sustainedRow(ctx);
  await finish();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
