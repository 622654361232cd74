// Upstream jobs (videos, image jobs) are watched by one activity (activities/job-watch.ts): a new
// task's history holds one watch where it held a durable timer and a check activity per look, and
// workflows an older release started, checking on timers, replay on this release's code (the
// `watch-job-in-one-activity` patch keeps them on their path). A worker that stops hands its
// watches back: another worker goes on watching, no attempt spent.
//
// The fixtures are the histories of two tasks run on 88c66c1 (the release before the watch) with
// KILN_SECRET below (its payload key decodes them): a local video model (latencyMs 1500,
// pollIntervalMs 300; two checks, one progress write) and a fal image job against the fake fal.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import proto from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { dataConverter } from '../../../src/temporal/client.js';
import { startFakeFal, type FakeFal } from '../providers/fal/fake-fal.js';
import { eventually, http, imageSteps, startKiln, submitBody, waitForStatus, type Kiln } from '../../support/kiln.js';

const SECRET = 'replay-fixture-secret-0123456789abcdef0123456789abcdef';
const FIXTURES = {
  video: { file: 'video-task-checks.bin', workflowId: 'video_de7ff7c672eff2ebbe4420b8c7de7e66' },
  image: { file: 'image-job-checks.bin', workflowId: 'task_a4827a0fb4665399f2c76e2ed718567f' },
};
const { History } = proto.temporal.api.history.v1;
const EventType = proto.temporal.api.enums.v1.EventType;
type Events = proto.temporal.api.history.v1.IHistoryEvent[];

const fixture = (file: string) =>
  History.decode(readFileSync(new URL(`../../fixtures/histories/${file}`, import.meta.url)));
const typesOf = (events: Events) => events.map((e) => String(EventType[e.eventType ?? 0]).replace(/^EVENT_TYPE_/, ''));
const activitiesOf = (events: Events) =>
  events.map((e) => e.activityTaskScheduledEventAttributes?.activityType?.name).filter((n): n is string => !!n);

