// The lean read path answers with views stored beside each record. These tests pin that it stays
// exact: a transition is visible to the very next poll, batch and list; another owner still gets
// not_found; an expired record is gone; records an older release wrote, with no stored view, still
// read. On a single Redis, lists read the items kept beside the owner index (as on a cluster), and
// still list an older release's records that have no such item.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ownerOfKey } from '../../../src/infra/callers.js';
import { indexMember } from '../../../src/tasks/store/task-store.js';
import { STATUS_RANK } from '../../../src/shared/task.js';
import type { ImageTaskRecord } from '../../../src/shared/image-task.js';
import type { AnyTaskRecord } from '../../../src/shared/records.js';
import { storedViews, taskView, videoView } from '../../../src/shared/views.js';
import { http, KEY_A, KEY_B, startKiln, type Kiln } from '../../support/kiln.js';
import { imageRecord, nowSeconds, succeededRecord, videoRecord } from '../../support/records.js';
import { bumpListVersion } from '../../support/list-version.js';
import { LIST_VERSION_FIELD } from '../../../src/tasks/store/list-pages.js';

let kiln: Kiln;
let owner: string;
beforeAll(async () => {
  kiln = await startKiln({ workers: false });
  owner = ownerOfKey(kiln.config.ownerKey, KEY_A);
});
afterAll(async () => {
  await kiln?.stop();
});

const image = (status: ImageTaskRecord['status'], over: Partial<ImageTaskRecord> = {}) =>
  imageRecord(owner, status, over);
const succeeded = succeededRecord;
type Kind = AnyTaskRecord['kind'];

/** An owner's list item entry, "<rank>:<expiry ms, 13 digits>:<item>", taken apart. */
function entryOf(v: string | null) {
  expect(v).toMatch(/^\d:\d{13}:/);
  return { rank: Number(v!.slice(0, 1)), expiresAt: Number(v!.slice(2, 15)), item: v!.slice(16) };
}

/** What the end of a record's retention does to its list item: its expiry is past. */
async function expireItem(o: string, kind: Kind, id: string) {
  const key = kiln.api.store.ownerItemsKey(o, kind);
  const v = await kiln.api.redis.hget(key, id);
  expect(v).not.toBeNull();
  await kiln.api.redis.hset(key, id, `${v!.slice(0, 2)}${String(Date.now() - 1).padStart(13, '0')}${v!.slice(15)}`);
  // A real expiry needs no bump: a kept page ends at its first entry's expiry (list-pages.ts).
  await bumpListVersion(kiln.api.redis, key);
}

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
          channel: next.channel ?? null,
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
    const r = succeeded(image('accepted'));
    await kiln.api.store.transition(r);
    expect((await api(`/v1/tasks/${r.id}`)).status).toBe(200);
    // What the end of its retention does: the record's TTL runs out, its list item's expiry passes,
    // and this process's copy of its view lapses with it (test/unit/tasks/finished-views.test.ts).
    await kiln.api.redis.del(kiln.api.store.taskKey(r.id));
    await expireItem(owner, 'image', r.id);
    kiln.api.store.finished?.clear();
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
    const v = videoRecord(owner, { prompt: 'p' });
    const { redis, store } = kiln.api;
    // The shape an older release wrote: the record, its status and rank, and the index entry.
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
    await bumpListVersion(redis, store.ownerItemsKey(owner));
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

