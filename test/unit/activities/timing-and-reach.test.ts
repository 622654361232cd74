// The timing fields the upstream activities record (started_at, attempts) and what a cancel asks
// of them (how far the upstream call got), with an in-memory read model.
import { describe, expect, it } from 'vitest';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { createActivities } from '../../../activities/image/index.js';
import type { ImageProvider } from '../../../activities/providers/contract.js';
import { createVideoActivities } from '../../../activities/video/index.js';
import type { VideoProvider } from '../../../activities/providers/contract.js';
import { modelsOfKind, parseModels } from '../../../src/config/models.js';
import { newImageRecord, type GenerationResult } from '../../../src/shared/image-task.js';
import { newVideoRecord, type VideoTaskInput } from '../../../src/shared/video-task.js';
import { MemoryStore } from '../../support/unit-store.js';
import { imageTaskInput } from '../../support/records.js';
import { MemoryChannelState } from '../../support/unit-channel-state.js';

const models = parseModels(
  {
    models: [
      { id: 'img-once', kind: 'image', provider: 'local', heartbeatTimeoutMs: 1000 },
      { id: 'img-idem', kind: 'image', provider: 'local', heartbeatTimeoutMs: 1000, idempotent: true },
      { id: 'vid-once', kind: 'video', provider: 'local', heartbeatTimeoutMs: 1000 },
    ],
  },
  'unit models',
);
const RESULT: GenerationResult = { response_id: 'r1', model_version: 'v1', candidates: [] };

let n = 0;
const imageTask = imageTaskInput;
const videoTask = (): VideoTaskInput => ({
  id: `video_${String(++n).padStart(32, '0')}`,
  owner: 'o1',
  model: 'vid-once',
  created_at: 1_700_000_000,
  request: { prompt: 'a kiln', seconds: '4', size: '720x1280' },
});

function image(store = new MemoryStore()) {
  const provider: ImageProvider = {
    generate: async (call) => {
      await call.dispatching();
      return RESULT;
    },
  };
  const acts = createActivities({
    channels: new MemoryChannelState(),
    store: store,
    models: modelsOfKind(models, 'image'),
    providers: { local: provider, gemini: provider },
  });
  return { acts, store };
}

const run = <A extends unknown[], R>(attempt: number, fn: (...a: A) => Promise<R>, ...args: A): Promise<R> =>
  new MockActivityEnvironment({ attempt }, { logger: new DefaultLogger('ERROR') }).run(fn, ...args) as Promise<R>;

describe('timing fields', () => {
  it('the first attempt records started_at and attempts 1 on running and succeeded', async () => {
    const { acts, store } = image();
    const task = imageTask('img-idem');
    const before = Math.floor(Date.now() / 1000);
    const done = await run(1, acts.generateImage, task);
    expect(done.record).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(done.record.started_at).toBeGreaterThanOrEqual(before);
    expect(done.record.started_at).toBeLessThanOrEqual(done.record.finished_at!);
    expect(await store.get(task.id)).toEqual(done.record);
  });

  it('a later attempt keeps the first attempt started_at and counts itself', async () => {
    const { acts, store } = image();
    const task = imageTask('img-idem');
    await store.transition({ ...newImageRecord(task, 'running'), started_at: 1_700_000_005, attempts: 1 });
    const done = await run(3, acts.generateImage, task);
    expect(done.record).toMatchObject({ status: 'succeeded', started_at: 1_700_000_005, attempts: 3 });
  });

  it("a terminal record the workflow built without them gets the stored attempt's", async () => {
    const { acts, store } = image();
    const task = imageTask('img-once');
    await store.transition({ ...newImageRecord(task, 'running'), started_at: 1_700_000_007, attempts: 2 });
    const failed = {
      ...newImageRecord(task, 'failed'),
      finished_at: 1_700_000_009,
      error: { code: 'canceled', message: 'x' },
    };
    const settled = await acts.recordOutcome(failed);
    expect(settled.record).toEqual({ ...failed, started_at: 1_700_000_007, attempts: 2 });
    expect(await store.get(task.id)).toEqual(settled.record);
    // Never started: nothing to add.
    const other = imageTask('img-once');
    const untouched = { ...newImageRecord(other, 'failed'), finished_at: 1_700_000_009 };
    expect((await acts.recordOutcome(untouched)).record).toEqual(untouched);
  });

  it('video: createVideo records its timing and hands it to the workflow', async () => {
    const store = new MemoryStore();
    const provider = {
      create: async (call: { dispatching(): Promise<void> }) => {
        await call.dispatching();
        return { upstreamId: 'job-1' };
      },
    } as unknown as VideoProvider;
    const acts = createVideoActivities({
      channels: new MemoryChannelState(),
      store: store,
      models: modelsOfKind(models, 'video'),
      providers: { local: provider, 'openai-videos': provider, 'workflow-node': provider, 'gemini-veo': provider },
      keys: {},
    });
    const task = videoTask();
    const job = await run(1, acts.createVideo, task);
    expect(job.timing).toMatchObject({ attempts: 1 });
    expect(store.records.get(task.id)).toMatchObject({ status: 'running', ...job.timing });
    // A terminal write the workflow built with them keeps them.
    await acts.recordVideoTransition({ ...newVideoRecord(task, 'failed'), completed_at: 1_700_000_010, ...job.timing });
    expect(store.records.get(task.id)).toMatchObject({ status: 'failed', ...job.timing });
    // A provider without a cancel call: nothing to stop upstream.
    expect((await run(1, acts.cancelVideo, { task, job })).stopped).toBe(false);
  });
});

describe("a cancel's question: how far the upstream call got", () => {
  it('not sent without the dispatch mark; sent, and whether the upstream is idempotent, with it', async () => {
    const { acts, store } = image();
    const once = imageTask('img-once');
    const idem = imageTask('img-idem');
    expect((await acts.upstreamReach(once)).reach).toBe('not_sent');
    await store.markDispatched(once.id, 1);
    await store.markDispatched(idem.id, 1);
    expect((await acts.upstreamReach(once)).reach).toBe('sent_not_idempotent');
    expect((await acts.upstreamReach(idem)).reach).toBe('sent');
  });
});
