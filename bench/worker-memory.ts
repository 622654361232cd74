// `tsx bench/worker-memory.ts`: the worker process's resident memory, idle and after N image tasks
// (BENCH_TASKS, default 10,000) through the local provider with zero latency. Starts its own
// redis-server and Temporal dev server; tasks are started straight on Temporal (no API) and awaited
// 64 at a time, so what grows is the worker: its workflow cache, its isolates, its pollers, its malloc.
// The worker is launched as `npm run start:worker` and the Docker image launch it (bin/kiln-worker).
// BENCH_INLINE=1 runs the inline bench model instead (its call a local activity of the workflow).
// Besides tasks/s it prints the worker's CPU time per task, which the other jobs of a shared machine
// disturb less than the rate.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { loadConfig } from '../src/config/env.js';
import { modelTaskQueue } from '../src/config/models.js';
import { connectTemporal } from '../src/temporal/client.js';
import { fmt, rssMiB, sleep, spawnWorker, startBenchStack, usesJemalloc } from './lib.js';

const TOTAL = Number(process.env.BENCH_TASKS ?? 10_000);
const IN_FLIGHT = 64;
const INLINE = process.env.BENCH_INLINE === '1';
const MODEL = INLINE ? 'bench-image-inline' : 'bench-image';

async function main() {
  const stack = await startBenchStack('memory');
  const { redis: redisSvc, temporal, env } = stack;
  const config = loadConfig({ ...process.env, ...env });
  const { client } = await connectTemporal(config);
  // LD_PRELOAD= (empty) runs the same worker on glibc's malloc, for comparison.
  const worker = spawnWorker(env);
  const run = (id: string) =>
    client.workflow.execute('imageTaskWorkflow', {
      workflowId: id,
      taskQueue: config.temporal.taskQueue,
      args: [
        {
          task: {
            id,
            owner: 'bench-owner',
            model: MODEL,
            created_at: Math.floor(Date.now() / 1000),
            request: { contents: [{ role: 'user', parts: [{ text: 'bench' }] }] },
          },
          policy: INLINE
            ? { timeoutMs: 1000, heartbeatTimeoutMs: 10_000, maxAttempts: 3, inline: true }
            : { timeoutMs: 120_000, heartbeatTimeoutMs: 10_000, maxAttempts: 3 },
          activityQueue: modelTaskQueue(config.temporal.taskQueue, MODEL),
        },
      ],
    });
  // The first task finishes once the worker is up (bundled, polling).
  await run(`task_${randomBytes(16).toString('hex')}`);
  await sleep(3000);
  const idle = rssMiB(worker.pid!);
  console.log(
    `worker (${usesJemalloc(worker.pid!) ? 'jemalloc' : 'glibc malloc'}) RSS idle (after 1 task): ${fmt(idle)} MiB`,
  );
  let next = 1;
  let peak = idle;
  const t0 = performance.now();
  const cpu0 = cpuSeconds(worker.pid!);
  // Sampled twice a second too, so the peak is not only what the thousandth tasks happened to see.
  const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(worker.pid!))), 500);
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < TOTAL) {
        const i = ++next;
        await run(`task_${randomBytes(16).toString('hex')}`);
        if (i % 1000 === 0) {
          const rss = rssMiB(worker.pid!);
          peak = Math.max(peak, rss);
          console.log(`  ${i} tasks: worker RSS ${fmt(rss)} MiB`);
        }
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  const after = rssMiB(worker.pid!);
  const cpuMsPerTask = ((cpuSeconds(worker.pid!) - cpu0) * 1000) / (TOTAL - 1);
  await sleep(5000);
  const settled = rssMiB(worker.pid!);
  // V8's memory reducer gives back what the burst left within ~30 s (BENCHMARKS.md, session 9).
  await sleep(25_000);
  const later = rssMiB(worker.pid!);
  console.log(
    `${TOTAL} tasks (${MODEL}) in ${fmt(seconds)} s (${fmt(TOTAL / seconds)} tasks/s, worker CPU ${fmt(cpuMsPerTask, 2)} ms/task); ` +
      `worker RSS: idle ${fmt(idle)} MiB, peak ${fmt(Math.max(peak, after))} MiB, right after ${fmt(after)} MiB, ` +
      `5 s later ${fmt(settled)} MiB, 30 s later ${fmt(later)} MiB`,
  );
  worker.kill('SIGTERM');
  await sleep(1000);
  await Promise.all([temporal.stop(), redisSvc.stop()]);
  process.exit(0);
}

/** User + system CPU time of a process, in seconds (Linux /proc/PID/stat, clock ticks of 1/100 s). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
