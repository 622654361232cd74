// imageTaskWorkflow on the time-skipping test server, with plain functions as its activities:
// the task's states, the failure codes, and when a task ends uncertain. Retry back-offs are skipped.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApplicationFailure } from '@temporalio/activity';
import proto from '@temporalio/proto';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Activities } from '../../../activities/image/index.js';
import type { ImageTaskWorkflowInput } from '../../../workflows/image-task.js';
import type { GenerationResult, ImageTaskInput, ImageTaskRecord } from '../../../src/shared/image-task.js';
import { SEARCH_ATTRIBUTES } from '../../../src/shared/task.js';
import { readModelSinks, settle } from '../../../activities/read-model.js';
import { MemoryStore } from '../../support/unit-store.js';
import { runToEnd, startWorker, timeSkippingEnv, unitQueue } from '../../support/unit-temporal.js';

// CommonJS package: read its namespace from the default export.
const EventType = proto.temporal.api.enums.v1.EventType;

/** What one test's task does: its upstream stand-in, its read model and the calls counted. */
interface Case {
  generate: (input: ImageTaskInput) => Promise<GenerationResult>;
  store: MemoryStore;
  calls: { generateImage: number; mayHaveReachedUpstream: number };
  /** The activity's `succeeded` write fails (Redis unreachable at that moment). */
  unrecorded?: boolean;
}
const cases = new Map<string, Case>();
const caseOf = (id: string) => cases.get(id) ?? expect.unreachable(`no test case for ${id}`);

// The activities as the worker sees them: plain functions, routed to the test that owns the task.
// They write to an in-memory read model as the real ones write to Redis: generateImage records
// `running`, then `succeeded` with its image (as activities/image/index.ts does).
/** Tests here cancel as the owner does, through Kiln's API. */
const OWNER_CANCEL = { how: 'canceled', by: 'owner' } as const;

// One-call models only: the job path has its own tests.
const activities: Omit<
  Activities,
  'createImageJob' | 'checkImageJob' | 'watchImageJob' | 'fetchImageJob' | 'cancelImageJob'
> = {
  recordTransition: (r) => caseOf(r.id).store.transition(r),
  recordOutcome: (r) => settle(caseOf(r.id).store, r),
  mayHaveReachedUpstream: async (i) => {
    const c = caseOf(i.id);
    c.calls.mayHaveReachedUpstream++;
    return c.store.wasDispatched(i.id);
  },
  upstreamReach: async (i) => ({
    reach: (await caseOf(i.id).store.wasDispatched(i.id)) ? 'sent_not_idempotent' : 'not_sent',
    closing: OWNER_CANCEL,
  }),
  generateImage: async (i) => {
    const c = caseOf(i.id);
    c.calls.generateImage++;
    const base = { id: i.id, kind: 'image' as const, owner: i.owner, model: i.model, created_at: i.created_at };
    await c.store.transition({ ...base, status: 'running', finished_at: null, candidates: null, error: null });
    const result = await c.generate(i);
    const record: ImageTaskRecord = {
      ...base,
      status: 'succeeded',
      finished_at: 1_700_000_100,
      ...result,
      error: null,
    };
    if (c.unrecorded) return { record, recorded: false, written: false };
    return { ...(await settle(c.store, record)), recorded: true };
  },
};

const QUEUE = unitQueue('image');
let env: TestWorkflowEnvironment;
let worker: { stop(): Promise<void> } | undefined;
beforeAll(async () => {
  env = await timeSkippingEnv();
  // The `queued` write: the worker's sink (src/worker/start.ts), on this test's read model.
  worker = await startWorker(
    env,
    QUEUE,
    activities,
    readModelSinks({ transition: (r) => caseOf(r.id).store.transition(r) }),
  );
});
afterAll(async () => {
  await worker?.stop();
  await env?.teardown();
});

const RESULT: GenerationResult = {
  response_id: 'resp-1',
  model_version: 'fake-1',
  candidates: [
    {
      content: {
        role: 'model',
        parts: [{ inlineData: { mimeType: 'image/png', data: 'https://blobs.example/a.png' } }],
      },
      finishReason: 'STOP',
      index: 0,
    },
  ],
};

let n = 0;
/** Runs one task with `generate` standing in for the upstream call. */
async function run(generate: Case['generate'], store = new MemoryStore(), opts: { unrecorded?: boolean } = {}) {
  const task: ImageTaskInput = {
    id: `task_${String(++n).padStart(32, '0')}`,
    owner: 'owner-1',
    model: 'fake-image',
    created_at: 1_700_000_000,
    request: { contents: [{ role: 'user', parts: [{ text: 'a kiln' }] }] },
  };
  const c: Case = { generate, store, calls: { generateImage: 0, mayHaveReachedUpstream: 0 }, ...opts };
  cases.set(task.id, c);
  // The API writes `accepted` when it starts the workflow.
  await store.transition({
    id: task.id,
    kind: 'image',
    owner: task.owner,
    model: task.model,
    status: 'accepted',
    created_at: task.created_at,
    finished_at: null,
    candidates: null,
    error: null,
  });
  const input: ImageTaskWorkflowInput = {
    task,
    policy: { timeoutMs: 30_000, heartbeatTimeoutMs: 10_000, maxAttempts: 3 },
    activityQueue: QUEUE,
  };
  const run = await runToEnd<ImageTaskRecord>(env, 'imageTaskWorkflow', task.id, QUEUE, input);
  const record = run.result;
  const status = run.description.searchAttributes[SEARCH_ATTRIBUTES.status];
  const { events } = run.history;
  const history = (events ?? []).map((e) => String(EventType[e.eventType ?? 0]).replace(/^EVENT_TYPE_/, ''));
  return { task, record, status, calls: c.calls, store, history };
}

