// `npm run bench`: Kiln side by side with its baselines, in one run, on this machine.
// Starts its own redis-server, Temporal dev server, worker and API (local provider, zero latency).
import { randomBytes } from 'node:crypto';
import { cpus, totalmem } from 'node:os';
import { readFileSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { binary, freePort, ROOT } from '../scripts/services.js';
import { loadConfig } from '../src/config/env.js';
import { ownerOfKey } from '../src/infra/callers.js';
import { modelTaskQueue } from '../src/config/models.js';
import { connectTemporal } from '../src/temporal/client.js';
import { createTaskStore } from '../src/tasks/store/create.js';
import { SA } from '../src/temporal/search-attributes.js';
import { taskSummary } from '../src/tasks/summary.js';
import type { ImageTaskRecord } from '../src/shared/image-task.js';
import {
  fanOut,
  benchTaskInput,
  cpuByRole,
  readThreads,
  threadSplit,
  fmt,
  load,
  loop,
  pct,
  rssMiB,
  sleep,
  spawnApi,
  spawnTs,
  spawnWorker,
  startBenchStack,
  SUBMIT_BODY,
  drainTasks,
  waitHttp,
  type CpuRole,
  pinRoles,
  type LoadResult,
} from './lib.js';
import { memoryText, peakSampler, stackMemory } from './memory.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const TOTAL_TASKS = Number(process.env.BENCH_TASKS ?? 10_000);
/** Tasks per round of the batch comparison with the minimal workflow. */
const BATCH = Number(process.env.BENCH_BATCH ?? 200);
/** Unmeasured load before each read scenario, on Kiln and on the baselines alike (`load`). */
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 1);
/** Alternating rounds of the read scenarios against bare Koa (their ratios are medians over rounds). */
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
/** How long after the last load the settled memory is read. */
const SETTLE_SECONDS = Number(process.env.BENCH_SETTLE_SECONDS ?? 30);
/** BENCH_ONLY=reads: only the read scenarios (poll, batch-get, list) with their baselines, and memory. */
const READS_ONLY = process.env.BENCH_ONLY === 'reads';
/** BENCH_ONLY=batch: only the 200-task rounds against the minimal workflow (and their CPU), and memory. */
const BATCH_ONLY = process.env.BENCH_ONLY === 'batch';
/** Measured rounds of each kind in the 200-task comparison (medians are reported). */
const BATCH_ROUNDS = Math.max(1, Number(process.env.BENCH_BATCH_ROUNDS ?? 3));
const KEY = 'bench-key-owner-0000000000';
const OTHER_KEY = 'bench-key-other-0000000000';

