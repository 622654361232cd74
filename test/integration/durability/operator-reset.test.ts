// An operator's reset of a task's workflow (the Web UI's "Reset", `temporal workflow reset`) on
// real Temporal and Redis, with fake upstreams that count what they receive: a non-idempotent
// upstream never gets a second request for the task, and the API, the owner's list and the
// workflow's result (what the Web UI shows) agree on the task's final state afterwards.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { Client, Connection } from '@temporalio/client';
import { binary } from '../../../scripts/services.js';
import { dataConverter } from '../../../src/temporal/client.js';
import { delayed, ok, startFakeGemini, fakeGeminiModel, type FakeGemini } from '../providers/gemini/fake-gemini.js';
import { startFakeOpenAIVideos, type FakeOpenAIVideos } from '../providers/openai-videos/fake-openai-videos.js';
import {
  eventually,
  http,
  KEY_A,
  startKiln,
  submitBody,
  waitForStatus,
  TERMINAL,
  type Kiln,
} from '../../support/kiln.js';
import { DONE } from '../video/video-kiln.js';

const run = promisify(execFile);

let kiln: Kiln;
let gemini: FakeGemini;
let videos: FakeOpenAIVideos;
let client: Client;
const api = () => http(kiln.baseUrl, KEY_A);

/** `temporal workflow reset`, as an operator types it. */
async function reset(id: string, type: 'FirstWorkflowTask' | 'LastWorkflowTask'): Promise<void> {
  await run(binary('temporal', 'TEMPORAL_BIN'), [
    'workflow',
    'reset',
    '--address',
    inject('temporalAddress'),
    '--workflow-id',
    id,
    '--type',
    type,
    '--reason',
    'operator drill: reset',
  ]);
}

/** The reset's new run has finished: its result (what the Web UI shows) and the API's answer. */
async function settledAfterReset(id: string, path: string, done: (s: string) => boolean) {
  const handle = client.workflow.getHandle(id);
  const result = (await eventually(
    async () => {
      const d = await handle.describe();
      return d.status.name === 'RUNNING' ? null : await handle.result();
    },
    (r) => r !== null,
    30_000,
  )) as { status: string };
  const polled = await waitForStatus(() => api()(path), done, 30_000);
  return { result, polled };
}

beforeAll(async () => {
  gemini = await startFakeGemini();
  videos = await startFakeOpenAIVideos();
  const oa = {
    provider: 'openai-videos',
    baseUrl: videos.baseUrl,
    kind: 'video',
    pollIntervalMs: 100,
    heartbeatTimeoutMs: 1000,
    timeoutMs: 5000,
  };
  kiln = await startKiln({
    // Reconciliation (for the terminate below) in quick rounds.
    env: { RECONCILE_EVERY_MS: '1000' },
    models: [
      { ...fakeGeminiModel(gemini), id: 'once', idempotent: false, timeoutMs: 60_000 },
      { ...oa, id: 'v-once', upstreamModel: 'sora-2', idempotent: false },
    ],
  });
  const connection = await Connection.connect({ address: inject('temporalAddress') });
  client = new Client({ connection, dataConverter: dataConverter(kiln.config) });
});
afterAll(async () => {
  await kiln?.stop();
  await gemini?.close();
  await videos?.close();
  await client?.connection.close();
});
beforeEach(() => {
  gemini.reset();
  videos.reset();
});

