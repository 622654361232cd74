// `npm run bench`'s writes: submit over HTTP against a raw workflow start, end to end against a raw
// execute, and the sustained rest of BENCH_TASKS.
import { randomBytes } from 'node:crypto';
import { benchOperatorView, fmt, load, loop, pct, sleep, SUBMIT_BODY, type LoadResult } from '../lib.js';
import { ROUNDS, SECONDS, TOTAL_TASKS, type RunContext } from './context.js';
import { median, roundRatios } from './report.js';

/**
 * 1. Submit over HTTP vs a raw workflow start of the same workflow and input, in alternating
 * rounds (the worker runs the started tasks meanwhile; the backlog is drained between rounds).
 */
export async function submitRows(ctx: RunContext): Promise<void> {
  const { client, config, auth, input, drain, rows, tally } = ctx;
  const { base } = ctx.stack;
  const operatorView = benchOperatorView(ctx.owner, config.ops.summaryPromptChars);
  const rawStart = (view: boolean) => () => {
    const id = `task_${randomBytes(16).toString('hex')}`;
    return client.workflow.start('imageTaskWorkflow', {
      workflowId: id,
      taskQueue: config.temporal.taskQueue,
      args: [input(id)],
      ...(view ? operatorView : {}),
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
  for (let round = 0; round < ROUNDS; round++) {
    // Each round starts with the next kind: a place in the round (the server's SQLite checkpoints,
    // the host's moods) favours no kind over the run.
    for (let i = 0; i < order.length; i++) {
      const kind = order[(round + i) % order.length];
      const r = await submitKinds[kind]();
      tally.submitted += Math.round(r.rps * SECONDS);
      submitResults[kind].push(r);
      await drain();
    }
  }
  const { submit: subs, raw: raws, rawKiln: rawKilns } = submitResults;
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
}

/** 5. End to end: submit → first poll that sees succeeded, vs raw start + result(). */
export async function endToEndRows(ctx: RunContext): Promise<void> {
  const { client, config, auth, input, submitOne, rows, tally } = ctx;
  const { base } = ctx.stack;
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
  tally.submitted += 60;
  const asLoad = (v: number[]): LoadResult => ({ rps: NaN, p50: pct(v, 50), p99: pct(v, 99), errors: 0, non2xx: 0 });
  rows.push({
    what: 'end to end: submit → succeeded seen by a 5 ms poll loop',
    kiln: asLoad(e2e),
    base: asLoad(rawE2e),
    baseName: 'raw workflow execute (start + result)',
  });
}

/** 6. Sustained: the rest of TOTAL_TASKS submitted at 32 connections, until all are finished. */
export async function sustainedRow({ auth, drain, rows, tally, stack: { base } }: RunContext): Promise<void> {
  // None left when the rounds above already submitted that many.
  const rest = TOTAL_TASKS - tally.submitted;
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
    tally.submitted += rest;
    rows.push({
      what: `sustained: ${rest} tasks submitted and finished`,
      kiln: `${fmt(rest / elapsed)} tasks/s (${fmt(elapsed)} s, ${sustained.non2xx} non-2xx)`,
    });
  }
}
