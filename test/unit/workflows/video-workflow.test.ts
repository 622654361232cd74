// videoTaskWorkflow on the time-skipping test server, with plain functions as its activities: the
// poll loop's durable timers (minutes of workflow time, no real waiting), progress, the overall
// timeout, and the create call's failure outcomes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApplicationFailure } from '@temporalio/activity';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { VideoActivities } from '../../../activities/video/index.js';
import type { VideoTaskWorkflowInput } from '../../../workflows/video-task.js';
import { SEARCH_ATTRIBUTES } from '../../../src/shared/task.js';
import {
  newVideoRecord,
  type VideoCheck,
  type VideoJob,
  type VideoOutput,
  type VideoPolicy,
  type VideoTaskInput,
  type VideoTaskRecord,
} from '../../../src/shared/video-task.js';
import { MemoryStore } from '../../support/unit-store.js';
import { runToEnd, startWorker, timeSkippingEnv, unitQueue } from '../../support/unit-temporal.js';

interface Case {
  create: (input: VideoTaskInput) => Promise<VideoJob>;
  check: (n: number) => Promise<VideoCheck>;
  store: MemoryStore;
  calls: { create: number; check: number; fetch: number; mayHaveReachedUpstream: number };
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
  cancelVideo: async () => ({ stopped: false, closing: OWNER_CANCEL }),
  createVideo: async (i) => {
    const c = caseOf(i.id);
    c.calls.create++;
    await c.store.transition({ ...record(i), status: 'running' });
    return c.create(i);
  },
  checkVideo: async ({ task }) => {
    const c = caseOf(task.id);
    return c.check(++c.calls.check);
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
  c: Partial<Pick<Case, 'create' | 'check'>>,
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
    check: c.check ?? (async () => ({ state: 'completed' })),
    store,
    calls: { create: 0, check: 0, fetch: 0, mayHaveReachedUpstream: 0 },
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

describe('videoTaskWorkflow poll loop', () => {
  it('checks the job five times on durable timers and finishes with the video', async () => {
    const progress = [20, 10, 55.5, 100];
    const r = await run({
      check: async (i) =>
        i <= progress.length
          ? { state: 'running', progress: progress[i - 1] }
          : { state: 'completed', outputs: [{ url: 'https://upstream.example/v.mp4' }] },
    });
    expect(r.calls).toEqual({ create: 1, check: 5, fetch: 1, mayHaveReachedUpstream: 0 });
    expect(r.timers).toEqual([10, 10, 10, 10, 10]);
    // Fifty seconds of timers went by in workflow time (the test server skipped them).
    expect(r.workflowSeconds).toBeGreaterThanOrEqual(50);
    expect(r.result).toMatchObject({
      status: 'succeeded',
      progress: 100,
      video_url: 'https://blobs.example/job-1.mp4',
      error: null,
    });
    expect(r.fetched).toEqual([{ url: 'https://upstream.example/v.mp4' }]);
    // Progress only moves forward in whole numbers, and 99 is the most an unfinished job shows.
    expect(r.progress).toEqual([0, 20, 55, 99, 100]);
    expect(r.store.statuses(r.task.id)).toEqual(['accepted', 'queued', 'running', 'succeeded']);
    expect(r.status).toBeUndefined(); // `running` taken back: a success leaves KilnStatus unset
  });

  it('ends failed / upstream_timeout when the job outlives the overall budget', async () => {
    const r = await run({ check: async () => ({ state: 'running', progress: 40 }) }, { overallTimeoutMs: 60_000 });
    // One check per ten seconds of a one-minute budget.
    expect(r.calls.check).toBe(6);
    expect(r.calls.fetch).toBe(0);
    expect(r.workflowSeconds).toBeGreaterThanOrEqual(60);
    expect(r.result).toMatchObject({
      status: 'failed',
      progress: 40,
      error: { code: 'upstream_timeout', message: expect.stringContaining('60000 ms') },
    });
    expect(r.store.statuses(r.task.id)).toEqual(['accepted', 'queued', 'running', 'failed']);
    expect(r.status).toEqual(['failed']);
  });

  it('retries a check that failed transiently (reads are safe to repeat)', async () => {
    const r = await run({
      check: async (i) => {
        if (i === 1) throw ApplicationFailure.retryable('502 from upstream', 'upstream_transient');
        return { state: 'completed' };
      },
    });
    expect(r.calls.check).toBe(2);
    expect(r.result.status).toBe('succeeded');
  });

  it('ends failed with the code of a create call that was refused', async () => {
    const r = await run({
      create: async () => {
        throw ApplicationFailure.nonRetryable('key rejected', 'auth_failed');
      },
    });
    expect(r.calls).toMatchObject({ create: 1, check: 0, mayHaveReachedUpstream: 0 });
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
    expect(r.calls).toMatchObject({ create: 3, check: 0, mayHaveReachedUpstream: 1 });
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
