// The upstream activities in MockActivityEnvironment, with an in-memory read model and fake
// providers: the dispatch mark and heartbeats, which failures end a task (and how), which are retried.
import { newVideoRecord } from '../../../src/shared/video-task.js';
import { CHANNEL_REFUSED_FAILURE_TYPE } from '../../../src/upstreams/failover.js';
import { describe, expect, it } from 'vitest';
import { ApplicationFailure } from '@temporalio/activity';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { createActivities, type ImageDone } from '../../../activities/image/index.js';
import type { ImageCall, ImageProvider } from '../../../activities/providers/contract.js';
import { createVideoActivities } from '../../../activities/video/index.js';
import { HttpStatusFailure } from '../../../activities/providers/http.js';
import type { VideoCall, VideoProvider } from '../../../activities/providers/contract.js';
import { TransportFailure, UpstreamFailure } from '../../../src/upstreams/failures.js';
import { modelsOfKind, parseModels } from '../../../src/config/models.js';
import {
  newImageRecord,
  type GenerationResult,
  type ImageTaskInput,
  type ImageTaskRecord,
} from '../../../src/shared/image-task.js';
import type { VideoTaskInput } from '../../../src/shared/video-task.js';
import { MemoryStore } from '../../support/unit-store.js';
import { imageTaskInput } from '../../support/records.js';
import { MemoryChannelState } from '../../support/unit-channel-state.js';

const models = parseModels(
  {
    models: [
      // Not idempotent (the default): a request that may have been received is never resent.
      { id: 'img-once', kind: 'image', provider: 'local', heartbeatTimeoutMs: 1000 },
      { id: 'img-idem', kind: 'image', provider: 'local', heartbeatTimeoutMs: 1000, idempotent: true },
      { id: 'img-quick', kind: 'image', provider: 'local', heartbeatTimeoutMs: 1000, timeoutMs: 50 },
      { id: 'vid-once', kind: 'video', provider: 'local', heartbeatTimeoutMs: 1000 },
      { id: 'vid-idem', kind: 'video', provider: 'local', heartbeatTimeoutMs: 1000, idempotent: true },
    ],
  },
  'unit models',
);

const RESULT: GenerationResult = {
  response_id: 'r1',
  model_version: 'v1',
  candidates: [
    { content: { parts: [{ inlineData: { mimeType: 'image/png', data: 'https://blobs.example/x.png' } }] } },
  ],
};

let n = 0;
const imageTask = imageTaskInput;
const videoTask = (model: string): VideoTaskInput => ({
  id: `video_${String(++n).padStart(32, '0')}`,
  owner: 'o1',
  model,
  created_at: 1_700_000_000,
  request: { prompt: 'a kiln', seconds: '4', size: '720x1280' },
  credential: 'caller-key',
});

/** An image provider that runs `behave` and records its calls. */
function imageProvider(behave: (call: ImageCall) => Promise<GenerationResult>) {
  const calls: ImageCall[] = [];
  const provider: ImageProvider = {
    generate: async (call) => {
      calls.push(call);
      return behave(call);
    },
  };
  return { provider, calls };
}

function image(behave: (call: ImageCall) => Promise<GenerationResult>, store = new MemoryStore()) {
  const { provider, calls } = imageProvider(behave);
  const acts = createActivities({
    channels: new MemoryChannelState(),
    store: store,
    models: modelsOfKind(models, 'image'),
    providers: { local: provider, gemini: provider },
  });
  return { acts, calls, store };
}

/** Runs an activity at `attempt`, collecting its heartbeats. */
function activityEnv(info: { attempt?: number; heartbeatDetails?: unknown } = {}) {
  // Failing attempts are what these tests are about: keep their expected log lines out of the output.
  const env = new MockActivityEnvironment(
    { attempt: info.attempt ?? 1, heartbeatDetails: info.heartbeatDetails },
    { logger: new DefaultLogger('ERROR') },
  );
  const beats: unknown[] = [];
  env.on('heartbeat', (d: unknown) => beats.push(d));
  return { env, beats };
}

