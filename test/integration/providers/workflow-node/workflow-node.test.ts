// The workflow-node provider against a RunningHub-style fake host (a real HTTP server): workflowId
// and nodeInfoList sent, results[*].url copied into the blob store, the envelope's codes mapped.
import { describe, expect, it } from 'vitest';
import { envelope, fail, type FakeWorkflowNode } from './fake-workflow-node.js';
import { KEY_A, type Kiln } from '../../../support/kiln.js';
import { useVideoKiln, videoApi } from '../../video/video-kiln.js';

let fake: FakeWorkflowNode;
let kiln: Kiln;
let calls: ReturnType<typeof videoApi>;

useVideoKiln((f) => ({ kiln, node: fake, calls } = f));

const createOk = (body: Record<string, unknown>) => calls.createOk(body);
const finish = (id: string, timeoutMs?: number) => calls.finish(id, timeoutMs);

describe('workflow-node upstream (RunningHub style)', () => {
  it('sends workflowId and nodeInfoList, waits for SUCCESS, ends with results[*].url in the blob store', async () => {
    fake.setWorkflow(['QUEUED', 'RUNNING', 'RUNNING', 'SUCCESS']);
    const id = await createOk({
      model: 'v-node',
      prompt: 'placeholder',
      image: 'https://img.example/cat.png',
      nodeInfoList: [
        { nodeId: '3', fieldName: 'seed', fieldValue: 42 },
        { nodeId: '6', fieldName: 'text', fieldValue: 'from the caller' },
      ],
    });
    const v = await finish(id);
    expect(v).toMatchObject({ status: 'completed', model: 'v-node', seconds: '5', size: '720x1280', error: null });
    const [sent] = fake.creates().filter((r) => r.body.workflowId);
    expect(sent.body).toEqual({
      apiKey: KEY_A,
      workflowId: '1904136902449209346',
      nodeInfoList: [
        { nodeId: '6', fieldName: 'text', fieldValue: 'from the caller' },
        { nodeId: '12', fieldName: 'image', fieldValue: 'https://img.example/cat.png' },
        { nodeId: '3', fieldName: 'seed', fieldValue: 42 },
      ],
    });
    expect(v.results).toHaveLength(2);
    expect(v.results.map((r: any) => [r.file_type, r.node_id])).toEqual([
      ['mp4', '9'],
      ['png', '10'],
    ]);
    for (const r of v.results) expect(r.url).toMatch(new RegExp(`^${kiln.baseUrl}/v1/files/[a-f0-9]{32}\\.(mp4|png)$`));
    expect(v.video_url).toBe(v.results[0].url);
    expect(Buffer.from(await (await fetch(v.results[0].url)).arrayBuffer()).equals(fake.video)).toBe(true);
    expect(Buffer.from(await (await fetch(v.results[1].url)).arrayBuffer()).equals(fake.image)).toBe(true);
    expect(fake.statusChecks()).toHaveLength(4);
  });

  it('maps the upstream envelope codes and a failed workflow', async () => {
    const cases: [() => void, string, string][] = [
      [() => fake.enqueueCreate(envelope(380, 'WORKFLOW_NOT_EXISTS')), 'invalid_request', 'WORKFLOW_NOT_EXISTS'],
      [
        () => fake.enqueueCreate(envelope(803, 'APIKEY_INVALID_NODE_INFO')),
        'invalid_request',
        'APIKEY_INVALID_NODE_INFO',
      ],
      [() => fake.enqueueCreate(envelope(412, 'TOKEN_INVALID')), 'auth_failed', 'TOKEN_INVALID'],
      [() => fake.enqueueCreate(envelope(416, 'APIKEY_USER_BALANCE_NOT_ENOUGH')), 'insufficient_balance', 'BALANCE'],
      [() => fake.enqueueCreate(envelope(421, 'TASK_QUEUE_MAXED')), 'upstream_rate_limited', 'TASK_QUEUE_MAXED'],
      [() => fake.enqueueCreate(fail(402, 'pay up')), 'insufficient_balance', 'pay up'],
      [
        () => fake.setWorkflow(['RUNNING', 'FAILED:node 12 ran out of memory']),
        'upstream_error',
        'node 12 ran out of memory',
      ],
    ];
    for (const [arrange, code, message] of cases) {
      fake.reset();
      arrange();
      const v = await finish(await createOk({ model: 'v-node', prompt: 'p' }));
      expect([v.status, v.error?.code, v.error?.message], message).toEqual([
        'failed',
        code,
        expect.stringContaining(message),
      ]);
      expect(v.results).toBeUndefined();
    }
  });
});