async function main() {
  // The production default log level: every request writes its log line (to a file, as in production).
  const stack = await startBenchStack('bench', { MAX_UNFINISHED_TASKS: '1000000', LOG_LEVEL: 'info' });
  const { dir, redis: redisSvc, temporal, base, env } = stack;
  const barePort = await freePort();
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
  const pinned =
    process.env.BENCH_PIN === '1' &&
    pinRoles({
      server: { ...serverRole, cpu: 0 },
      redis: { ...redisRole, cpu: 0 },
      worker: { tree: [worker.pid!], cpu: 0 },
      api: { tree: [api.pid!], cpu: 1 },
      driver: { pid: process.pid, cpu: 1 },
    });
  if (process.env.BENCH_PIN === '1' && !pinned) throw new Error('BENCH_PIN=1 needs taskset and 2 CPUs');
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
  let submitted = 0;

  // Warm up: JIT, connections, the workflow cache.
  for (let i = 0; i < 50; i++) await submitOne();
  submitted += 50;
  await drain();
  // Measured once the worker runs (it bundles its workflows first, in a child process).
  await sleep(2000);
  const idle = { api: apiRss(api.pid!), worker: rssMiB(worker.pid!), stack: stackMemory(stackRoles) };
  const peak = peakSampler(stackRoles);

  // A task's workflow input, as Kiln starts it: the raw starts of the submit rounds and end to end.
  const input = (id: string) => benchTaskInput(id, owner, modelTaskQueue(config.temporal.taskQueue, 'bench-image'));
  // BENCH_ONLY=reads skips the task rows (submit, batch against the minimal workflow).
  if (!READS_ONLY) {
    // 1. Submit over HTTP vs a raw workflow start of the same workflow and input, in alternating
    // rounds (the worker runs the started tasks meanwhile; the backlog is drained between rounds).
    // What Kiln's start carries for operators: owner and model search attributes (visibility writes)
    // and the Web UI summary.
    const operatorViewOptions = {
      typedSearchAttributes: [
        { key: SA.owner, value: owner },
        { key: SA.model, value: 'bench-image' },
      ],
      staticSummary: taskSummary('image', 'bench-image', owner, 'bench', config.ops.summaryPromptChars),
    };
    const rawStart = (operatorView: boolean) => () => {
      const id = `task_${randomBytes(16).toString('hex')}`;
      return client.workflow.start('imageTaskWorkflow', {
        workflowId: id,
        taskQueue: config.temporal.taskQueue,
        args: [input(id)],
        ...(operatorView ? operatorViewOptions : {}),
      });
    };
    const submitKinds = {
      submit: () =>
        load({
          url: `${base}/v1beta/models/bench-image:generateContent`,
          method: 'POST',
          headers: auth,
          body: SUBMIT_BODY,
          connections: 16,
          seconds: SECONDS,
        }),
      raw: () => loop(16, SECONDS, rawStart(false)),
      rawKiln: () => loop(16, SECONDS, rawStart(true)),
    };
    const submitResults: Record<keyof typeof submitKinds, LoadResult[]> = { submit: [], raw: [], rawKiln: [] };
    const order = Object.keys(submitKinds) as (keyof typeof submitKinds)[];
    for (let round = 0; round < (BATCH_ONLY ? 0 : ROUNDS); round++) {
      // Each round starts with the next kind: a place in the round (the server's SQLite checkpoints,
      // the host's moods) favours no kind over the run.
      for (let i = 0; i < order.length; i++) {
        const kind = order[(round + i) % order.length];
        const r = await submitKinds[kind]();
        submitted += Math.round(r.rps * SECONDS);
        submitResults[kind].push(r);
        await drain();
      }
    }
    const { submit: subs, raw: raws, rawKiln: rawKilns } = submitResults;
    if (!BATCH_ONLY)
      rows.push(
        {
          what: 'submit (16 connections)',
          kiln: median(subs),
          base: median(raws),
          baseName: 'raw client.workflow.start',
          ratioText: roundRatios(subs, raws),
        },
        {
          what: 'submit (16 connections), against the start Kiln makes',
          kiln: median(subs),
          base: median(rawKilns),
          baseName: "raw client.workflow.start with Kiln's search attributes and summary",
          ratioText: roundRatios(subs, rawKilns),
        },
      );

    // 1b. A batch of tasks through Kiln, first submit to all terminal in the read model, vs the least
    // a task can cost on this Temporal server: a workflow that runs one activity on its own queue and
    // returns (bench/minimal: its own worker process and bundle, not in Kiln's). Rounds alternate;
    // the median of each is reported.
    const minimalWorker = spawnTs('bench/minimal/worker.ts', {
      TEMPORAL_ADDRESS: temporal.url,
      MINIMAL_QUEUE: 'bench-min',
    });
    // Pinned, the minimal worker takes Kiln's worker's core, not the driver's it was started from.
    if (pinned) pinRoles({ worker: { tree: [minimalWorker.pid!], cpu: 0 } });
    // `operatorView`: started with what Kiln's start carries for operators (above).
    // `local`: the same activity as a local activity (a marker in history, no activity task): the
    // shape issue 12 weighs for the upstream call, measured here before Kiln takes it.
    const startMinimal = (operatorView = false, local = false) =>
      client.workflow.start(local ? 'minimalLocalWorkflow' : 'minimalBaselineWorkflow', {
        workflowId: `min_${randomBytes(16).toString('hex')}`,
        taskQueue: 'bench-min',
        args: local ? [] : ['bench-min.act'],
        ...(operatorView ? operatorViewOptions : {}),
      });
    // Waits for its worker; warms it up.
    for (let i = 0; i < 20; i++)
      await Promise.all([(await startMinimal()).result(), (await startMinimal(false, true)).result()]);
    const minimalRound = async (operatorView = false, local = false) => {
      const t = performance.now();
      const handles = await fanOut(BATCH, 16, () => startMinimal(operatorView, local));
      await Promise.all(handles.map((h) => h.result()));
      return performance.now() - t;
    };
    const kilnRound = async (model = 'bench-image') => {
      const t = performance.now();
      await fanOut(BATCH, 16, () => submitOne(KEY, model));
      while ((await store.unfinishedCount()) > 0) await sleep(5);
      return performance.now() - t;
    };
    // Where each round's CPU goes, by process: on a machine this size the time of a batch is its CPU.
    const cpuRoles: Record<string, CpuRole> = {
      'Temporal server': serverRole,
      Redis: redisRole,
      'Kiln API': { tree: [api.pid!] },
      'Kiln worker': { tree: [worker.pid!] },
      'minimal worker': { tree: [minimalWorker.pid!] },
      'bench driver': { pid: process.pid },
    };
    const cpuPerTask: Record<
      'kiln' | 'kilnInline' | 'minimal' | 'minimalView' | 'minimalLocal',
      Record<string, number>[]
    > = {
      kiln: [],
      kilnInline: [],
      minimal: [],
      minimalView: [],
      minimalLocal: [],
    };
    // The worker that ran the round, by thread: where a task's worker CPU goes, Kiln's and the SDK's.
    const threadPerTask: Record<'kiln' | 'minimal', Record<string, number>[]> = { kiln: [], minimal: [] };
    const perTask = (before: Record<string, number>, after: Record<string, number>) =>
      Object.fromEntries(Object.keys(after).map((k) => [k, (after[k] - before[k]) / BATCH]));
    const measured = async (kind: keyof typeof cpuPerTask, round: () => Promise<number>) => {
      const threadsOf = kind === 'kiln' ? worker.pid! : kind === 'minimal' ? minimalWorker.pid! : null;
      const before = cpuByRole(cpuRoles);
      const threadsBefore = threadsOf ? readThreads(threadsOf) : null;
      const ms = await round();
      const after = cpuByRole(cpuRoles);
      if (threadsOf && threadsBefore) {
        const split = threadSplit(threadsOf, threadsBefore, readThreads(threadsOf));
        threadPerTask[kind as 'kiln' | 'minimal'].push(
          Object.fromEntries(Object.entries(split).map(([k, v]) => [k, v / BATCH])),
        );
      }
      cpuPerTask[kind].push(perTask(before, after));
      return ms;
    };
    const minimalMs: number[] = [];
    const minimalViewMs: number[] = [];
    const minimalLocalMs: number[] = [];
    const kilnMs: number[] = [];
    const kilnInlineMs: number[] = [];
    const inlineRound = () => kilnRound('bench-image-inline');
    // One round of each first, not measured: until the drain waited for raw starts, the first batch
    // ran beside the submit rounds' backlog (1.7-3x slower); it stays as the minimal worker's and the
    // inline path's warm-up.
    await minimalRound();
    await kilnRound();
    await inlineRound();
    submitted += 2 * BATCH;
    for (let round = 0; round < BATCH_ROUNDS; round++) {
      minimalMs.push(await measured('minimal', () => minimalRound()));
      kilnMs.push(await measured('kiln', () => kilnRound()));
      kilnInlineMs.push(await measured('kilnInline', inlineRound));
      minimalViewMs.push(await measured('minimalView', () => minimalRound(true)));
      minimalLocalMs.push(await measured('minimalLocal', () => minimalRound(false, true)));
    }
    submitted += 2 * BATCH_ROUNDS * BATCH;
    minimalWorker.kill('SIGTERM');
    const [kilnBatch, kilnInlineBatch, minimalBatch, minimalViewBatch, minimalLocalBatch] = [
      kilnMs,
      kilnInlineMs,
      minimalMs,
      minimalViewMs,
      minimalLocalMs,
    ].map((ms) => pct(ms, 50));
    const roundsOf = (ms: number[]) => `rounds ${ms.map((m) => fmt(m, 0)).join(', ')}`;
    const batchWhat = `${BATCH} tasks, first submit → all terminal in Redis (16 callers, median of ${BATCH_ROUNDS})`;
    const batchKiln = `${fmt(kilnBatch, 0)} ms (${fmt(BATCH / (kilnBatch / 1000), 0)} tasks/s; ${roundsOf(kilnMs)})`;
    const minimalName =
      'minimal workflow (one activity on its own queue), started by client.workflow.start, all results';
    rows.push({
      what: batchWhat,
      kiln: batchKiln,
      base: `${fmt(minimalBatch, 0)} ms (${roundsOf(minimalMs)})`,
      baseName: minimalName,
      ratioText: timeRatios(kilnMs, minimalMs),
    });
    rows.push({
      what: `${batchWhat}, against the minimal workflow started as Kiln starts a task`,
      kiln: batchKiln,
      base: `${fmt(minimalViewBatch, 0)} ms (${roundsOf(minimalViewMs)})`,
      baseName: `${minimalName}; started with Kiln's search attributes and summary`,
      ratioText: timeRatios(kilnMs, minimalViewMs),
    });
    rows.push({
      what: `${batchWhat}, on an inline model (its call a local activity: 6 history events, one workflow task)`,
      kiln: `${fmt(kilnInlineBatch, 0)} ms (${fmt(BATCH / (kilnInlineBatch / 1000), 0)} tasks/s; ${roundsOf(kilnInlineMs)})`,
      base: `${fmt(minimalBatch, 0)} ms`,
      baseName: minimalName,
      ratioText: `time ${fmt(kilnInlineBatch / minimalBatch, 2)}×`,
    });
    rows.push({
      what: `${BATCH} minimal workflows whose activity is a local activity (6 history events, one workflow task)`,
      kiln: '',
      base: `${fmt(minimalLocalBatch, 0)} ms (${roundsOf(minimalLocalMs)})`,
      baseName: 'against the minimal workflow above',
      ratioText: `time ${fmt(minimalLocalBatch / minimalBatch, 2)}×`,
    });
    /** Median CPU per task of each part over `rounds`, and their sum. */
    const cpuOf = (kind: keyof typeof cpuPerTask, rounds: Record<string, number>[] = cpuPerTask[kind]) => {
      const roles = Object.keys(rounds[0]);
      const med = Object.fromEntries(
        roles.map((r) => [
          r,
          pct(
            rounds.map((c) => c[r]),
            50,
          ),
        ]),
      );
      const total = Object.values(med).reduce((a, b) => a + b, 0);
      const parts = roles.filter((r) => med[r] >= 0.05).map((r) => `${r} ${fmt(med[r])}`);
      return { total, text: `${fmt(total)} ms (${parts.join(', ')})` };
    };
    const [kilnCpu, kilnInlineCpu, minimalCpu, minimalViewCpu, minimalLocalCpu] = [
      cpuOf('kiln'),
      cpuOf('kilnInline'),
      cpuOf('minimal'),
      cpuOf('minimalView'),
      cpuOf('minimalLocal'),
    ];
    rows.push({
      what: `CPU per task in those rounds, by process (ms, /proc, median of ${BATCH_ROUNDS}; idle processes count their background)`,
      kiln: kilnCpu.text,
      note: `Kiln on an inline model: ${kilnInlineCpu.text}; minimal: ${minimalCpu.text}; minimal started as Kiln starts a task: ${minimalViewCpu.text}; minimal with a local activity: ${minimalLocalCpu.text}`,
      ratioText: `CPU ${fmt(kilnCpu.total / minimalCpu.total, 2)}× / ${fmt(kilnCpu.total / minimalViewCpu.total, 2)}×`,
    });
    const [kilnThreads, minimalThreads] = [cpuOf('kiln', threadPerTask.kiln), cpuOf('minimal', threadPerTask.minimal)];
    rows.push({
      what: "the worker's CPU per task in those rounds, by thread (workflow thread: the SDK's sandbox; V8 helpers: concurrent GC and compilation; libuv pool: file I/O; exited threads: the sandbox's watchdogs)",
      kiln: `Kiln worker: ${kilnThreads.text}`,
      note: `minimal worker: ${minimalThreads.text}`,
      ratioText: `CPU ${fmt(kilnThreads.total / minimalThreads.total, 2)}×`,
    });
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
      what: `resident memory 2 s after ${submitted} tasks`,
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
    report(rows, { seconds: SECONDS, pinned });
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

  // Records to read: own finished tasks, another owner's, and well-formed ids that do not exist.
  const own: string[] = [];
  for (let i = 0; i < 100; i++) own.push((await submitOne()).id);
  const others: string[] = [];
  for (let i = 0; i < 30; i++) others.push((await submitOne(OTHER_KEY)).id);
  const video = (await (
    await fetch(`${base}/v1/videos`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ model: 'bench-video', prompt: 'bench' }),
    })
  ).json()) as { id: string };
  submitted += 131;
  await drain();
  const ghosts = Array.from({ length: 30 }, () => `task_${randomBytes(16).toString('hex')}`);

  // Owners to list: one with 10,000 tasks, the peer's 2,000, 100 and 10.
  const now = Math.floor(Date.now() / 1000);
  const seed = async (name: string, n: number) => {
    const o = ownerOfKey(config.ownerKey, name);
    for (let i = 0; i < n; i += 500) {
      await Promise.all(
        Array.from({ length: Math.min(500, n - i) }, (_, j) => {
          const r: ImageTaskRecord = {
            id: `task_${randomBytes(16).toString('hex')}`,
            kind: 'image',
            owner: o,
            model: 'bench-image',
            status: 'succeeded',
            created_at: now - ((i + j) % 86400),
            finished_at: now,
            candidates: [],
            error: null,
          };
          return store.transition(r);
        }),
      );
    }
    return { authorization: `Bearer ${name}` };
  };
  const big = await seed('bench-owner-10000-xxxxxxxx', 10_000);
  const peerSized = await seed('bench-owner-2000-xxxxxxxxx', 2_000);
  const mid = await seed('bench-owner-100-xxxxxxxxxx', 100);
  const small = await seed('bench-owner-10-xxxxxxxxxxx', 10);

  // The baselines: a bare Koa handler answering the same body as a poll, and Koa + one ioredis read
  // of the same record.
  const pollUrl = `${base}/v1/tasks/${own[0]}`;
  const pollBody = await (await fetch(pollUrl, { headers: auth })).text();
  const bare = spawnTs('bench/bare-koa.ts', { PORT: String(barePort), BARE_BODY: pollBody });
  const koaRedisPort = await freePort();
  const bareRedis = spawnTs('bench/bare-koa.ts', {
    PORT: String(koaRedisPort),
    // The same way to Redis as Kiln's (its Unix socket): the baseline pays what Kiln's reads pay.
    BARE_REDIS_URL: env.REDIS_URL!,
    BARE_KEY: store.taskKey(own[0]),
  });
  await waitHttp(`http://127.0.0.1:${barePort}/`);
  await waitHttp(`http://127.0.0.1:${koaRedisPort}/`);
  const batchBody = JSON.stringify({ ids: [...own.slice(0, 40), ...others, ...ghosts] });
  // Unknown ids are asked of Temporal once; this first batch takes that cost out of the measurement.
  await fetch(`${base}/v1/tasks/batch-get`, { method: 'POST', headers: auth, body: batchBody });

  // 2–4. The reads against bare Koa, in BENCH_ROUNDS alternating rounds: this machine's host is
  // noisy (bare Koa alone moved between 24k and 41k req/s from one run to the next), so each ratio
  // is the median of the ratios within a round, where both sides met the same conditions.
  let cursor = Math.floor(Date.now() / 1000) + 86400;
  const reads: { what: string; opts: Omit<Parameters<typeof load>[0], 'seconds'> }[] = [
    { what: 'bare Koa handler (32 connections)', opts: { url: `http://127.0.0.1:${barePort}/`, connections: 32 } },
    {
      what: 'Koa + one ioredis HGET + JSON.parse/stringify of the record',
      opts: { url: `http://127.0.0.1:${koaRedisPort}/`, connections: 32 },
    },
    { what: 'single poll (32 connections)', opts: { url: pollUrl, headers: auth, connections: 32 } },
    {
      what: 'video poll (32 connections)',
      opts: { url: `${base}/v1/videos/${video.id}`, headers: auth, connections: 32 },
    },
    {
      what: 'batch-get of 100 own ids (32 connections)',
      opts: {
        url: `${base}/v1/tasks/batch-get`,
        method: 'POST',
        headers: auth,
        body: JSON.stringify({ ids: own }),
        connections: 32,
      },
    },
    {
      what: "batch-get of 100 ids: 40 own, 30 another owner's, 30 unknown",
      opts: { url: `${base}/v1/tasks/batch-get`, method: 'POST', headers: auth, body: batchBody, connections: 32 },
    },
    {
      what: 'list limit=100, owner with 2,000 tasks (16 connections)',
      opts: { url: `${base}/v1/tasks?limit=100`, headers: peerSized, connections: 16 },
    },
    {
      // The same page, but every request names a cursor of its own (after every task), so no API
      // process has it kept: what a page costs when it is made (src/tasks/store/list-pages.ts).
      what: 'list limit=100, owner with 2,000 tasks, a new cursor each page (16 connections)',
      opts: {
        url: `${base}/v1/tasks?limit=100`,
        headers: peerSized,
        connections: 16,
        requests: [{ setupRequest: (req) => ({ ...req, path: `/v1/tasks?limit=100&before_created_at=${cursor++}` }) }],
      },
    },
  ];
  const rounds = reads.map((): LoadResult[] => []);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, r] of reads.entries())
      rounds[i].push(await load({ ...r.opts, seconds: SECONDS, warmupSeconds: WARMUP_SECONDS }));
  }
  bare.kill();
  bareRedis.kill();
  const koa = rounds[0];
  for (const [i, r] of reads.entries()) {
    if (i === 0) {
      rows.push({ what: r.what, kiln: median(koa), note: `the baseline of the ratios below; ${roundsText(koa)}` });
      continue;
    }
    rows.push({
      what: r.what,
      kiln: median(rounds[i]),
      base: median(koa),
      baseName: 'bare Koa handler, same body',
      ratioText: roundRatios(rounds[i], koa),
    });
    if (i === 2) {
      const redisRead = await loop(32, SECONDS, () => redis.hget(store.taskKey(own[0]), 'j'));
      rows.push({
        what: '  the same record, raw ioredis HGET (32 in flight)',
        kiln: redisRead,
        note: 'no HTTP, no JSON: the floor of one Redis round trip',
      });
    }
  }

  // BENCH_ONLY=reads: the read scenarios and their baselines, then memory.
  if (READS_ONLY) return finish();

  // List flatness: the same page size from owners with 10,000, 100 and 10 tasks, in alternating
  // rounds too (one round each moved the 10,000-vs-100 ratio between 0.86 and 1.03 across runs).
  const listPage = (headers: Record<string, string>) =>
    load({
      url: `${base}/v1/tasks?limit=100`,
      headers,
      connections: 32,
      seconds: SECONDS,
      warmupSeconds: WARMUP_SECONDS,
    });
  const [bigs, mids, smalls]: LoadResult[][] = [[], [], []];
  for (let round = 0; round < ROUNDS; round++) {
    bigs.push(await listPage(big));
    mids.push(await listPage(mid));
    smalls.push(await listPage(small));
  }
  const listSmall = median(smalls);
  rows.push({
    what: 'list limit=100, owner with 10,000 tasks',
    kiln: median(bigs),
    base: median(mids),
    baseName: 'owner with 100 tasks (same page size)',
    ratioText: roundRatios(bigs, mids),
  });
  rows.push({ what: 'list limit=100, owner with 10 tasks', kiln: listSmall, note: 'page of 10 items' });

  // 5. End to end: submit → first poll that sees succeeded, vs raw start + result().
  const e2e: number[] = [];
  for (let i = 0; i < 30; i++) {
    const t = performance.now();
    const { id } = await submitOne();
    for (;;) {
      const r = (await (await fetch(`${base}/v1/tasks/${id}`, { headers: auth })).json()) as { status: string };
      if (r.status === 'succeeded') break;
      await sleep(5);
    }
    e2e.push(performance.now() - t);
  }
  const rawE2e: number[] = [];
  for (let i = 0; i < 30; i++) {
    const id = `task_${randomBytes(16).toString('hex')}`;
    const t = performance.now();
    await client.workflow.execute('imageTaskWorkflow', {
      workflowId: id,
      taskQueue: config.temporal.taskQueue,
      args: [input(id)],
    });
    rawE2e.push(performance.now() - t);
  }
  submitted += 60;
  const asLoad = (v: number[]): LoadResult => ({ rps: NaN, p50: pct(v, 50), p99: pct(v, 99), errors: 0, non2xx: 0 });
  rows.push({
    what: 'end to end: submit → succeeded seen by a 5 ms poll loop',
    kiln: asLoad(e2e),
    base: asLoad(rawE2e),
    baseName: 'raw workflow execute (start + result)',
  });

  // 6. Sustained: the rest of TOTAL_TASKS submitted at 32 connections, until all are finished.
  // (None left when the rounds above already submitted that many.)
  const rest = TOTAL_TASKS - submitted;
  if (rest > 0) {
    const t0 = performance.now();
    const sustained = await (
      await import('autocannon')
    ).default({
      url: `${base}/v1beta/models/bench-image:generateContent`,
      method: 'POST',
      headers: auth,
      body: SUBMIT_BODY,
      connections: 32,
      amount: rest,
    });
    await drain();
    const elapsed = (performance.now() - t0) / 1000;
    submitted += rest;
    rows.push({
      what: `sustained: ${rest} tasks submitted and finished`,
      kiln: `${fmt(rest / elapsed)} tasks/s (${fmt(elapsed)} s, ${sustained.non2xx} non-2xx)`,
    });
  }
  await finish();
}

