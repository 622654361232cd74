// `npm run bench:memory`: what the whole stack costs in memory (PSS summed over every process,
// bench/memory.ts), idle, at its peak under load, and after, in the two forms a team meets first.
//
//   --form production (default): compiled, as `npm run bench` and production run it — the Temporal
//     dev server, redis-server, `bin/kiln-run api` (API_PROCESSES=2) and `bin/kiln-run worker`.
//     Idle is read after 50 warm-up tasks and BENCH_SETTLE_SECONDS (30); the load is 3 bursts of
//     200 tasks at 16 connections, a backlog of 1,000 (as `npm run bench`'s submit rounds make),
//     then 10 s each of polls and list pages at 32 connections; after
//     is read BENCH_SETTLE_SECONDS after the load.
//   --form dev: `npm run dev`, started as a new user starts it (its npm and shell wrappers count),
//     with its data in a temporary directory; idle is read BENCH_SETTLE_SECONDS after 200 tasks of
//     the default image model finished, and again once 30 more seconds have passed.
//
// Goals (issue 42): production ≤ 400 MiB idle and ≤ 600 MiB peak; dev ≤ 700 MiB idle after 200.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { binary, freePort, ROOT } from '../scripts/services.js';
import {
  cpuByRole,
  fmt,
  load,
  SUBMIT_BODY,
  sleep,
  spawnApi,
  spawnWorker,
  startBenchStack,
  waitHttp,
  type CpuRole,
} from './lib.js';
import { memoryText, peakSampler, stackMemory, treeMemory } from './memory.js';

const argv = process.argv.slice(2);
const FORM = argv.includes('--form') ? argv[argv.indexOf('--form') + 1] : 'production';
const SETTLE_S = Number(process.env.BENCH_SETTLE_SECONDS ?? 30);
/** Tasks submitted at once in the backlog phase (BENCH_BACKLOG). */
const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 1000);
const KEY = 'bench-key-memory-00000000000';
const say = (l: string) => console.error(`[bench:memory] ${l}`);

/** Tasks submitted so far (what Redis retains, for the per-task figure). */
let submitted = 0;

async function submitMany(base: string, model: string, n: number, connections: number): Promise<string[]> {
  const ids: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (next < n) {
        next++;
        const res = await fetch(`${base}/v1beta/models/${model}:generateContent`, {
          method: 'POST',
          headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
          body: SUBMIT_BODY,
        });
        const body = (await res.json()) as { id?: string };
        if (res.status !== 202 || !body.id) throw new Error(`submit answered ${res.status}: ${JSON.stringify(body)}`);
        ids.push(body.id);
        submitted++;
      }
    }),
  );
  return ids;
}

/** Waits until every id is terminal, by batch-get (100 ids per batch, each batch every 5.1 s: the limit). */
async function finished(base: string, ids: string[], timeoutMs = 600_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let open = ids;
  while (open.length) {
    if (Date.now() > deadline) throw new Error(`${open.length} of ${ids.length} tasks unfinished`);
    const still: string[] = [];
    for (let i = 0; i < open.length; i += 100) {
      const res = await fetch(`${base}/v1/tasks/batch-get`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ ids: open.slice(i, i + 100) }),
      });
      const body = (await res.json()) as { items: { id: string; status: string }[] };
      if (!res.ok) throw new Error(`batch-get answered ${res.status}: ${JSON.stringify(body)}`);
      for (const t of body.items) if (!['succeeded', 'failed', 'uncertain'].includes(t.status)) still.push(t.id);
    }
    open = still;
    if (open.length) await sleep(5100);
  }
}

