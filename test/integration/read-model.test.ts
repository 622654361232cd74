// The lean read path answers with views stored beside each record. These tests pin that it stays
// exact: a transition is visible to the very next poll, batch and list; another owner still gets
// not_found; an expired record is gone; records written before views were stored still read.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ownerOfKey } from '../../src/config.js';
import type { TaskRecord } from '../../src/shared/task.js';
import type { VideoTaskRecord } from '../../src/shared/video.js';
import { taskView, videoView } from '../../src/shared/views.js';
import { http, KEY_A, KEY_B, startKiln, type Kiln } from '../support/kiln.js';
import { imageRecord, succeededRecord } from '../support/records.js';

let kiln: Kiln;
let owner: string;
beforeAll(async () => {
  kiln = await startKiln({ workers: false });
  owner = ownerOfKey(kiln.config.ownerKey, KEY_A);
});
afterAll(async () => {
  await kiln?.stop();
});

const now = () => Math.floor(Date.now() / 1000);
const image = (status: TaskRecord['status'], over: Partial<TaskRecord> = {}) => imageRecord(owner, status, over);
const succeeded = succeededRecord;

describe('reads from stored views', () => {
  it(
    'shows each transition to the very next poll, batch and ' + 'list, with the same body a view of the record gives',
    async () => {
      const api = http(kiln.baseUrl);
      const r = image('accepted');
      for (const next of [r, { ...r, status: 'queued' as const }, { ...r, status: 'running' as const }, succeeded(r)]) {
        expect(await kiln.api.store.transition(next)).toBe(true);
        const poll = await api(`/v1/tasks/${r.id}`);
        expect(poll.status).toBe(200);
        expect(poll.json).toEqual(JSON.parse(JSON.stringify(taskView(next))));
        expect(poll.headers.get('content-type')).toMatch(/^application\/json/);
        expect(poll.headers.get('retry-after')).toBe(
          next.status === 'succeeded' ? null : String(kiln.config.pollAfterSeconds),
        );
        const batch = await api('/v1/tasks/batch-get', { method: 'POST', json: { ids: [r.id] } });
        expect(batch.json.items[0].status).toBe(next.status);
        const list = await api('/v1/tasks?limit=100');
        expect(list.json.items.find((i: { id: string }) => i.id === r.id)).toEqual({
          id: r.id,
          model: r.model,
          status: next.status,
          created_at: r.created_at,
          finished_at: next.finished_at,
          started_at: next.started_at ?? null,
          attempts: next.attempts ?? 0,
          content_url: `/v1/tasks/${r.id}/content`,
        });
      }
      // A late, earlier write never moves the view back.
      expect(await kiln.api.store.transition({ ...r, status: 'running' })).toBe(false);
      expect((await api(`/v1/tasks/${r.id}`)).json.status).toBe('succeeded');
    },
  );

  it("answers a batch in request order with not_found items for unknown, malformed and other owners' ids", async () => {
    const api = http(kiln.baseUrl);
    const mine = image('running');
    const theirs = image('running', { owner: ownerOfKey(kiln.config.ownerKey, KEY_B) });
    await kiln.api.store.transition(mine);
    await kiln.api.store.transition(theirs);
    const ghost = `task_${randomBytes(16).toString('hex')}`;
    const odd = 'task_"\\</script>';
    const res = await api('/v1/tasks/batch-get', { method: 'POST', json: { ids: [theirs.id, mine.id, odd, ghost] } });
    expect(res.status).toBe(200);
    expect(res.json.object).toBe('batch.task.list');
    expect(res.json.next_poll_after_ms).toBe(kiln.config.pollAfterSeconds * 1000);
    expect(res.json.items.map((i: { id: string; status: string }) => [i.id, i.status])).toEqual([
      [theirs.id, 'not_found'],
      [mine.id, 'running'],
      [odd, 'not_found'],
      [ghost, 'not_found'],
    ]);
    expect((await http(kiln.baseUrl, KEY_B)(`/v1/tasks/${mine.id}`)).status).toBe(404);
    expect((await http(kiln.baseUrl, KEY_B)(`/v1/tasks/${theirs.id}`)).json.status).toBe('running');
  });

  it('forgets an expired record: poll, batch and list no longer show it', async () => {
    const api = http(kiln.baseUrl);
    // Finished one retention period ago, less a second: its record and any in-memory copy of its
    // view lapse within that second.
    const r = { ...succeeded(image('accepted')), finished_at: now() - kiln.config.retentionSeconds + 1 };
    await kiln.api.store.transition(r);
    expect((await api(`/v1/tasks/${r.id}`)).status).toBe(200);
    // What the retention TTL does when it runs out.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    await kiln.api.redis.del(kiln.api.store.taskKey(r.id));
    await kiln.api.store.rememberMissing(owner, [r.id]); // no worker, no workflow: Temporal would not know it either
    expect((await api(`/v1/tasks/${r.id}`)).status).toBe(404);
    expect((await api('/v1/tasks/batch-get', { method: 'POST', json: { ids: [r.id] } })).json.items[0].status).toBe(
      'not_found',
    );
    expect((await api('/v1/tasks?limit=100')).json.items.some((i: { id: string }) => i.id === r.id)).toBe(false);
  });

  it("answers a finished task's repeat poll from memory, never an unfinished one's; only its owner's", async () => {
    const api = http(kiln.baseUrl);
    const { redis, store } = kiln.api;
    const running = image('running');
    const done = succeeded(image('accepted'));
    for (const r of [running, done]) {
      await store.transition(r);
      expect((await api(`/v1/tasks/${r.id}`)).json.status).toBe(r.status);
      await redis.del(store.taskKey(r.id));
      await store.rememberMissing(owner, [r.id]);
    }
    // The unfinished task was read from Redis: gone with its key.
    expect((await api(`/v1/tasks/${running.id}`)).status).toBe(404);
    // The finished one never changes, so its view is kept: no Redis read needed (the key is gone).
    const again = await api(`/v1/tasks/${done.id}`);
    expect(again.status).toBe(200);
    expect(again.json).toEqual(JSON.parse(JSON.stringify(taskView(done))));
    const batch = await api('/v1/tasks/batch-get', { method: 'POST', json: { ids: [done.id, running.id] } });
    expect(batch.json.items.map((i: { status: string }) => i.status)).toEqual(['succeeded', 'not_found']);
    // Another owner, and the video route, still get not_found.
    expect((await http(kiln.baseUrl, KEY_B)(`/v1/tasks/${done.id}`)).status).toBe(404);
    expect((await api(`/v1/videos/${done.id}`)).status).toBe(404);
  });

  it('still reads records written before views were stored (until they are rewritten or expire)', async () => {
    const api = http(kiln.baseUrl);
    const r = succeeded(image('accepted'));
    const v: VideoTaskRecord = {
      id: `video_${randomBytes(16).toString('hex')}`,
      kind: 'video',
      owner,
      model: 'kiln-video-1',
      status: 'running',
      progress: 40,
      prompt: 'p',
      seconds: '4',
      size: '720x1280',
      created_at: now(),
      completed_at: null,
      error: null,
    };
    const { redis, store } = kiln.api;
    // The shape the previous release wrote: the record, its status and rank, and the index entry.
    for (const rec of [r, v])
      await redis.hset(
        store.taskKey(rec.id),
        'j',
        JSON.stringify(rec),
        's',
        rec.status,
        'r',
        rec.status === 'running' ? 2 : 3,
      );
    await redis.zadd(store.ownerKey(owner), 0, `${String(r.created_at).padStart(10, '0')}:${r.id}`);
    expect((await api(`/v1/tasks/${r.id}`)).json).toEqual(JSON.parse(JSON.stringify(taskView(r))));
    expect((await api(`/v1/videos/${v.id}`)).json).toEqual(JSON.parse(JSON.stringify(videoView(v))));
    expect((await api('/v1/tasks?limit=100')).json.items.find((i: { id: string }) => i.id === r.id)?.status).toBe(
      'succeeded',
    );
    expect((await http(kiln.baseUrl, KEY_B)(`/v1/tasks/${r.id}`)).status).toBe(404);
    expect((await api(`/v1/tasks/${v.id}`)).status).toBe(404);
    expect((await api(`/v1/tasks/${r.id}/content`)).status).toBe(302);
  });
});
