// `tsx bench/worker-memory.ts`: the worker process's resident memory, idle and after N image tasks
// (BENCH_TASKS, default 10,000) through the local provider with zero latency. Starts its own
// redis-server and Temporal dev server; tasks are started straight on Temporal (no API) and awaited
// 64 at a time, so what grows is the worker: its workflow cache, its isolates, its pollers.
import { randomBytes } from 'node:crypto';
import { loadConfig, modelTaskQueue } from '../src/config.js';
import { connectTemporal } from '../src/temporal/client.js';
import { fmt, rssMiB, sleep, spawnWorker, startBenchStack } from './lib.js';

const TOTAL = Number(process.env.BENCH_TASKS ?? 10_000);
const IN_FLIGHT = 64;

async function main() {
  const stack = await startBenchStack('memory');
  const { redis: redisSvc, temporal, env } = stack;
  const config = loadConfig({ ...process.env, ...env });
  const { client } = await connectTemporal(config);
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
            model: 'bench-image',
            created_at: Math.floor(Date.now() / 1000),
            request: { contents: [{ role: 'user', parts: [{ text: 'bench' }] }] },
          },
          policy: { timeoutMs: 120_000, heartbeatTimeoutMs: 10_000, maxAttempts: 3 },
          activityQueue: modelTaskQueue(config.temporal.taskQueue, 'bench-image'),
        },
      ],
    });
  // The first task finishes once the worker is up (bundled, polling).
  await run(`task_${randomBytes(16).toString('hex')}`);
  await sleep(3000);
  const idle = rssMiB(worker.pid!);
  console.log(`worker RSS idle (after 1 task): ${fmt(idle)} MiB`);
  let next = 1;
  let peak = idle;
  const t0 = performance.now();
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
  const after = rssMiB(worker.pid!);
  await sleep(5000);
  const settled = rssMiB(worker.pid!);
  console.log(
    `${TOTAL} tasks in ${fmt(seconds)} s (${fmt(TOTAL / seconds)} tasks/s); worker RSS: idle ${fmt(idle)} MiB, ` +
      `peak ${fmt(Math.max(peak, after))} MiB, right after ${fmt(after)} MiB, 5 s later ${fmt(settled)} MiB`,
  );
  worker.kill('SIGTERM');
  await sleep(1000);
  await Promise.all([temporal.stop(), redisSvc.stop()]);
  process.exit(0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