async function production() {
  const stack = await startBenchStack('memory-stack', {
    LOG_LEVEL: 'info',
    API_PROCESSES: process.env.API_PROCESSES ?? '2',
    RATE_LIMIT_BATCH_MS: '0',
  });
  const { temporal, redis, base, env } = stack;
  // BENCH_WORKER_FLAGS: node flags for the worker alone (a memory setting to try).
  const worker = spawnWorker(env, process.env.BENCH_WORKER_FLAGS?.split(' ').filter(Boolean) ?? []);
  const api = spawnApi(env, [], join(stack.dir, 'api.log'));
  await waitHttp(`${base}/readyz`);
  const roles: Record<string, CpuRole> = {
    temporal: { cmdline: (c) => /temporal/.test(c) && c.includes(`--port ${temporal.port} `) },
    redis: { cmdline: (c) => c.includes('redis-server') && c.includes(`:${redis.port}`) },
    api: { tree: [api.pid!] },
    worker: { tree: [worker.pid!] },
  };
  /** `tasks` tasks run by `run`: their rate, and each role's CPU per task. */
  const perTask = async (tasks: number, run: () => Promise<unknown>) => {
    const cpu0 = cpuByRole(roles);
    const t0 = performance.now();
    await run();
    const s = (performance.now() - t0) / 1000;
    const per = Object.entries(cpuByRole(roles)).map(([k, v]) => `${k} ${fmt((v - cpu0[k]) / tasks)}`);
    return { rate: fmt(tasks / s), per: per.join(', ') };
  };
  await finished(base, await submitMany(base, 'bench-image', 50, 8));
  await sleep(SETTLE_S * 1000);
  const idle = stackMemory(roles);
  say(`idle after 50 tasks: ${memoryText(idle)}`);
  // Each phase's own peak, to see what sets the stack's: the bursts (Temporal, worker), the polls
  // and the list pages (the API processes).
  const phase = async (name: string, run: () => Promise<unknown>) => {
    const sampler = peakSampler(roles);
    await run();
    const p = sampler.stop();
    say(`peak during ${name}: ${memoryText(p)}`);
    return p;
  };
  const headers = { authorization: `Bearer ${KEY}` };
  let ids: string[] = [];
  const peaks = [
    await phase('3 bursts of 200 tasks', async () => {
      // CPU per task of each role over the bursts: what a lower-memory setting costs, less disturbed
      // by other work on the machine than the rate is.
      const { rate, per } = await perTask(600, async () => {
        for (let round = 0; round < 3; round++) await finished(base, await submitMany(base, 'bench-image', 200, 16));
      });
      say(`bursts: ${rate} tasks/s (batch-get polls every 5.1 s bound it); CPU ms per task: ${per}`);
      ids = await submitMany(base, 'bench-image', 100, 8);
      await finished(base, ids);
    }),
    // npm run bench's submit rounds: submits outpace the worker (~100 against ~25 a second), so
    // several hundred workflows are open at once, each in the worker's workflow cache.
    await phase(`a backlog of ${BACKLOG} tasks`, async () => {
      const { rate, per } = await perTask(BACKLOG, async () =>
        finished(base, await submitMany(base, 'bench-image', BACKLOG, 16)),
      );
      say(`backlog: ${rate} tasks/s; CPU ms per task: ${per}`);
    }),
    await phase('10 s of polls', () =>
      load({ url: `${base}/v1/tasks/${ids[0]}`, connections: 32, seconds: 10, headers }),
    ),
    await phase('10 s of list pages', () =>
      load({ url: `${base}/v1/tasks?limit=100`, connections: 32, seconds: 10, headers }),
    ),
  ];
  const peak = peaks.reduce((a, b) => (b.total > a.total ? b : a));
  say(`peak: ${memoryText(peak)}`);
  await sleep(SETTLE_S * 1000);
  const after = stackMemory(roles);
  say(`after, ${SETTLE_S} s idle: ${memoryText(after)}`);
  // What each retained task costs Redis (records, the owner's list, indexes) for sizing: every task so far.
  const info = execFileSync(binary('redis-server', 'REDIS_SERVER_BIN').replace(/redis-server$/, 'redis-cli'), [
    '-p',
    String(redis.port),
    'INFO',
    'memory',
  ]).toString();
  const dataset = Number(/used_memory_dataset:(\d+)/.exec(info)?.[1]);
  say(
    `Redis dataset: ${fmt(dataset / 2 ** 20)} MiB for ${submitted} tasks, ${fmt(dataset / submitted / 1024)} KiB per task`,
  );
  api.kill('SIGTERM');
  worker.kill('SIGTERM');
  await sleep(1000);
  await stack.stop();
  return { idle, peak, after, goal: 'idle ≤ 400 MiB, peak ≤ 600 MiB' };
}

async function dev() {
  const data = mkdtempSync(join(tmpdir(), 'kiln-dev-memory-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  // A new user's `npm run dev`: npm, its bootstrap, the Node it runs on, the console build.
  const npm = spawn('npm', ['run', 'dev'], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), KILN_DEV_DATA: data },
    stdio: ['ignore', 'ignore', 'inherit'],
    detached: true,
  });
  process.once('exit', () => {
    try {
      process.kill(-npm.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
  });
  await waitHttp(`${base}/readyz`, 300_000);
  const groups: [string, RegExp][] = [
    ['temporal', /temporal server start-dev/],
    ['redis', /redis-server/],
    ['api', /api\/main\.js/],
    ['worker', /worker\/main\.js/],
    ['dev.js', /scripts\/dev\.js/],
    ['npm and sh', /^(npm|sh|bash) /],
  ];
  const measure = () => treeMemory(npm.pid!, groups);
  const started = measure();
  say(`started: ${memoryText(started)}`);
  await finished(base, await submitMany(base, 'kiln-image-1', 200, 8));
  await sleep(SETTLE_S * 1000);
  const idle = measure();
  say(`idle after 200 tasks: ${memoryText(idle)}`);
  await sleep(30_000);
  const after = measure();
  say(`30 s later: ${memoryText(after)}`);
  process.kill(-npm.pid!, 'SIGINT');
  await sleep(5000);
  rmSync(data, { recursive: true, force: true });
  return { started, idle, after, goal: 'idle after 200 tasks ≤ 700 MiB' };
}

async function main() {
  const result = FORM === 'dev' ? await dev() : await production();
  const rows = Object.entries(result)
    .filter(([k]) => k !== 'goal')
    .map(([k, m]) => `| ${FORM} | ${k} | ${typeof m === 'string' ? m : memoryText(m)} |`);
  console.log(
    [
      `Run: \`npm run bench:memory -- --form ${FORM}\` on ${new Date().toISOString()} (goal: ${result.goal}; settle ${fmt(SETTLE_S, 0)} s)`,
      '',
      '| Form | When | PSS, all processes |',
      '|---|---|---|',
      ...rows,
    ].join('\n'),
  );
  process.exit(0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