/** RSS of the API: the first process (which also supervises) and the others (or the one process). */
function apiRss(pid: number): string {
  let children: number[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    /* gone */
  }
  const own = `${fmt(rssMiB(pid))} MiB`;
  return children.length ? `first ${own}, others ${children.map((c) => `${fmt(rssMiB(c))}`).join(' / ')} MiB` : own;
}

/** The median of each figure over the rounds. */
function median(rs: LoadResult[]): LoadResult {
  const m = (f: (r: LoadResult) => number) => pct(rs.map(f), 50);
  return {
    rps: m((r) => r.rps),
    p50: m((r) => r.p50),
    p99: m((r) => r.p99),
    errors: rs.reduce((a, r) => a + r.errors, 0),
    non2xx: rs.reduce((a, r) => a + r.non2xx, 0),
  };
}

const roundsText = (rs: LoadResult[]) => `rounds ${rs.map((r) => fmt(r.rps, 0)).join(', ')} req/s`;

/**
 * The ratio of the medians, and each round's own ratio (a round runs both kinds back to back, so
 * its ratio shares the machine's state of the moment): how far this machine's noise moves it.
 */
function timeRatios(kiln: number[], base: number[]): string {
  const each = kiln.map((k, i) => k / base[i]);
  return (
    `time ${fmt(pct(kiln, 50) / pct(base, 50), 2)}× ` +
    `(by round ${each.map((x) => fmt(x, 2)).join(', ')}; their median ${fmt(pct(each, 50), 2)}×)`
  );
}