async function failureOf(p: Promise<unknown>): Promise<ApplicationFailure> {
  const err = await p.then(
    () => expect.unreachable('the activity succeeded'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApplicationFailure);
  return err as ApplicationFailure;
}

/** generateImage's answer for a task that succeeded with RESULT and recorded it itself. */
const succeeded = (task: ImageTaskInput, written = true) => ({
  record: {
    id: task.id,
    kind: 'image',
    owner: task.owner,
    model: task.model,
    status: 'succeeded',
    created_at: task.created_at,
    finished_at: expect.any(Number),
    candidates: RESULT.candidates,
    error: null,
    response_id: RESULT.response_id,
    model_version: RESULT.model_version,
    started_at: expect.any(Number),
    attempts: expect.any(Number),
    channel: 'default',
  },
  recorded: true,
  written,
});

const dispatchThen =
  <T>(result: () => Promise<T>) =>
  async (call: { dispatching(): Promise<void> }) => {
    await call.dispatching();
    return result();
  };

describe('generateImage', () => {
  it('marks the task running, then dispatched (the Redis mark) before the answer; a quick call sends no heartbeat', async () => {
    const { acts, calls, store } = image(dispatchThen(async () => RESULT));
    const task = imageTask('img-once');
    const { env, beats } = activityEnv();
    await expect(env.run(acts.generateImage, task)).resolves.toEqual(succeeded(task));
    expect(calls).toHaveLength(1);
    // `succeeded` too: the workflow only tags and completes.
    expect(store.statuses(task.id)).toEqual(['running', 'succeeded']);
    expect(store.records.get(task.id)).toEqual((await store.get(task.id))!);
    expect(store.dispatched.get(task.id)).toBe('1:default');
    // Each heartbeat is a write of the workflow's state in Temporal: a call shorter than the beat
    // interval (333 ms for this model's 1 s heartbeat timeout) costs none.
    expect(beats).toEqual([]);
  });

  it("a call that lasts heartbeats with the dispatch mark as its details, for the Web UI's pending activity", async () => {
    const { acts, store } = image(dispatchThen(() => new Promise((r) => setTimeout(() => r(RESULT), 450))));
    const task = imageTask('img-once');
    const { env, beats } = activityEnv();
    await expect(env.run(acts.generateImage, task)).resolves.toEqual(succeeded(task));
    expect(store.dispatched.get(task.id)).toBe('1:default');
    expect(beats).toEqual([{ dispatched: true, channel: 'default' }]);
  });

  it(
    'a retried attempt that finds the dispatch mark ends ' + 'uncertain for a non-idempotent model, without resending',
    async () => {
      const { acts, calls, store } = image(async () => RESULT);
      const task = imageTask('img-once');
      await store.markDispatched(task.id, 1);
      const { env } = activityEnv({ attempt: 2, heartbeatDetails: { dispatched: true } });
      const f = await failureOf(env.run(acts.generateImage, task));
      expect(f.type).toBe('uncertain');
      expect(f.nonRetryable).toBe(true);
      expect(calls).toHaveLength(0);
      expect(store.statuses(task.id)).toEqual([]);
    },
  );

  it('a retried attempt resends to an idempotent model, mark or not', async () => {
    const { acts, calls, store } = image(dispatchThen(async () => RESULT));
    const task = imageTask('img-idem');
    await store.markDispatched(task.id, 1);
    const { env } = activityEnv({ attempt: 2, heartbeatDetails: { dispatched: true } });
    await expect(env.run(acts.generateImage, task)).resolves.toEqual(succeeded(task));
    expect(calls).toHaveLength(1);
    expect(store.dispatched.get(task.id)).toBe('2:default');
  });

  it('the Redis mark decides, not heartbeat details: no mark means the request never left, so it is sent', async () => {
    const { acts, calls, store } = image(dispatchThen(async () => RESULT));
    const { env } = activityEnv({ attempt: 2, heartbeatDetails: { dispatched: true } });
    const task = imageTask('img-once');
    // The record the workflow wrote when it picked the task up: the mark would live beside it.
    await store.transition(newImageRecord(task, 'queued'));
    await expect(env.run(acts.generateImage, task)).resolves.toEqual(succeeded(task));
    expect(calls).toHaveLength(1);
  });

  it('a non-idempotent retry that finds no record (Redis lost it, the mark with it) is not sent: uncertain', async () => {
    const { acts, calls } = image(dispatchThen(async () => RESULT));
    const { env } = activityEnv({ attempt: 2 });
    const f = await failureOf(env.run(acts.generateImage, imageTask('img-once')));
    expect(f.type).toBe('uncertain');
    expect(f.message).toMatch(/was lost from the read model/);
    expect(calls).toHaveLength(0);
  });

  it(
    'a retried attempt that finds its image recorded returns ' +
      'it, sending nothing (its answer was lost, not its image)',
    async () => {
      const { acts, calls, store } = image(async () => RESULT);
      const task = imageTask('img-once');
      const first = image(
        dispatchThen(async () => RESULT),
        store,
      );
      const { record } = (await activityEnv().env.run(first.acts.generateImage, task)) as ImageDone;
      // Attempt 1 recorded `succeeded`, then its worker died before Temporal heard the answer.
      const { env } = activityEnv({ attempt: 2, heartbeatDetails: { dispatched: true } });
      await expect(env.run(acts.generateImage, task)).resolves.toEqual({ record, recorded: true, written: false });
      expect(calls).toHaveLength(0);
    },
  );

  it(
    'Redis failing the succeeded write keeps the image: ' + 'the answer says unrecorded, for the workflow to write',
    async () => {
      const store = new (class extends MemoryStore {
        override async transition(r: ImageTaskRecord) {
          if (r.status === 'succeeded') throw new Error('redis down');
          return super.transition(r);
        }
      })();
      const { acts } = image(
        dispatchThen(async () => RESULT),
        store,
      );
      const task = imageTask('img-once');
      const done = await activityEnv().env.run(acts.generateImage, task);
      expect(done).toEqual({ ...succeeded(task, false), recorded: false });
      expect(store.statuses(task.id)).toEqual(['running']);
    },
  );

  it('a transport failure before dispatch clears the mark and hands the wait to the workflow', async () => {
    const store = new MemoryStore();
    const task = imageTask('img-once');
    await store.markDispatched(task.id, 1);
    const { acts } = image(async () => {
      throw new TransportFailure('connection refused', false);
    }, store);
    const f = await failureOf(activityEnv().env.run(acts.generateImage, task));
    // Nothing left: the workflow waits on a timer and sends again (workflows/task-outcome.ts, overChannels).
    expect(f).toMatchObject({ type: CHANNEL_REFUSED_FAILURE_TYPE, nonRetryable: true });
    expect(f.message).toContain('connection refused');
    expect(await store.wasDispatched(task.id)).toBe(false);
  });

  it('a transport failure after dispatch ends uncertain for a non-idempotent model', async () => {
    const { acts, store } = image(async (call) => {
      await call.dispatching();
      throw new TransportFailure('socket hang up', true);
    });
    const task = imageTask('img-once');
    const f = await failureOf(activityEnv().env.run(acts.generateImage, task));
    expect(f).toMatchObject({ type: 'uncertain', nonRetryable: true });
    expect(f.message).toContain('socket hang up');
    expect(await store.wasDispatched(task.id)).toBe(true);
  });

  it('a transport failure after dispatch is retried for an idempotent model', async () => {
    const { acts } = image(async (call) => {
      await call.dispatching();
      throw new TransportFailure('socket hang up', true);
    });
    const err = await activityEnv()
      .env.run(acts.generateImage, imageTask('img-idem'))
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransportFailure);
  });

  it(
    'an upstream refusal ends the task with its code; a ' + 'retryable one gets a type outside the task codes',
    async () => {
      const refused = image(async () => {
        throw new UpstreamFailure('auth_failed', 'bad key');
      });
      expect(await failureOf(activityEnv().env.run(refused.acts.generateImage, imageTask('img-once')))).toMatchObject({
        type: 'auth_failed',
        nonRetryable: true,
        message: 'bad key',
      });
      const flaky = image(async () => {
        throw new UpstreamFailure('upstream_error', '503', true);
      });
      expect(await failureOf(activityEnv().env.run(flaky.acts.generateImage, imageTask('img-idem')))).toMatchObject({
        type: 'upstream_error_retryable',
        nonRetryable: false,
      });
    },
  );

  it("ends upstream_timeout when the model's budget runs out, aborting the provider", async () => {
    let aborted = false;
    const { acts } = image(
      ({ signal }) =>
        new Promise((_, reject) =>
          signal.addEventListener('abort', () => {
            aborted = true;
            reject(signal.reason);
          }),
        ),
    );
    const f = await failureOf(activityEnv().env.run(acts.generateImage, imageTask('img-quick')));
    expect(f).toMatchObject({ type: 'upstream_timeout', nonRetryable: true });
    expect(aborted).toBe(true);
  });

  it("passes Temporal's cancellation to the provider, which is not a timeout", async () => {
    const { acts, calls } = image(
      ({ signal }) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')))),
    );
    const { env } = activityEnv();
    const running = env.run(acts.generateImage, imageTask('img-once')).catch((e: unknown) => e);
    await expect.poll(() => calls.length).toBe(1);
    env.cancel();
    const err = await running;
    expect(calls[0].signal.aborted).toBe(true);
    expect(err).not.toMatchObject({ type: 'upstream_timeout' });
  });

  it('refuses a model this worker does not have', async () => {
    const { acts, calls } = image(async () => RESULT);
    const f = await failureOf(activityEnv().env.run(acts.generateImage, imageTask('nope')));
    expect(f).toMatchObject({ type: 'invalid_request', nonRetryable: true });
    expect(calls).toHaveLength(0);
  });
});

