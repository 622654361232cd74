// An API process keeps the list page it made while the owner's list version is unchanged
// (src/tasks/store/list-pages.ts): a repeated page costs one HGET, and every write through the
// store, from this process or another, is in the very next page. Real Redis (the shared test
// server); the second store stands for another API process.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTaskStore } from '../../../src/tasks/store/create.js';
import { LIST_VERSION_FIELD } from '../../../src/tasks/store/list-pages.js';
import type { TaskStore } from '../../../src/tasks/store/task-store.js';
import type { ImageTaskRecord } from '../../../src/shared/image-task.js';
import { storedViews } from '../../../src/shared/views.js';
import { bumpListVersion } from '../../support/list-version.js';
import { startKiln, type Kiln } from '../../support/kiln.js';
import { imageRecord, nowSeconds, succeededRecord } from '../../support/records.js';

let kiln: Kiln;
let other: TaskStore;
beforeAll(async () => {
  kiln = await startKiln({ workers: false });
  other = createTaskStore(kiln.api.redis, { prefix: kiln.config.redisPrefix, retentionSeconds: 3600 });
});
afterAll(async () => {
  await kiln?.stop();
});

const newOwner = () => `owner_${randomBytes(8).toString('hex')}`;
type Item = { id: string; status: string };
const listed = async (o: string, store: TaskStore = kiln.api.store) =>
  JSON.parse(`[${(await store.list(o, '+', '-', 100)).toString()}]`) as Item[];
const statuses = async (o: string, store?: TaskStore) => (await listed(o, store)).map((i) => i.status);

describe('kept list pages', () => {
  it('answer a repeated page from the process while the list version is unchanged', async () => {
    const { redis, store } = kiln.api;
    const o = newOwner();
    const r = imageRecord(o, 'queued');
    await store.transition(r);
    expect(await statuses(o)).toEqual(['queued']);
    // Changed behind the store's back (no version bump): the kept page is what answers.
    const items = store.ownerItemsKey(o);
    const entry = (await redis.hget(items, r.id))!;
    await redis.hset(items, r.id, entry.slice(0, 16) + storedViews({ ...r, status: 'running' }).item);
    expect(await statuses(o)).toEqual(['queued']);
    expect(await statuses(o, other)).toEqual(['running']);
    await bumpListVersion(redis, items);
    expect(await statuses(o)).toEqual(['running']);
  });

  it("show every write through any process's store in the next page", async () => {
    const o = newOwner();
    const t = nowSeconds();
    const [a, b] = [imageRecord(o, 'queued', { created_at: t - 1 }), imageRecord(o, 'queued', { created_at: t })];
    const writes: [TaskStore, ImageTaskRecord, string[]][] = [
      [kiln.api.store, a, ['queued']],
      [other, b, ['queued', 'queued']],
      [other, { ...a, status: 'running' }, ['queued', 'running']],
      [kiln.api.store, { ...b, status: 'running' }, ['running', 'running']],
      [other, succeededRecord(b), ['succeeded', 'running']],
      [kiln.api.store, succeededRecord(a), ['succeeded', 'succeeded']],
    ];
    const version = () => kiln.api.redis.hget(kiln.api.store.ownerItemsKey(o), LIST_VERSION_FIELD);
    for (const [writer, record, expected] of writes) {
      // Both processes hold a page from before the write, and the write moves the version on.
      await statuses(o);
      await statuses(o, other);
      const before = await version();
      expect(await writer.transition(record)).toBe(true);
      expect(await version()).not.toBe(before);
      expect(await version()).not.toBeNull();
      expect(await statuses(o)).toEqual(expected);
      expect(await statuses(o, other)).toEqual(expected);
    }
    // A requeue (running back to queued) is a write too, and so is a restore from Temporal.
    const c = imageRecord(o, 'running', { created_at: t + 1 });
    await other.transition(c);
    expect(await statuses(o)).toEqual(['running', 'succeeded', 'succeeded']);
    const d = imageRecord(o, 'queued', { created_at: t + 2 });
    expect(await other.restore(d)).toBe(true);
    expect(await statuses(o)).toEqual(['queued', 'running', 'succeeded', 'succeeded']);
    expect(await other.requeue(c.id)).toBe(true);
    expect(await statuses(o)).toEqual(['queued', 'queued', 'succeeded', 'succeeded']);
  });

  it('keep no page of items with no version (an older release wrote them)', async () => {
    const { redis, store } = kiln.api;
    const o = newOwner();
    const r = imageRecord(o, 'queued');
    await store.transition(r);
    const items = store.ownerItemsKey(o);
    await redis.hdel(items, LIST_VERSION_FIELD);
    expect(await statuses(o)).toEqual(['queued']);
    const entry = (await redis.hget(items, r.id))!;
    await redis.hset(items, r.id, entry.slice(0, 16) + storedViews({ ...r, status: 'running' }).item);
    expect(await statuses(o)).toEqual(['running']);
  });

  it('start a new version at the clock, so a list that expired and came back repeats none', async () => {
    const { redis, store } = kiln.api;
    const o = newOwner();
    const before = BigInt(Date.now()) * 1000n;
    await store.transition(imageRecord(o, 'queued'));
    const first = BigInt((await redis.hget(store.ownerItemsKey(o), LIST_VERSION_FIELD))!);
    expect(first).toBeGreaterThanOrEqual(before - 2_000_000n);
    await store.transition(imageRecord(o, 'queued'));
    expect(BigInt((await redis.hget(store.ownerItemsKey(o), LIST_VERSION_FIELD))!)).toBe(first + 1n);
  });
});
