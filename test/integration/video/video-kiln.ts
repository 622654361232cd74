// Shared setup of the video test files: a real Kiln with local, OpenAI-videos and workflow-node
// video models (the last two pointed at a fake upstream of their protocol each), and request helpers.
import { afterAll, beforeAll, beforeEach, expect } from 'vitest';
import { startFakeOpenAIVideos, type FakeOpenAIVideos } from '../providers/openai-videos/fake-openai-videos.js';
import { startFakeWorkflowNode, type FakeWorkflowNode } from '../providers/workflow-node/fake-workflow-node.js';
import { http, KEY_A, startKiln, waitForStatus, type Kiln } from '../../support/kiln.js';

/** OpenAI's end statuses (an uncertain video is `failed`, code `uncertain`). */
export const DONE = (s: string) => s === 'completed' || s === 'failed';

export async function startVideoKiln(): Promise<{ kiln: Kiln; fake: FakeOpenAIVideos; node: FakeWorkflowNode }> {
  const [fake, node] = await Promise.all([startFakeOpenAIVideos(), startFakeWorkflowNode()]);
  const quick = { pollIntervalMs: 100, heartbeatTimeoutMs: 1000, timeoutMs: 5000 };
  // The local renderer (jimp frames, then ffmpeg) takes seconds on a loaded 2-core machine: its
  // budget is not what these tests are about.
  const local = { ...quick, timeoutMs: 30_000 };
  const oa = { ...quick, provider: 'openai-videos', baseUrl: fake.baseUrl, kind: 'video', maxAttempts: 3 };
  const kiln = await startKiln({
    models: [
      { id: 'img', provider: 'local', latencyMs: 0, idempotent: true },
      {
        ...local,
        id: 'v-local',
        kind: 'video',
        provider: 'local',
        latencyMs: 600,
        idempotent: true,
        seconds: ['4', '2'],
        sizes: ['320x180', '1280x720'],
      },
      { ...local, id: 'v-local-pro', kind: 'video', provider: 'local', latencyMs: 300, idempotent: true, strict: true },
      {
        ...local,
        id: 'v-local-node',
        kind: 'video',
        provider: 'local',
        latencyMs: 100,
        idempotent: true,
        form: 'workflow-node',
        seconds: ['2'],
      },
      { ...oa, id: 'v-pro', strict: true, upstreamModel: 'sora-2-pro', idempotent: false },
      // queueTimeoutMs 0 (v-oa, v-node): a refusal ends the task at once, so tests read each answer's
      // mapping (the wait and resend: test/integration/channels/refusal-wait.test.ts).
      { ...oa, id: 'v-oa', upstreamModel: 'sora-2', idempotent: false, maxAttempts: 2, queueTimeoutMs: 0 },
      { ...oa, id: 'v-oa-idem', idempotent: true },
      { ...oa, id: 'v-oa-slow', pollIntervalMs: 300, overallTimeoutMs: 2500 },
      {
        ...quick,
        id: 'v-node',
        kind: 'video',
        queueTimeoutMs: 0,
        provider: 'workflow-node',
        baseUrl: node.baseUrl,
        workflowId: '1904136902449209346',
        seconds: ['5'],
        sizes: ['720x1280'],
        nodes: { prompt: { nodeId: '6', fieldName: 'text' }, image: { nodeId: '12', fieldName: 'image' } },
      },
    ],
  });
  return { kiln, fake, node };
}

export function videoApi(kiln: Kiln) {
  const api = (key: string | null = KEY_A) => http(kiln.baseUrl, key);
  const create = (body: Record<string, unknown>, key = KEY_A) => api(key)('/v1/videos', { method: 'POST', json: body });
  return {
    api,
    create,
    async createOk(body: Record<string, unknown>): Promise<string> {
      const res = await create(body);
      expect(res.status, res.text).toBe(200);
      return res.json.id;
    },
    finish: (id: string, timeoutMs = 30_000) => waitForStatus(() => api()(`/v1/videos/${id}`), DONE, timeoutMs),
    /** Polls until the video's (OpenAI) status is `status` and returns it. */
    until: (id: string, status: string) => waitForStatus(() => api()(`/v1/videos/${id}`), status),
  };
}

export interface VideoKilnFile {
  kiln: Kiln;
  /** The OpenAI videos upstream of v-oa, v-oa-idem, v-oa-slow and v-pro. */
  fake: FakeOpenAIVideos;
  /** The workflow-node host of v-node. */
  node: FakeWorkflowNode;
  calls: ReturnType<typeof videoApi>;
}

/** Registers a test file's hooks: one video Kiln and fake upstreams per file, the fakes reset before each test. */
export function useVideoKiln(assign: (file: VideoKilnFile) => void): void {
  let file: VideoKilnFile | undefined;
  beforeAll(async () => {
    const { kiln, fake, node } = await startVideoKiln();
    file = { kiln, fake, node, calls: videoApi(kiln) };
    assign(file);
  });
  afterAll(async () => {
    await file?.kiln.stop();
    await Promise.all([file?.fake.close(), file?.node.close()]);
  });
  beforeEach(() => {
    file?.fake.reset();
    file?.node.reset();
  });
}