describe('recordOutcome', () => {
  it('writes a terminal record, or answers the terminal record Redis already holds (the first one wins)', async () => {
    const { acts, store } = image(async () => RESULT);
    const task = imageTask('img-once');
    const failed: ImageTaskRecord = {
      id: task.id,
      kind: 'image',
      owner: task.owner,
      model: task.model,
      status: 'failed',
      created_at: task.created_at,
      finished_at: 1_700_000_001,
      candidates: null,
      error: { code: 'upstream_error', message: 'x' },
    };
    await expect(acts.recordOutcome(failed)).resolves.toEqual({ record: failed, written: true });
    const other = imageTask('img-once');
    const won: ImageTaskRecord = {
      ...failed,
      id: other.id,
      status: 'succeeded',
      error: null,
      candidates: RESULT.candidates,
    };
    await store.transition(won);
    await expect(acts.recordOutcome({ ...failed, id: other.id, status: 'uncertain' })).resolves.toEqual({
      record: won,
      written: false,
    });
  });
});

describe('mayHaveReachedUpstream', () => {
  it('follows the dispatch mark for a non-idempotent model and is always false for an idempotent one', async () => {
    const { acts, store } = image(async () => RESULT);
    const once = imageTask('img-once');
    const idem = imageTask('img-idem');
    expect(await acts.mayHaveReachedUpstream(once)).toBe(false);
    await store.markDispatched(once.id, 1);
    await store.markDispatched(idem.id, 1);
    expect(await acts.mayHaveReachedUpstream(once)).toBe(true);
    expect(await acts.mayHaveReachedUpstream(idem)).toBe(false);
  });
});