describe("the owner's list items on a single Redis", () => {
  const newOwner = () => `owner_${randomBytes(8).toString('hex')}`;
  /** The owner's image list, newest first, as the API sends it. */
  const listed = async (o: string) =>
    JSON.parse(`[${(await kiln.api.store.list(o, '+', '-', 100)).toString()}]`) as { id: string }[];
  /** Every video page of the owner, 2 at a time, following the cursor. */
  async function paged(o: string, order: 'asc' | 'desc') {
    const ids: string[] = [];
    const items: unknown[] = [];
    let after: string | undefined;
    for (let n = 0; n < 10; n++) {
      const page = await kiln.api.store.page(o, 'video', { limit: 2, after, order });
      if (page === 'unknown_cursor') throw new Error(`unknown cursor ${after}`);
      ids.push(...page.ids);
      items.push(...page.items.map((i) => JSON.parse(i)));
      if (!page.hasMore) break;
      after = page.ids.at(-1);
    }
    return { ids, items };
  }
  const itemOf = (r: AnyTaskRecord) => JSON.parse(storedViews(r).item);

  it("keeps a task's current item beside the index: each status change replaces it, a stale write does not", async () => {
    const { redis, store } = kiln.api;
    const o = newOwner();
    const r = image('accepted', { owner: o });
    const ttlMs = kiln.config.retentionSeconds * 1000;
    let stored: string | null = null;
    for (const next of [r, { ...r, status: 'running' as const }, succeeded(r)]) {
      const before = Date.now();
      expect(await store.transition(next)).toBe(true);
      const after = Date.now();
      stored = await redis.hget(store.ownerItemsKey(o), r.id);
      const entry = entryOf(stored);
      expect(entry.rank).toBe(STATUS_RANK[next.status]);
      expect(entry.item).toBe(storedViews(next).item);
      expect(entry.expiresAt).toBeGreaterThanOrEqual(before + ttlMs - 1);
      expect(entry.expiresAt).toBeLessThanOrEqual(after + ttlMs + 1);
      // The task hash keeps no second copy of the item.
      expect(await redis.hexists(store.taskKey(r.id), 'l')).toBe(0);
    }
    expect(await store.transition({ ...r, status: 'running' })).toBe(false);
    expect(await store.transition({ ...succeeded(r), status: 'failed' })).toBe(false);
    expect(await redis.hget(store.ownerItemsKey(o), r.id)).toBe(stored);
    expect(await redis.ttl(store.ownerItemsKey(o))).toBeGreaterThan(0);
    // A video's item is its view; a progress update (same status) replaces it too.
    const v = videoRecord(o);
    expect(await store.transition(v)).toBe(true);
    expect(await store.transition({ ...v, progress: 70 })).toBe(true);
    const entry = entryOf(await redis.hget(store.ownerItemsKey(o, 'video'), v.id));
    expect(entry.item).toBe(JSON.stringify(videoView({ ...v, progress: 70 })));
    expect((await paged(o, 'desc')).items).toEqual([itemOf({ ...v, progress: 70 })]);
  });

  it('lists and pages, in order, records written before their items were kept beside the index', async () => {
    const { redis, store } = kiln.api;
    const o = newOwner();
    const t = nowSeconds();
    const images = [0, 1, 2, 3].map((i) => succeeded(image('accepted', { owner: o, created_at: t - i })));
    for (const r of images) await store.transition(r);
    // [1] as an older release wrote it: its item in the task hash only.
    await redis.hdel(store.ownerItemsKey(o), images[1].id);
    await redis.hset(store.taskKey(images[1].id), 'l', storedViews(images[1]).item);
    expect(await listed(o)).toEqual(images.map(itemOf));
    // [3] as the oldest releases wrote it: the record only, no list item stored at all.
    await redis.hdel(store.ownerItemsKey(o), images[3].id);
    expect(await listed(o)).toEqual(images.map(itemOf));

    const videos = [0, 1, 2, 3].map((i) => videoRecord(o, { created_at: t - i }));
    for (const v of videos) await store.transition(v);
    // [1] has its view in the task hash, [2] only its record.
    await redis.hdel(store.ownerItemsKey(o, 'video'), videos[1].id, videos[2].id);
    await redis.hdel(store.taskKey(videos[2].id), 'v');
    expect(await paged(o, 'desc')).toEqual({ ids: videos.map((v) => v.id), items: videos.map(itemOf) });
    expect(await paged(o, 'asc')).toEqual({
      ids: videos.map((v) => v.id).reverse(),
      items: videos.map(itemOf).reverse(),
    });
  });

  it('leaves out the items of records past their expiry', async () => {
    const { store } = kiln.api;
    const o = newOwner();
    const t = nowSeconds();
    const [gone, kept] = [
      image('running', { owner: o, created_at: t }),
      image('running', { owner: o, created_at: t - 1 }),
    ];
    const [goneVideo, keptVideo] = [videoRecord(o, { created_at: t }), videoRecord(o, { created_at: t - 1 })];
    for (const r of [gone, kept, goneVideo, keptVideo]) await store.transition(r);
    expect((await listed(o)).map((i) => i.id)).toEqual([gone.id, kept.id]);
    expect((await paged(o, 'desc')).ids).toEqual([goneVideo.id, keptVideo.id]);
    await expireItem(o, 'image', gone.id);
    await expireItem(o, 'video', goneVideo.id);
    expect((await listed(o)).map((i) => i.id)).toEqual([kept.id]);
    expect((await paged(o, 'desc')).ids).toEqual([keptVideo.id]);
  });

  it('trims index members from before the list window together with their items', async () => {
    const { redis, store } = kiln.api;
    const o = newOwner();
    const old = image('running', { owner: o, created_at: nowSeconds() - 3 * 86400 - 60 });
    // As a write from when it was inside the window left it.
    await redis.zadd(store.ownerKey(o), 0, indexMember(old.created_at, old.id));
    const expiry = String(Date.now() + 60_000).padStart(13, '0');
    await redis.hset(store.ownerItemsKey(o), old.id, `2:${expiry}:${storedViews(old).item}`);
    const r = image('accepted', { owner: o });
    expect(await store.transition(r)).toBe(true);
    expect(await redis.zrange(store.ownerKey(o), '0', '-1')).toEqual([indexMember(r.created_at, r.id)]);
    expect((await redis.hkeys(store.ownerItemsKey(o))).sort()).toEqual([LIST_VERSION_FIELD, r.id].sort());
  });
});
