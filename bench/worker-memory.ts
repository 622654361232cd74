// `tsx bench/worker-memory.ts`: the worker process's resident memory, idle and after N image tasks
// (BENCH_TASKS, default 10,000) through the local provider with zero latency. Starts its own
// redis-server and Temporal dev server; tasks are started straight on Temporal (no API) and awaited
// 64 at a time, so what grows is the worker: its workflow cache, its isolates, its pollers.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startRedis, startTemporal } from '../scripts/services.js';
import { loadConfig, modelTaskQueue } from '../src/config.js';
import { connectTemporal } from '../src/temporal/client.js';
import { fmt, rssMiB, sleep, spawnTs } from './lib.js';

const TOTAL = Number(process.env.BENCH_TASKS ?? 10_000);
const IN_FLIGHT = 64;

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-memory-'));
  const [redisSvc, temporal] = await Promise.all([
    startRedis({ dir: join(dir, 'redis'), persist: false }),
    startTemporal({ dbFile: join(dir, 'temporal.sqlite') }),
  ]);
  writeFileSync(
    join(dir, 'models.json'),
    JSON.stringify({
      models: [
        { id: 'bench-image', provider: 'local', latencyMs: 0, idempotent: true, concurrency: 64 },
        { id: 'bench-video', kind: 'video', provider: 'local', latencyMs: 0, pollIntervalMs: 100 },
      ],
    }),
  );
  const env = {
    KILN_SECRET: randomBytes(32).toString('hex'),
    REDIS_URL: redisSvc.url,
    TEMPORAL_ADDRESS: temporal.url,
    MODELS_FILE: join(dir, 'models.json'),
    PUBLIC_BASE_URL: 'http://127.0.0.1:1',
    BLOB_DIR: join(dir, 'blobs'),
    LOG_LEVEL: 'warn',
  };
  const config = loadConfig({ ...process.env, ...env });
  const { client } = await connectTemporal(config);
  const worker = spawnTs('src/worker.ts', env);
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
