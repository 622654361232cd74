// A job watched from one activity (activities/job-watch.ts): a check every pollIntervalMs until the
// job completes, progress forward only, the task's budget, the window, a worker that begins to stop,
// passing faults sent again as Temporal would, failures that end the task, a cancel, and what each
// heartbeat carries.
import { describe, expect, it } from 'vitest';
import { ApplicationFailure, CancelledFailure } from '@temporalio/activity';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { watchJob, type WatchDeps } from '../../../activities/job-watch.js';
import type { JobCheck, WatchPlan } from '../../../src/shared/upstream-job.js';
import { watchActivity } from '../../../workflows/activity-policy.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Run {
  checksAt: number[];
  written: number[];
  beats: unknown[];
  env: MockActivityEnvironment;
}

/** Watches a job whose checks answer `answers` in turn (a function throws); the last answer repeats. */
function watch(
  answers: (JobCheck | (() => never))[],
  plan: Partial<WatchPlan> = {},
  deps: Partial<WatchDeps> = {},
  info: { heartbeatDetails?: unknown } = {},
) {
  const env = new MockActivityEnvironment(
    { heartbeatTimeoutMs: 1200, ...info },
    { logger: new DefaultLogger('ERROR') },
  );
  const began = Date.now();
  const run: Run = { checksAt: [], written: [], beats: [], env };
  env.on('heartbeat', (d: unknown) => run.beats.push(d));
  const result = env.run(() =>
    watchJob(
      { pollIntervalMs: 50, deadlineMs: Date.now() + 60_000, attempts: 3, ...plan },
      {
        taskId: 't1',
        check: async () => {
          const answer = answers[Math.min(run.checksAt.length, answers.length - 1)]!;
          run.checksAt.push(Date.now() - began);
          return typeof answer === 'function' ? answer() : answer;
        },
        progressed: async (p) => {
          run.written.push(p);
        },
        ...deps,
      },
    ),
  );
  return { run, result };
}

const running = (progress?: number): JobCheck => ({
  state: 'running',
  ...(progress === undefined ? {} : { progress }),
});
const transient = () => {
  throw ApplicationFailure.retryable('502 from upstream', 'upstream_transient');
};

