// Video models over several channels, each a real fake video upstream that counts what it
// received: a refused create moves to the next channel (of the same or another provider), and once
// an upstream has accepted the job every check and download stays on that channel.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  drop,
  fail,
  startFakeOpenAIVideos,
  type FakeOpenAIVideos,
} from '../providers/openai-videos/fake-openai-videos.js';
import { startFakeWorkflowNode, type FakeWorkflowNode } from '../providers/workflow-node/fake-workflow-node.js';
import { startKiln, type Kiln } from '../../support/kiln.js';
import { DONE, videoApi } from './video-kiln.js';
import { waitForStatus } from '../../support/kiln.js';

let a: FakeOpenAIVideos;
let b: FakeOpenAIVideos;
let n: FakeWorkflowNode;
let kiln: Kiln;
let calls: ReturnType<typeof videoApi>;

beforeAll(async () => {
  [a, b, n] = await Promise.all([startFakeOpenAIVideos(), startFakeOpenAIVideos(), startFakeWorkflowNode()]);
  const quick = { kind: 'video', pollIntervalMs: 100, heartbeatTimeoutMs: 1000, timeoutMs: 5000, maxAttempts: 3 };
  const openai = (fake: FakeOpenAIVideos, id: string, priority: number) => ({
    id,
    provider: 'openai-videos',
    baseUrl: fake.baseUrl,
    upstreamModel: 'sora-2',
    priority,
    cooldownAfter: 1000,
  });
  kiln = await startKiln({
    models: [
      { ...quick, id: 'v-ch', channels: [openai(a, 'oa-a', 2), openai(b, 'oa-b', 1)] },
      {
        ...quick,
        id: 'v-mixed',
        channels: [
          openai(a, 'oa', 2),
          {
            id: 'node',
            provider: 'workflow-node',
            baseUrl: n.baseUrl,
            priority: 1,
            workflowId: '1904136902449209346',
            nodes: {
              prompt: { nodeId: '6', fieldName: 'text' },
              image: { nodeId: '12', fieldName: 'image' },
              seconds: { nodeId: '7', fieldName: 'duration' },
              size: { nodeId: '7', fieldName: 'size' },
            },
          },
        ],
      },
    ],
  });
  calls = videoApi(kiln);
});
afterAll(async () => {
  await kiln?.stop();
  await Promise.all([a?.close(), b?.close(), n?.close()]);
});
beforeEach(() => {
  a.reset();
  b.reset();
  n.reset();
});

const finish = (id: string) => waitForStatus(() => calls.api()(`/v1/videos/${id}`), DONE, 30_000);

describe('video channels', () => {
  it('a refused create moves to the next channel; every check and download then goes there only', async () => {
    a.enqueueCreate(fail(429, 'quota exceeded'));
    const id = await calls.createOk({ model: 'v-ch', prompt: 'a fox' });
    const v = await finish(id);
    expect(v).toMatchObject({ status: 'completed', channel: 'oa-b', attempts: 2 });
    expect(a.requests).toHaveLength(1);
    expect(a.creates()).toHaveLength(1);
    expect(b.creates()).toHaveLength(1);
    // Status checks and the content download went to the channel that accepted the job.
    expect(b.requests.length).toBeGreaterThan(2);
    expect(b.requests.every((r) => r.path.startsWith('/v1/videos'))).toBe(true);
  });

  it('once the upstream accepted the job, a failing status check is retried on that channel, never moved', async () => {
    a.enqueueCheck(fail(503, 'busy'));
    const id = await calls.createOk({ model: 'v-ch', prompt: 'a hare' });
    const v = await finish(id);
    expect(v).toMatchObject({ status: 'completed', channel: 'oa-a', attempts: 1 });
    expect(b.requests).toHaveLength(0);
  });

  it('a create dropped after sending on a non-idempotent channel: uncertain, exactly one create in all', async () => {
    a.enqueueCreate(drop());
    const id = await calls.createOk({ model: 'v-ch', prompt: 'a badger' });
    const v = await finish(id);
    // Kiln's uncertain, as OpenAI's four statuses show it.
    expect(v).toMatchObject({ status: 'failed', error: { code: 'uncertain' }, channel: 'oa-a' });
    expect(a.creates().length + b.creates().length).toBe(1);
  });

  it('channels of different providers: an openai-videos refusal moves to a workflow-node channel with every field mapped', async () => {
    a.enqueueCreate(fail(503, 'unavailable'));
    const id = await calls.createOk({ model: 'v-mixed', prompt: 'an otter', seconds: '8', size: '1280x720' });
    const v = await finish(id);
    expect(v).toMatchObject({ status: 'completed', channel: 'node', attempts: 2 });
    const [created] = n.creates();
    expect(created!.path).toBe('/task/openapi/create');
    expect(created!.body.nodeInfoList).toEqual(
      expect.arrayContaining([
        { nodeId: '6', fieldName: 'text', fieldValue: 'an otter' },
        { nodeId: '7', fieldName: 'duration', fieldValue: '8' },
        { nodeId: '7', fieldName: 'size', fieldValue: '1280x720' },
      ]),
    );
    expect(a.creates()).toHaveLength(1);
  });
});
