// videoTaskWorkflow on the time-skipping test server, with plain functions as its activities: what
// it does with each watch of the job (activities/job-watch.ts, tested on its own), progress, the
// overall timeout, and the create call's failure outcomes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApplicationFailure } from '@temporalio/activity';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { VideoActivities } from '../../../activities/video/index.js';
import type { VideoTaskWorkflowInput } from '../../../workflows/video-task.js';
import { SEARCH_ATTRIBUTES } from '../../../src/shared/task.js';
import {
  newVideoRecord,
  type VideoJob,
  type VideoOutput,
  type VideoPolicy,
  type VideoTaskInput,
  type VideoTaskRecord,
} from '../../../src/shared/video-task.js';
import type { WatchPlan, Watched } from '../../../src/shared/upstream-job.js';
import { MemoryStore } from '../../support/unit-store.js';
import { runToEnd, startWorker, timeSkippingEnv, unitQueue } from '../../support/unit-temporal.js';

interface Case {
  create: (input: VideoTaskInput) => Promise<VideoJob>;
  /** The n-th watch of the job. */
  watch: (n: number) => Promise<Watched>;
  store: MemoryStore;
  calls: { create: number; watch: number; fetch: number; cancel: number; mayHaveReachedUpstream: number };
  /** The plan of every watch. */
  plans: WatchPlan[];
  /** `progress` of every record the workflow wrote. */
  progress: number[];
  fetched?: VideoOutput[];
}
const cases = new Map<string, Case>();
const caseOf = (id: string) => cases.get(id) ?? expect.unreachable(`no test case for ${id}`);

/** Tests here cancel as the owner does, through Kiln's API. */
const OWNER_CANCEL = { how: 'canceled', by: 'owner' } as const;

const activities: VideoActivities = {
  recordVideoTransition: async (r) => {
    const c = caseOf(r.id);
    c.progress.push(r.progress);
    await c.store.transition(r);
  },
  videoMayHaveReachedUpstream: async (i) => {
    const c = caseOf(i.id);
    c.calls.mayHaveReachedUpstream++;
    return c.store.wasDispatched(i.id);
  },
  videoUpstreamReach: async (i) => ({
    reach: (await caseOf(i.id).store.wasDispatched(i.id)) ? 'sent_not_idempotent' : 'not_sent',
    closing: OWNER_CANCEL,
  }),
  cancelVideo: async ({ task }) => {
    caseOf(task.id).calls.cancel++;
    return { stopped: true, closing: OWNER_CANCEL };
  },
  createVideo: async (i) => {
    const c = caseOf(i.id);
    c.calls.create++;
    await c.store.transition({ ...record(i), status: 'running' });
    return c.create(i);
  },
  // Only workflows an older release started check one at a time (test/integration/tasks/job-watch.test.ts).
  checkVideo: async () => expect.unreachable('a new workflow watches its job in one activity'),
  watchVideo: async ({ task, plan, record }) => {
    const c = caseOf(task.id);
    // The watch starts from the progress of the record it is handed.
    c.plans.push({ ...plan, progress: record.progress });
    return c.watch(++c.calls.watch);
  },
  fetchVideo: async ({ task, job, outputs }) => {
    const c = caseOf(task.id);
    c.calls.fetch++;
    c.fetched = outputs;
    return { video_url: `https://blobs.example/${job.upstreamId}.mp4` };
  },
};

const QUEUE = unitQueue('video');
let env: TestWorkflowEnvironment;
let worker: { stop(): Promise<void> } | undefined;
beforeAll(async () => {
  env = await timeSkippingEnv();
  worker = await startWorker(env, QUEUE, activities);
});
afterAll(async () => {
  await worker?.stop();
  await env?.teardown();
});

const record = (task: VideoTaskInput): VideoTaskRecord => newVideoRecord(task, 'accepted');

/** Ten-second checks: five of them are most of a minute of workflow time. */
const POLICY: VideoPolicy = {
  timeoutMs: 30_000,
  heartbeatTimeoutMs: 10_000,
  maxAttempts: 3,
  pollIntervalMs: 10_000,
  overallTimeoutMs: 30 * 60_000,
};
let n = 0;

async function run(
  c: Partial<Pick<Case, 'create' | 'watch'>>,
  policy: Partial<VideoPolicy> = {},
  store = new MemoryStore(),
) {
  const task: VideoTaskInput = {
    id: `video_${String(++n).padStart(32, '0')}`,
    owner: 'owner-1',
    model: 'fake-video',
    created_at: 1_700_000_000,
    request: { prompt: 'a kiln at dusk', seconds: '4', size: '720x1280' },
  };
  const theCase: Case = {
    create: c.create ?? (async () => ({ upstreamId: `job-${n}` })),
    watch: c.watch ?? (async () => ({ state: 'completed' })),
    store,
    calls: { create: 0, watch: 0, fetch: 0, cancel: 0, mayHaveReachedUpstream: 0 },
    plans: [],
    progress: [],
  };
  cases.set(task.id, theCase);
  await store.transition(record(task));
  const input: VideoTaskWorkflowInput = {
    task,
    policy: { ...POLICY, ...policy },
    activityQueue: QUEUE,
    results: false,
  };
  const { result, description, history } = await runToEnd<VideoTaskRecord>(
    env,
    'videoTaskWorkflow',
    task.id,
    QUEUE,
    input,
  );
  const timers = (history.events ?? [])
    .filter((e) => e.timerStartedEventAttributes)
    .map((e) => Number(e.timerStartedEventAttributes!.startToFireTimeout!.seconds));
  // Workflow time from start to close: what the durable timers covered.
  const workflowSeconds = (description.closeTime!.getTime() - description.startTime.getTime()) / 1000;
  return {
    task,
    result,
    status: description.searchAttributes[SEARCH_ATTRIBUTES.status],
    timers,
    workflowSeconds,
    ...theCase,
  };
}