describe('reset of an image task (non-idempotent upstream)', () => {
  it.each(['FirstWorkflowTask', 'LastWorkflowTask'] as const)(
    'a finished task reset to %s keeps its image; the upstream got one request',
    async (type) => {
      const sub = await api()('/v1beta/models/once:generateContent', { method: 'POST', json: submitBody('reset me') });
      expect(sub.status).toBe(202);
      const id = sub.json.id as string;
      const before = await waitForStatus(() => api()(`/v1/tasks/${id}`), TERMINAL);
      expect(before.status).toBe('succeeded');
      await reset(id, type);
      const { result, polled } = await settledAfterReset(id, `/v1/tasks/${id}`, TERMINAL);
      expect(gemini.requests).toHaveLength(1);
      expect(polled).toEqual(before);
      expect(result).toEqual(expect.objectContaining({ status: 'succeeded', candidates: before.candidates }));
      const list = await api()('/v1/tasks?limit=100');
      expect(list.json.items.find((t: { id: string }) => t.id === id)?.status).toBe('succeeded');
    },
  );

  it('an unfinished task reset during its upstream call ends uncertain; the upstream got one request', async () => {
    gemini.setDefault(delayed(60_000, ok()));
    const sub = await api()('/v1beta/models/once:generateContent', { method: 'POST', json: submitBody('hold me') });
    const id = sub.json.id as string;
    await gemini.waitForRequests(1);
    await reset(id, 'FirstWorkflowTask');
    const { result, polled } = await settledAfterReset(id, `/v1/tasks/${id}`, TERMINAL);
    expect(polled.status).toBe('uncertain');
    expect(polled.uncertain_reason).toMatch(/not sent again|not resent|may have/i);
    expect(result.status).toBe('uncertain');
    // Long enough for a second request to have arrived, had one been sent.
    await new Promise((r) => setTimeout(r, 500));
    expect(gemini.requests).toHaveLength(1);
  });
});

describe('reset of a video task (non-idempotent upstream)', () => {
  const create = (prompt: string) =>
    api()('/v1/videos', { method: 'POST', json: { model: 'v-once', prompt, seconds: '4', size: '720x1280' } });
  const creates = () => videos.creates();

  it('a finished video reset to its first workflow task stays completed; one create reached the upstream', async () => {
    const res = await create('reset a finished video');
    expect(res.status, res.text).toBe(200);
    const id = res.json.id as string;
    const before = await waitForStatus(() => api()(`/v1/videos/${id}`), DONE, 30_000);
    expect(before.status).toBe('completed');
    await reset(id, 'FirstWorkflowTask');
    const { result, polled } = await settledAfterReset(id, `/v1/videos/${id}`, DONE);
    expect(creates()).toHaveLength(1);
    expect(polled).toEqual(before);
    expect(result.status).toBe('succeeded');
  });

  it('a video reset while its job runs ends uncertain; one create reached the upstream', async () => {
    videos.setScript(['in_progress:10']);
    const res = await create('reset a running video');
    const id = res.json.id as string;
    await waitForStatus(
      () => api()(`/v1/videos/${id}`),
      (s) => s === 'in_progress',
      30_000,
    );
    await reset(id, 'FirstWorkflowTask');
    const { result, polled } = await settledAfterReset(id, `/v1/videos/${id}`, DONE);
    expect(creates()).toHaveLength(1);
    // /v1/videos shows Kiln's uncertain as OpenAI's failed, code `uncertain`; the workflow's record keeps it.
    expect([polled.status, polled.error?.code]).toEqual(['failed', 'uncertain']);
    expect(result.status).toBe('uncertain');
  });
});

describe('terminate of a video task', () => {
  it('while its job runs (non-idempotent upstream): reconciled to uncertain; one create', async () => {
    videos.setScript(['in_progress:10']);
    const res = await api()('/v1/videos', {
      method: 'POST',
      json: { model: 'v-once', prompt: 'terminate a running video', seconds: '4', size: '720x1280' },
    });
    const id = res.json.id as string;
    await waitForStatus(
      () => api()(`/v1/videos/${id}`),
      (s) => s === 'in_progress',
      30_000,
    );
    await client.workflow.getHandle(id).terminate('video drill');
    const ended = await waitForStatus(() => api()(`/v1/videos/${id}`), DONE, 60_000);
    expect([ended.status, ended.error?.code]).toEqual(['failed', 'uncertain']);
    expect(ended.uncertain_reason).toMatch(/^Terminated by an operator \(.*video drill\) after its create request/);
    expect(videos.creates()).toHaveLength(1);
  });
});