/** Throughput and p50 against the baseline: the median of the per-round ratios, and each round's. */
function roundRatios(kiln: LoadResult[], base: LoadResult[]): string {
  const rps = kiln.map((k, i) => k.rps / base[i].rps);
  const p50 = kiln.map((k, i) => k.p50 / base[i].p50);
  return (
    `throughput ${fmt(pct(rps, 50), 2)}× (rounds ${rps.map((x) => fmt(x, 2)).join(', ')}) · ` +
    `p50 ${fmt(pct(p50, 50), 2)}×`
  );
}

interface Row {
  what: string;
  kiln: LoadResult | string;
  base?: LoadResult | string;
  baseName?: string;
  note?: string;
  /** The last column when the cells are not load results. */
  ratioText?: string;
}

function report(rows: Row[], o: { seconds: number; pinned: boolean }) {
  const cell = (r?: LoadResult | string) =>
    r === undefined
      ? ''
      : typeof r === 'string'
        ? r
        : `${fmt(r.rps, 0)} req/s · p50 ${fmt(r.p50)} ms · ` +
          `p99 ${fmt(r.p99)} ms${r.errors + r.non2xx ? ` · ${r.errors + r.non2xx} errors` : ''}`;
  const ratio = (a: LoadResult | string, b?: LoadResult | string) => {
    if (typeof a === 'string' || b === undefined || typeof b === 'string') return '';
    return Number.isFinite(a.rps) && Number.isFinite(b.rps)
      ? `throughput ${fmt(a.rps / b.rps, 2)}× · p50 ${fmt(a.p50 / b.p50, 2)}×`
      : `p50 ${fmt(a.p50 / b.p50, 2)}× · p99 ${fmt(a.p99 / b.p99, 2)}×`;
  };
  const temporalVersion = execFileSync(binary('temporal', 'TEMPORAL_BIN'), ['--version']).toString().trim();
  const redisVersion = execFileSync(binary('redis-server', 'REDIS_SERVER_BIN'), ['--version'])
    .toString()
    .match(/v=(\S+)/)?.[1];
  const lines = [
    `Run: \`npm run bench\` (BENCH_SECONDS=${o.seconds}, BENCH_ROUNDS=${ROUNDS}, BENCH_TASKS=${TOTAL_TASKS}${process.env.BENCH_ONLY ? `, BENCH_ONLY=${process.env.BENCH_ONLY}` : ''}) on ${new Date().toISOString()}`,
    `Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${fmt(totalmem() / 2 ** 30)} GiB; ` +
      `Node ${process.version}; ${temporalVersion}; redis-server ${redisVersion}`,
    o.pinned
      ? 'Pinned (BENCH_PIN=1): Temporal dev server (SQLite), workers and Redis on CPU 0; API and load generator on CPU 1.'
      : 'Load generator, API, worker, Temporal dev server (SQLite) and Redis all share those cores.',
    '',
    '| Scenario | Kiln | Baseline | Kiln / baseline |',
    '|---|---|---|---|',
    ...rows.map((r) => {
      const baseline = r.baseName ? `${r.baseName}: ${cell(r.base)}` : (r.note ?? '');
      return `| ${r.what} | ${cell(r.kiln)} | ${baseline} | ${r.ratioText ?? ratio(r.kiln, r.base)} |`;
    }),
  ];
  const text = lines.join('\n');
  writeFileSync(join(ROOT, 'bench', 'last-run.md'), `${text}\n`);
  console.log(text);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