describe('videoTaskWorkflow job watch', () => {
  it("watches the job until it completes, carrying each watch's progress into the next; finishes with the video", async () => {
    const answers: Watched[] = [
      { state: 'running', progress: 20 },
      { state: 'running', progress: 55 },
      { state: 'completed', outputs: [{ url: 'https://upstream.example/v.mp4' }] },
    ];
    const r = await run({ watch: async (i) => answers[i - 1]! });
    expect(r.calls).toEqual({ create: 1, watch: 3, fetch: 1, cancel: 0, mayHaveReachedUpstream: 0 });
    // No durable timer: the watch waits between checks itself.
    expect(r.timers).toEqual([]);
    expect(r.plans.map((p) => [p.pollIntervalMs, p.attempts, p.progress])).toEqual([
      [10_000, 3, 0],
      [10_000, 3, 20],
      [10_000, 3, 55],
    ]);
    // Every watch gets the task's one deadline: its start plus the overall budget.
    expect(new Set(r.plans.map((p) => p.deadlineMs)).size).toBe(1);
    expect(r.result).toMatchObject({
      status: 'succeeded',
      progress: 100,
      video_url: 'https://blobs.example/job-1.mp4',
      error: null,
    });
    expect(r.fetched).toEqual([{ url: 'https://upstream.example/v.mp4' }]);
    // The watch writes progress to the read model; the workflow writes `queued` and the outcome.
    expect(r.progress).toEqual([0, 100]);
    expect(r.store.statuses(r.task.id)).toEqual(['accepted', 'queued', 'running', 'succeeded']);
    expect(r.status).toBeUndefined(); // `running` taken back: a success leaves KilnStatus unset
  });

  it('ends failed / upstream_timeout when the watch finds the budget spent, and asks the upstream to stop the job', async () => {
    const r = await run(
      { watch: async () => ({ state: 'running', progress: 40, timedOut: true }) },
      { overallTimeoutMs: 60_000 },
    );
    expect(r.calls).toMatchObject({ watch: 1, fetch: 0, cancel: 1 });
    expect(r.plans[0]!.deadlineMs - r.task.created_at * 1000).toBeGreaterThan(0);
    expect(r.result).toMatchObject({
      status: 'failed',
      progress: 40,
      error: { code: 'upstream_timeout', message: expect.stringContaining('60000 ms') },
    });
    expect(r.store.statuses(r.task.id)).toEqual(['accepted', 'queued', 'running', 'failed']);
    expect(r.status).toEqual(['failed']);
  });

  it('a watch whose attempt failed (a worker that died) is sent again by Temporal', async () => {
    const r = await run({
      watch: async (i) => {
        if (i === 1) throw ApplicationFailure.retryable('heartbeat timeout', 'worker_gone');
        return { state: 'completed' };
      },
    });
    expect(r.calls.watch).toBe(2);
    expect(r.result.status).toBe('succeeded');
  });

  it('a watch that ended on a failure of the job ends the task with its code', async () => {
    const r = await run({
      watch: async () => {
        throw ApplicationFailure.nonRetryable('the job failed upstream: the prompt was refused', 'invalid_request');
      },
    });
    expect(r.calls).toMatchObject({ watch: 1, fetch: 0 });
    expect(r.result).toMatchObject({ status: 'failed', error: { code: 'invalid_request' } });
  });

  it('ends failed with the code of a create call that was refused', async () => {
    const r = await run({
      create: async () => {
        throw ApplicationFailure.nonRetryable('key rejected', 'auth_failed');
      },
    });
    expect(r.calls).toMatchObject({ create: 1, watch: 0, mayHaveReachedUpstream: 0 });
    expect(r.timers).toEqual([]);
    expect(r.result).toMatchObject({ status: 'failed', error: { code: 'auth_failed', message: 'key rejected' } });
  });

  it('ends uncertain when create attempts ran out after the request was dispatched', async () => {
    const store = new MemoryStore();
    const r = await run(
      {
        create: async (i) => {
          await store.markDispatched(i.id, 1);
          throw new Error('socket hang up');
        },
      },
      {},
      store,
    );
    expect(r.calls).toMatchObject({ create: 3, watch: 0, mayHaveReachedUpstream: 1 });
    expect(r.result).toMatchObject({
      status: 'uncertain',
      error: null,
      uncertain_reason: expect.stringContaining('socket hang up'),
    });
    expect(r.status).toEqual(['uncertain']);
  });

  it('ends failed when create attempts ran out and nothing was dispatched', async () => {
    const r = await run({
      create: async () => {
        throw new Error('ECONNREFUSED');
      },
    });
    expect(r.calls).toMatchObject({ create: 3, mayHaveReachedUpstream: 1 });
    expect(r.result).toMatchObject({ status: 'failed', error: { code: 'upstream_error' } });
  });
});