let kiln: Kiln;
let fal: FakeFal;
beforeAll(async () => {
  fal = await startFakeFal();
  const job = { heartbeatTimeoutMs: 1000, timeoutMs: 30_000, overallTimeoutMs: 60_000 };
  kiln = await startKiln({
    env: { KILN_SECRET: SECRET, FAL_KEY: 'fal-key' },
    models: [
      {
        ...job,
        id: 'v-local',
        kind: 'video',
        provider: 'local',
        latencyMs: 1500,
        idempotent: true,
        pollIntervalMs: 300,
      },
      {
        ...job,
        id: 'v-long',
        kind: 'video',
        provider: 'local',
        latencyMs: 6000,
        idempotent: true,
        pollIntervalMs: 300,
      },
      // A 30 s heartbeat timeout: the watch beats every 10 s, so only the cancel notice makes a cancel prompt.
      {
        ...job,
        id: 'v-quiet',
        kind: 'video',
        provider: 'local',
        latencyMs: 20_000,
        idempotent: true,
        pollIntervalMs: 300,
        heartbeatTimeoutMs: 30_000,
      },
      {
        ...job,
        id: 'fal',
        provider: 'fal',
        baseUrl: fal.baseUrl,
        upstreamModel: 'fal-ai/flux/dev',
        pollIntervalMs: 100,
        credential: { env: 'FAL_KEY' },
      },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await fal?.close();
});

const replay = (history: proto.temporal.api.history.v1.IHistory, workflowId: string) =>
  Worker.runReplayHistory(
    { workflowBundle: { codePath: inject('workflowBundle') }, dataConverter: dataConverter(kiln.config) },
    history,
    workflowId,
  );

describe('job watch', () => {
  it('histories an older release recorded, checking on durable timers, replay on this code', async () => {
    for (const { file, workflowId } of Object.values(FIXTURES)) {
      const history = fixture(file);
      const events = history.events ?? [];
      // What the fixtures are: one timer and one check activity per look, no watch.
      const checks = activitiesOf(events).filter((n) => n === 'checkVideo' || n === 'checkImageJob');
      expect(checks.length).toBeGreaterThanOrEqual(2);
      expect(typesOf(events).filter((t) => t === 'TIMER_STARTED')).toHaveLength(checks.length);
      expect(activitiesOf(events).some((n) => n.startsWith('watch'))).toBe(false);
      await replay(history, workflowId);
    }
  });

  it('a new video task: one watch, no timer; progress reached the read model; its history replays', async () => {
    const api = http(kiln.baseUrl);
    const created = await api('/v1/videos', { method: 'POST', json: { model: 'v-local', prompt: 'a kiln at dusk' } });
    expect(created.status).toBe(200);
    const id = created.json.id as string;
    // The local job reports progress from 0 to 100 over 1.5 s: the watch writes it as it goes.
    const seen = new Set<number>();
    const done = await waitForStatus(
      async () => {
        const r = await api(`/v1/videos/${id}`);
        if (r.json?.status === 'in_progress') seen.add(r.json.progress);
        return r;
      },
      (s) => s === 'completed' || s === 'failed',
    );
    expect(done).toMatchObject({ status: 'completed', progress: 100 });
    expect([...seen].some((p) => p > 0 && p < 100)).toBe(true);
    const handle = kiln.api.client.workflow.getHandle(id);
    await handle.result();
    const events = (await handle.fetchHistory()).events ?? [];
    expect(activitiesOf(events)).toEqual(['createVideo', 'watchVideo', 'fetchVideo']);
    expect(typesOf(events)).not.toContain('TIMER_STARTED');
    // The watch has its queue: it never takes a slot of the model queue's upstream calls.
    const queues = events
      .map((e) => e.activityTaskScheduledEventAttributes?.taskQueue?.name)
      .filter((q): q is string => !!q);
    const base = kiln.config.temporal.taskQueue;
    expect(queues).toEqual([`${base}.model.v-local`, `${base}.watch`, `${base}.model.v-local`]);
    await replay({ events }, id);
  });

  it('a new fal image job: one watch, no timer; its history replays', async () => {
    const { submit, finish } = imageSteps(() => kiln.baseUrl);
    const id = await submit('fal', submitBody('a fox', { generationConfig: { imageConfig: { output: 'url' } } }));
    expect((await finish(id)).status).toBe('succeeded');
    const handle = kiln.api.client.workflow.getHandle(id);
    await handle.result();
    const events = (await handle.fetchHistory()).events ?? [];
    expect(activitiesOf(events)).toEqual(['createImageJob', 'watchImageJob', 'fetchImageJob']);
    expect(typesOf(events)).not.toContain('TIMER_STARTED');
    expect(fal.statusReads().length).toBeGreaterThanOrEqual(1);
    await replay({ events }, id);
  });

  it('a worker that stops hands its watch back: the next worker watches on from the same progress, on attempt 1', async () => {
    const api = http(kiln.baseUrl);
    const created = await api('/v1/videos', { method: 'POST', json: { model: 'v-long', prompt: 'a long kiln' } });
    expect(created.status, created.text).toBe(200);
    const id = created.json.id as string;
    const progress: number[] = [];
    const poll = async () => {
      const r = await api(`/v1/videos/${id}`);
      if (typeof r.json?.progress === 'number') progress.push(r.json.progress);
      return r;
    };
    await waitForStatus(poll, (s) => s === 'in_progress');
    await eventually(poll, (r) => r.json.progress > 0);
    await kiln.stopWorker();
    const stoppedAt = (await poll()).json.progress as number;
    await kiln.startWorker();
    const done = await waitForStatus(poll, (s) => s === 'completed' || s === 'failed');
    expect(done).toMatchObject({ status: 'completed', progress: 100 });
    // Progress never moved back, across the two workers.
    expect(progress).toEqual([...progress].sort((a, b) => a - b));
    expect(stoppedAt).toBeGreaterThan(0);

    const events = (await kiln.api.client.workflow.getHandle(id).fetchHistory()).events ?? [];
    expect(activitiesOf(events)).toEqual(['createVideo', 'watchVideo', 'watchVideo', 'fetchVideo']);
    const types = typesOf(events);
    // The first watch completed (handed back), it did not fail or time out.
    expect(types.filter((t) => t === 'ACTIVITY_TASK_FAILED' || t === 'ACTIVITY_TASK_TIMED_OUT')).toEqual([]);
    const attempts = events
      .map((e) => e.activityTaskStartedEventAttributes?.attempt)
      .filter((a): a is number => a != null);
    expect(attempts).toEqual([1, 1, 1, 1]);
  }, 60_000);

  it('a cancel reaches a quiet watch at once (the cancel notice), and the task ends canceled', async () => {
    const api = http(kiln.baseUrl);
    const created = await api('/v1/videos', { method: 'POST', json: { model: 'v-quiet', prompt: 'a quiet kiln' } });
    expect(created.status, created.text).toBe(200);
    const id = created.json.id as string;
    const get = () => api(`/v1/videos/${id}`);
    await eventually(get, (r) => r.json.status === 'in_progress' && r.json.progress > 0);
    const asked = Date.now();
    expect((await api(`/v1/videos/${id}/cancel`, { method: 'POST' })).status).toBe(202);
    const done = await waitForStatus(get, (s) => s === 'completed' || s === 'failed');
    const tookMs = Date.now() - asked;
    console.log(`cancel of a watched video: canceled ${tookMs} ms after the request`);
    expect(done).toMatchObject({ status: 'failed', error: { code: 'canceled' } });
    // The quiet beat is 10 s; without the notice this takes up to that long.
    expect(tookMs).toBeLessThan(2500);
    const events = (await kiln.api.client.workflow.getHandle(id).fetchHistory()).events ?? [];
    expect(typesOf(events)).toContain('ACTIVITY_TASK_CANCELED');
  }, 60_000);
});
