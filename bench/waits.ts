// `npm run bench:waits`: 10,000 concurrent long-polls (GET /v1/tasks/{id}?wait=60) against one
// compiled API process. Prints the API's resident memory before, while and after they wait, and the
// time from one transition (written straight into the read model, as a worker would) to each answer.
import { Agent, request } from 'node:http';
import { Redis } from 'ioredis';
import { loadConfig } from '../src/config/env.js';
import { ownerOfKey } from '../src/infra/callers.js';
import { createTaskStore } from '../src/tasks/store/create.js';
import { newImageRecord } from '../src/shared/image-task.js';
import { fmt, pct, rssMiB, sleep, spawnApi, startBenchStack, waitHttp } from './lib.js';

const WAITERS = Number(process.env.BENCH_WAITERS ?? 10_000);
const KEY = 'bench-key-owner-0000000000';

async function main() {
  const stack = await startBenchStack('bench-waits', { API_PROCESSES: '1', LOG_LEVEL: 'error' });
  const { base, env } = stack;
  const config = loadConfig({ ...process.env, ...env });
  const api = spawnApi(env);
  const redis = new Redis(stack.redis.url);
  try {
    await waitHttp(`${base}/healthz`);
    const store = createTaskStore(redis, { prefix: config.redisPrefix, retentionSeconds: config.retentionSeconds });
    const owner = ownerOfKey(config.ownerKey, KEY);
    const task = (id: string) => ({ id, owner, model: 'bench-image', created_at: Math.floor(Date.now() / 1000) });
    const record = newImageRecord(task(`task_${'b'.repeat(32)}`), 'running');
    await store.transition(record);
    // One socket per waiting request, as 10,000 separate clients would hold.
    const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
    const url = new URL(`${base}/v1/tasks/${record.id}?wait=60`);
    // A failed request (reset, refused) is counted, not thrown: the figures say how many.
    let failed = 0;
    const get = () =>
      new Promise<{ status: number; body: string; at: number }>((resolve) => {
        const req = request(url, { agent, headers: { authorization: `Bearer ${KEY}` } }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body, at: performance.now() }));
        });
        req.on('error', (err) => {
          failed++;
          resolve({ status: 0, body: err.message, at: performance.now() });
        });
        req.end();
      });
    const waiting = async () => {
      const text = await (await fetch(`${base}/metrics`)).text();
      return Number(/^kiln_wait_requests (\d+)/m.exec(text)?.[1] ?? 0);
    };

    // Warm up (JIT, the Redis connections), then let the process settle.
    for (let i = 0; i < 200; i++)
      await (await fetch(`${base}/v1/tasks/${record.id}`, { headers: { authorization: `Bearer ${KEY}` } })).text();
    await sleep(2000);
    const before = rssMiB(api.pid!);

    const opened = performance.now();
    const answers: Promise<{ status: number; body: string; at: number }>[] = [];
    // In steps, so the listen backlog is not what is measured.
    for (let i = 0; i < WAITERS; i += 200) {
      for (let j = i; j < Math.min(WAITERS, i + 200); j++) answers.push(get());
      await sleep(50);
    }
    console.log(`[bench:waits] ${WAITERS} requests sent`);
    let n = 0;
    while ((n = await waiting()) + failed < WAITERS) {
      if (performance.now() - opened > 50_000) throw new Error(`only ${n} of ${WAITERS} requests are waiting`);
      await sleep(100);
    }
    const allWaitingMs = performance.now() - opened;
    await sleep(1000);
    const during = rssMiB(api.pid!);

    const changed = performance.now();
    await store.transition({ ...record, status: 'succeeded', finished_at: Math.floor(Date.now() / 1000) });
    const done = await Promise.all(answers);
    const lat = done.filter((a) => a.status === 200).map((a) => a.at - changed);
    const ok = done.filter((a) => a.status === 200 && a.body.includes('"succeeded"')).length;
    await sleep(2000);
    const after = rssMiB(api.pid!);
    const left = await waiting();

    console.log(`\nwait (long-poll) benchmark: ${WAITERS} concurrent GET /v1/tasks/{id}?wait=60, one API process\n`);
    console.log(`| what | value |\n|---|---|`);
    console.log(`| API RSS before (MiB) | ${fmt(before)} |`);
    console.log(`| API RSS while ${WAITERS} wait (MiB) | ${fmt(during)} |`);
    console.log(`| per waiting request (KiB) | ${fmt(((during - before) * 1024) / WAITERS)} |`);
    console.log(`| API RSS 2 s after all answered (MiB) | ${fmt(after)} |`);
    console.log(`| time to have all ${WAITERS} registered (ms) | ${fmt(allWaitingMs, 0)} |`);
    console.log(
      `| transition -> answer first / p50 / p99 / last (ms) | ${fmt(Math.min(...lat), 0)} / ` +
        `${fmt(pct(lat, 50), 0)} / ${fmt(pct(lat, 99), 0)} / ${fmt(Math.max(...lat), 0)} |`,
    );
    console.log(`| answers 200 succeeded | ${ok} of ${WAITERS} |`);
    console.log(`| still waiting afterwards | ${left} |`);
    console.log(`| requests that failed (reset, refused) | ${failed} |`);
    agent.destroy();
  } finally {
    redis.disconnect();
    api.kill('SIGTERM');
    await stack.stop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