describe('watchJob', () => {
  it('checks every pollIntervalMs until the job completes; progress moves forward in whole numbers below 100', async () => {
    const outputs = [{ url: 'https://upstream.example/v.mp4' }];
    const { run, result } = watch([
      running(20),
      running(10),
      running(55.5),
      running(100),
      running(),
      { state: 'completed', outputs },
    ]);
    expect(await result).toEqual({ state: 'completed', outputs });
    expect(run.checksAt).toHaveLength(6);
    for (let i = 1; i < run.checksAt.length; i++)
      expect(run.checksAt[i]! - run.checksAt[i - 1]!).toBeGreaterThanOrEqual(45);
    expect(run.checksAt[0]).toBeGreaterThanOrEqual(45); // the first check waits its interval too
    expect(run.written).toEqual([20, 55, 99]);
  });

  it('hands back timedOut once the task budget is spent, having checked until then', async () => {
    const { run, result } = watch([running(40)], { deadlineMs: Date.now() + 400, pollIntervalMs: 100 });
    expect(await result).toEqual({ state: 'running', progress: 40, timedOut: true });
    expect(run.checksAt.length).toBeGreaterThanOrEqual(3);
    expect(run.checksAt.length).toBeLessThanOrEqual(4);
  });

  it('hands the job back (not timed out) when its window closes', async () => {
    const { run, result } = watch([running(7)], { pollIntervalMs: 50 }, { windowMs: 300 });
    expect(await result).toEqual({ state: 'running', progress: 7 });
    expect(run.checksAt.length).toBeGreaterThanOrEqual(3);
    expect(run.checksAt.length).toBeLessThanOrEqual(7);
  });

  it('hands the job back at once when the worker begins to stop, without another check', async () => {
    const stopping = new AbortController();
    const { run, result } = watch(
      [running(30)],
      { pollIntervalMs: 10_000, progress: 12 },
      { stopping: stopping.signal },
    );
    await sleep(100);
    const asked = Date.now();
    stopping.abort();
    expect(await result).toEqual({ state: 'running', progress: 12 });
    expect(Date.now() - asked).toBeLessThan(1000);
    expect(run.checksAt).toEqual([]);
  });

  it('sends a check that failed on a passing fault again after a second, as the retry policy would', async () => {
    const { run, result } = watch([transient, { state: 'completed' }]);
    expect(await result).toEqual({ state: 'completed' });
    expect(run.checksAt).toHaveLength(2);
    expect(run.checksAt[1]! - run.checksAt[0]!).toBeGreaterThanOrEqual(950);
  });

  it('ends with the fault once `attempts` checks in a row failed on it (upstream_error to the workflow)', async () => {
    const { run, result } = watch([transient], { attempts: 2 });
    const err = await result.then(
      () => expect.unreachable('the watch succeeded'),
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApplicationFailure);
    expect(err).toMatchObject({ nonRetryable: true, type: 'upstream_transient', message: '502 from upstream' });
    expect(run.checksAt).toHaveLength(2);
  });

  it('a failure that ends the task (the job failed upstream) goes to the workflow at once', async () => {
    const failed = () => {
      throw ApplicationFailure.nonRetryable('the job failed: the prompt was refused', 'invalid_request');
    };
    const { run, result } = watch([running(5), failed]);
    await expect(result).rejects.toMatchObject({ type: 'invalid_request', nonRetryable: true });
    expect(run.checksAt).toHaveLength(2);
  });

  it('a cancel ends the watch at once (CancelledFailure), between checks', async () => {
    const { run, result } = watch([running(30)], { pollIntervalMs: 10_000 });
    await sleep(100);
    const asked = Date.now();
    run.env.cancel();
    await expect(result).rejects.toBeInstanceOf(CancelledFailure);
    expect(Date.now() - asked).toBeLessThan(1000);
    expect(run.checksAt).toEqual([]);
  });

  it('heartbeats carry the progress and the checks made; a retried attempt starts from the last progress', async () => {
    const { run, result } = watch(
      [running(30), running(60), { state: 'completed' }],
      { pollIntervalMs: 300, progress: 10 },
      {},
      { heartbeatDetails: { progress: 45, checks: 9 } },
    );
    await result;
    // Below the 45 the last attempt reached: not written; 60 is.
    expect(run.written).toEqual([60]);
    expect(run.beats.length).toBeGreaterThan(0);
    expect(run.beats.at(-1)).toMatchObject({ progress: 60 });
    for (const b of run.beats) expect(b).toEqual({ progress: expect.any(Number), checks: expect.any(Number) });
  });

  it('a progress write that fails does not end the watch', async () => {
    const { run, result } = watch(
      [running(50), { state: 'completed' }],
      {},
      {
        progressed: async () => {
          throw new Error('Redis unreachable');
        },
      },
    );
    expect(await result).toEqual({ state: 'completed' });
    expect(run.checksAt).toHaveLength(2);
  });
});

describe('watchActivity (the watch activity options)', () => {
  const policy = { timeoutMs: 30_000, heartbeatTimeoutMs: 10_000, maxAttempts: 3, queueMs: 60_000 };
  const ms = (d: unknown) => Number(d);

  it('bounds a watch by its window, one more wait, and every check retried; keeps the heartbeat timeout', () => {
    const o = watchActivity(policy, 'q', { leftMs: 3_600_000, pollIntervalMs: 60_000 });
    // 5 min + one 60 s wait + 3 × (30 s call + 30 s wait) + 15 s; not the capacity wait of a create.
    expect(ms(o.startToCloseTimeout)).toBe(300_000 + 60_000 + 180_000 + 15_000);
    expect(o.heartbeatTimeout).toBe(10_000);
    expect(o.taskQueue).toBe('q');
  });

  it('a budget shorter than the window bounds it instead', () => {
    const o = watchActivity(policy, 'q', { leftMs: 20_000, pollIntervalMs: 2000 });
    expect(ms(o.startToCloseTimeout)).toBe(20_000 + 2000 + 180_000 + 15_000);
  });
});