describe('imageTaskWorkflow', () => {
  it('goes accepted → queued → running → succeeded and returns the candidates', async () => {
    const { task, record, status, calls, store, history } = await run(async () => RESULT);
    expect(store.statuses(task.id)).toEqual(['accepted', 'queued', 'running', 'succeeded']);
    expect(record).toMatchObject({
      id: task.id,
      kind: 'image',
      status: 'succeeded',
      error: null,
      response_id: 'resp-1',
      candidates: RESULT.candidates,
    });
    expect(record.finished_at).toEqual(expect.any(Number));
    expect(store.records.get(task.id)).toEqual(record);
    expect(status).toBeUndefined(); // a success leaves KilnStatus unset
    expect(calls).toEqual({ generateImage: 1, mayHaveReachedUpstream: 0 });
    // No marker: `queued` went through the sink, `succeeded` with the activity.
    expect(history).not.toContain('MARKER_RECORDED');
  });

  it("writes `succeeded` itself (one marker) when Redis failed the activity's write", async () => {
    const { task, record, store, history } = await run(async () => RESULT, new MemoryStore(), { unrecorded: true });
    expect(store.statuses(task.id)).toEqual(['accepted', 'queued', 'running', 'succeeded']);
    expect(store.records.get(task.id)).toEqual(record);
    expect(history.filter((t) => t === 'MARKER_RECORDED')).toHaveLength(1);
  });

  it(
    'an attempt that recorded its image before its answer ' + 'was lost: the task succeeded, whatever the retry said',
    async () => {
      const { task, record, status, store } = await run(async (i) => {
        await caseOf(i.id).store.transition({
          id: i.id,
          kind: 'image',
          owner: i.owner,
          model: i.model,
          status: 'succeeded',
          created_at: i.created_at,
          finished_at: 1_700_000_050,
          ...RESULT,
          error: null,
        });
        throw ApplicationFailure.nonRetryable('the attempt ended before its answer arrived', 'uncertain');
      });
      expect(record).toMatchObject({ status: 'succeeded', candidates: RESULT.candidates, finished_at: 1_700_000_050 });
      expect(store.records.get(task.id)).toEqual(record);
      expect(status).toBeUndefined();
    },
  );

  it.each(['auth_failed', 'insufficient_balance', 'upstream_rate_limited', 'invalid_request', 'upstream_timeout'])(
    "ends failed with the activity's code %s, without retrying",
    async (code) => {
      const { task, record, status, calls, store } = await run(async () => {
        throw ApplicationFailure.nonRetryable(`upstream said ${code}`, code);
      });
      expect(record).toMatchObject({
        status: 'failed',
        candidates: null,
        error: { code, message: `upstream said ${code}` },
      });
      expect(store.statuses(task.id)).toEqual(['accepted', 'queued', 'running', 'failed']);
      expect(status).toEqual(['failed']);
      expect(calls.generateImage).toBe(1);
    },
  );

  it('retries a transient failure up to maxAttempts, then ends failed / upstream_error', async () => {
    const { record, calls } = await run(async () => {
      throw ApplicationFailure.retryable('503 from upstream', 'upstream_error_retryable');
    });
    expect(calls.generateImage).toBe(3);
    // Nothing was dispatched: a failure, not an uncertain outcome.
    expect(calls.mayHaveReachedUpstream).toBe(1);
    expect(record.status).toBe('failed');
    expect(record.error).toEqual({ code: 'upstream_error', message: expect.stringContaining('503 from upstream') });
  });

  it('succeeds when a later attempt does', async () => {
    let attempts = 0;
    const { record, calls } = await run(async () => {
      if (++attempts < 3) throw new Error('connection reset');
      return RESULT;
    });
    expect(calls.generateImage).toBe(3);
    expect(record).toMatchObject({ status: 'succeeded', error: null });
  });

  it('ends uncertain when the activity says so, and asks nothing more', async () => {
    const { task, record, status, calls, store } = await run(async () => {
      throw ApplicationFailure.nonRetryable('sent, then the connection dropped', 'uncertain');
    });
    expect(record).toMatchObject({
      status: 'uncertain',
      error: null,
      candidates: null,
      uncertain_reason: 'sent, then the connection dropped',
    });
    expect(store.statuses(task.id)).toEqual(['accepted', 'queued', 'running', 'uncertain']);
    expect(status).toEqual(['uncertain']);
    expect(calls).toEqual({ generateImage: 1, mayHaveReachedUpstream: 0 });
  });

  it('ends uncertain when retries run out after a request was dispatched', async () => {
    const store = new MemoryStore();
    const { record, calls } = await run(async (i) => {
      await store.markDispatched(i.id, 1);
      throw new Error('socket hang up');
    }, store);
    expect(calls.mayHaveReachedUpstream).toBe(1);
    expect(record.status).toBe('uncertain');
    expect(record.error).toBeNull();
    expect(record.uncertain_reason).toContain('socket hang up');
  });

  it('ends failed, not uncertain, when retries run out before anything was dispatched', async () => {
    const { record, calls } = await run(async () => {
      throw new Error('ECONNREFUSED');
    });
    expect(calls.mayHaveReachedUpstream).toBe(1);
    expect(record).toMatchObject({ status: 'failed', error: { code: 'upstream_error' } });
    expect(record.uncertain_reason).toBeUndefined();
  });
});
