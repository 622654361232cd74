// `npm run bench`'s 200-task comparison: a batch of tasks through Kiln, first submit to all
// terminal in the read model, against the least a task can cost on this Temporal server, and
// where each round's CPU goes.
import { randomBytes } from 'node:crypto';
import {
  benchOperatorView,
  cpuByRole,
  fanOut,
  fmt,
  pct,
  pinRoles,
  readThreads,
  sleep,
  spawnTs,
  threadSplit,
  type CpuRole,
} from '../lib.js';
import { BATCH, BATCH_ROUNDS, KEY, type RunContext } from './context.js';
import { timeRatios } from './report.js';

/**
 * 1b. The least a task can cost: a workflow that runs one activity on its own queue and returns
 * (bench/minimal: its own worker process and bundle, not in Kiln's). Rounds alternate; the median
 * of each is reported.
 */
export async function batchRows(ctx: RunContext): Promise<void> {
  const { client, store, submitOne, rows, tally, pinned, workerCpu, api, worker, serverRole, redisRole } = ctx;
  const { temporal } = ctx.stack;
  const opView = benchOperatorView(ctx.owner, ctx.config.ops.summaryPromptChars);
  const minimalWorker = spawnTs('bench/minimal/worker.ts', {
    TEMPORAL_ADDRESS: temporal.url,
    MINIMAL_QUEUE: 'bench-min',
  });
  // Pinned, the minimal worker takes Kiln's worker's core, not the driver's it was started from.
  if (pinned) pinRoles({ worker: { tree: [minimalWorker.pid!], cpu: workerCpu } });
  // `operatorView`: started with what Kiln's start carries for operators (bench/lib.ts, `benchOperatorView`).
  // `local`: the same activity as a local activity (a marker in history, no activity task): the
  // shape issue 12 weighs for the upstream call, measured here before Kiln takes it.
  const startMinimal = (operatorView = false, local = false) =>
    client.workflow.start(local ? 'minimalLocalWorkflow' : 'minimalBaselineWorkflow', {
      workflowId: `min_${randomBytes(16).toString('hex')}`,
      taskQueue: 'bench-min',
      args: local ? [] : ['bench-min.act'],
      ...(operatorView ? opView : {}),
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
  tally.submitted += 2 * BATCH;
  for (let round = 0; round < BATCH_ROUNDS; round++) {
    minimalMs.push(await measured('minimal', () => minimalRound()));
    kilnMs.push(await measured('kiln', () => kilnRound()));
    kilnInlineMs.push(await measured('kilnInline', inlineRound));
    minimalViewMs.push(await measured('minimalView', () => minimalRound(true)));
    minimalLocalMs.push(await measured('minimalLocal', () => minimalRound(false, true)));
  }
  tally.submitted += 2 * BATCH_ROUNDS * BATCH;
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
  const minimalName = 'minimal workflow (one activity on its own queue), started by client.workflow.start, all results';
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