describe('video activities', () => {
  function video(p: Partial<VideoProvider>, store = new MemoryStore()) {
    const calls: VideoCall[] = [];
    const provider: VideoProvider = {
      create: async (c) => {
        calls.push(c);
        return p.create ? p.create(c) : (await c.dispatching(), { upstreamId: 'job-1' });
      },
      check: async (c) => {
        calls.push(c);
        return p.check ? p.check(c) : { state: 'completed' };
      },
      fetch: async (c) => {
        calls.push(c);
        return p.fetch ? p.fetch(c) : { video_url: 'https://blobs.example/v.mp4' };
      },
      ...(p.lookup
        ? {
            lookup: async (c: VideoCall) => {
              calls.push(c);
              return p.lookup!(c);
            },
          }
        : {}),
    };
    const acts = createVideoActivities({
      channels: new MemoryChannelState(),
      store: store,
      models: modelsOfKind(models, 'video'),
      providers: { local: provider, 'openai-videos': provider, 'workflow-node': provider, 'gemini-veo': provider },
      keys: {},
    });
    return { acts, calls, store };
  }

  it('a lost create answer is looked up by Kiln’s id: found, the task goes on with that job, no second create', async () => {
    let creates = 0;
    const { acts } = video({
      create: async (c) => {
        creates++;
        await c.dispatching();
        throw new TransportFailure('socket hang up', true);
      },
      lookup: async () => ({ found: { upstreamId: 'job-found' } }),
    });
    const job = await activityEnv().env.run(acts.createVideo, videoTask('vid-once'));
    expect(job).toMatchObject({ upstreamId: 'job-found', channel: 'default' });
    expect(creates).toBe(1);
  });

  it('a retried create after a dead worker looks the job up first; absent twice, it is created once', async () => {
    let lookups = 0;
    const { acts, calls, store } = video({ lookup: async () => (lookups++, { absent: true }) });
    const task = videoTask('vid-once');
    await store.transition(newVideoRecord(task, 'running'));
    await store.markDispatched(task.id, 1);
    const job = await activityEnv({ attempt: 2 }).env.run(acts.createVideo, task);
    expect(job).toMatchObject({ upstreamId: 'job-1' });
    expect(lookups).toBe(2);
    expect(calls.filter((c) => 'dispatching' in c)).toHaveLength(1);
  });

  it('an upstream that cannot be asked ends the task uncertain, with no second create', async () => {
    const { acts, calls, store } = video({
      lookup: async () => {
        throw new TransportFailure('connect ECONNREFUSED', false);
      },
    });
    const task = videoTask('vid-once');
    await store.transition(newVideoRecord(task, 'running'));
    await store.markDispatched(task.id, 1);
    const f = await failureOf(activityEnv({ attempt: 2 }).env.run(acts.createVideo, task));
    expect(f).toMatchObject({ type: 'uncertain', nonRetryable: true });
    expect(f.message).toContain('could not be asked');
    expect(calls.filter((c) => 'dispatching' in c)).toHaveLength(0);
  }, 20_000);

  it("createVideo marks running and dispatched, and hands the caller's key to the provider", async () => {
    const { acts, calls, store } = video({});
    const task = videoTask('vid-once');
    const { env, beats } = activityEnv();
    await expect(env.run(acts.createVideo, task)).resolves.toEqual({
      upstreamId: 'job-1',
      channel: 'default',
      timing: { started_at: expect.any(Number), attempts: 1 },
    });
    expect(store.records.get(task.id)).toMatchObject({ status: 'running', attempts: 1, channel: 'default' });
    expect(store.statuses(task.id)).toEqual(['running']);
    expect(await store.dispatchedTo(task.id)).toBe('default');
    expect(beats).toEqual([]); // a quick create: no heartbeat (see generateImage's)
    expect(calls[0].key).toBe('caller-key');
  });

  it(
    'a retried create that finds the dispatch mark ends ' + 'uncertain (non-idempotent) or is resent (idempotent)',
    async () => {
      const once = video({});
      const t1 = videoTask('vid-once');
      await once.store.markDispatched(t1.id, 1);
      expect(await failureOf(activityEnv({ attempt: 2 }).env.run(once.acts.createVideo, t1))).toMatchObject({
        type: 'uncertain',
        nonRetryable: true,
      });
      expect(once.calls).toHaveLength(0);

      const idem = video({});
      const t2 = videoTask('vid-idem');
      await idem.store.markDispatched(t2.id, 1);
      await expect(activityEnv({ attempt: 2 }).env.run(idem.acts.createVideo, t2)).resolves.toEqual({
        upstreamId: 'job-1',
        channel: 'default',
        timing: { started_at: expect.any(Number), attempts: 2 },
      });
      expect(idem.calls).toHaveLength(1);
    },
  );

  it('checkVideo retries a passing upstream fault and ends the task on a lasting refusal', async () => {
    const task = videoTask('vid-once');
    const job = { upstreamId: 'job-1' };
    const busy = video({
      check: async () => {
        throw new HttpStatusFailure(503, 'upstream answered 503');
      },
    });
    expect(await failureOf(activityEnv().env.run(busy.acts.checkVideo, { task, job }))).toMatchObject({
      type: 'upstream_transient',
      nonRetryable: false,
    });
    const gone = video({
      check: async () => {
        throw new HttpStatusFailure(404, 'upstream answered 404');
      },
    });
    expect(await failureOf(activityEnv().env.run(gone.acts.checkVideo, { task, job }))).toMatchObject({
      type: 'invalid_request',
      nonRetryable: true,
    });
    const ok = video({ check: async () => ({ state: 'running', progress: 30 }) });
    await expect(activityEnv().env.run(ok.acts.checkVideo, { task, job })).resolves.toEqual({
      state: 'running',
      progress: 30,
    });
  });
});
