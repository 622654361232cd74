// Kiln on a Redis Cluster (REDIS_CLUSTER_NODES): its own 3 primaries + 3 replicas, started here.
// The read model keeps its guarantees across slots (first terminal write wins, never backwards,
// owner isolation, exact pages across ties, expiry, the limiter), a transition whose later steps
// failed converges when it runs again, the Temporal fallback repairs a lost record, and a primary
// killed mid-run is failed over without losing a transition.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePorts, waitUntil } from '../../../scripts/production/proc.js';
import { startRedisCluster, type RedisCluster } from '../../../scripts/production/redis-cluster.js';
import { ownerOfKey } from '../../../src/infra/callers.js';
import { keySlot } from '../../../src/tasks/store/cluster-slots.js';
import { createTaskStore } from '../../../src/tasks/store/create.js';
import { indexMember, type TaskStore } from '../../../src/tasks/store/task-store.js';
import type { ImageTaskRecord } from '../../../src/shared/image-task.js';
import type { VideoTaskRecord } from '../../../src/shared/video-task.js';
import { eventually, http, imageSteps, KEY_A, KEY_B, startKiln, submitBody, type Kiln } from '../../support/kiln.js';
import { imageRecord, succeededRecord } from '../../support/records.js';
import { bumpListVersion } from '../../support/list-version.js';

let cluster: RedisCluster;
let kiln: Kiln;
let redis: Cluster;
let store: TaskStore;
/** The owner's newest list items, as the store joins them for a page. */
const listItems = async (owner: string, limit: number) =>
  JSON.parse(`[${await store.list(owner, '+', '-', limit)}]`) as { id: string; status: string }[];

beforeAll(async () => {
  const ports = await freePorts(12);
  cluster = await startRedisCluster({
    dir: join(inject('tmpRoot'), `redis-cluster-${randomBytes(3).toString('hex')}`),
    ports: ports.slice(0, 6),
    busPorts: ports.slice(6),
    fresh: true,
  });
  kiln = await startKiln({
    env: { REDIS_CLUSTER_NODES: cluster.nodeList },
    models: [
      { id: 'kiln-image-1', provider: 'local', latencyMs: 200, idempotent: true },
      { id: 'kiln-slow', provider: 'local', latencyMs: 4000, idempotent: true },
    ],
  });
  redis = kiln.api.redis as Cluster;
  store = kiln.api.store;
}, 180_000);
afterAll(async () => {
  await kiln?.stop();
  await cluster?.stop();
});

const now = () => Math.floor(Date.now() / 1000);
const ownerOf = (key: string) => ownerOfKey(kiln.config.ownerKey, key);
/** The primary (host:port) serving a key, as the API's client sees the cluster. */
const primaryOf = (key: string) => redis.slots[keySlot(key)][0];
const image = imageRecord;
const succeeded = succeededRecord;
const newKey = () => `test-key-${randomBytes(12).toString('hex')}`;

async function readyz() {
  const res = await fetch(`${kiln.baseUrl}/readyz`);
  return { status: res.status, body: (await res.json()) as any };
}

describe('Kiln on a Redis Cluster', () => {
  it('is ready, naming the primaries that serve the slots', async () => {
    const r = await eventually(readyz, (x) => x.status === 200, 15_000);
    expect(r.status).toBe(200);
    expect(r.body.checks.redis).toMatchObject({ ok: true, detail: '3 primaries serve all 16384 slots' });
    expect(r.body.checks.worker.ok).toBe(true);
  });

  it('runs a task: submit → poll → succeeded → batch, list and content; another owner sees nothing', async () => {
    const api = http(kiln.baseUrl, KEY_A);
    const { submit, finish } = imageSteps(() => kiln.baseUrl);
    const id = await submit('kiln-image-1');
    const done = await finish(id);
    expect(done).toMatchObject({ id, status: 'succeeded', error: null });
    const url = done.candidates[0].content.parts[0].inlineData.data;
    const batch = await api('/v1/tasks/batch-get', { method: 'POST', json: { ids: [id] } });
    expect(batch.json.items.map((i: any) => [i.id, i.status])).toEqual([[id, 'succeeded']]);
    const list = await api('/v1/tasks?limit=100');
    expect(list.json.items.find((i: any) => i.id === id)).toMatchObject({ id, status: 'succeeded' });
    const content = await api(`/v1/tasks/${id}/content`);
    expect(content.status).toBe(302);
    expect(content.headers.get('location')).toBe(url);

    const other = http(kiln.baseUrl, KEY_B);
    expect((await other(`/v1/tasks/${id}`)).status).toBe(404);
    expect((await other('/v1/tasks/batch-get', { method: 'POST', json: { ids: [id] } })).json.items[0].status).toBe(
      'not_found',
    );
    expect((await other('/v1/tasks?limit=100')).json.items.some((i: any) => i.id === id)).toBe(false);
    expect(await store.unfinishedCount()).toBe(0);
  });

  it('repairs a lost record from Temporal', async () => {
    const { api, submit, until } = imageSteps(() => kiln.baseUrl);
    const id = await submit('kiln-image-1', submitBody('lost'));
    await until(id, 'succeeded');
    // The workflow's result must be visible to Temporal before the record goes.
    await kiln.api.client.workflow.getHandle(id).result();
    expect(await redis.del(store.taskKey(id))).toBe(1);
    // The API process keeps finished views: ask as one that has not seen this task.
    kiln.api.store.finished?.clear();
    const poll = await eventually(
      () => api()(`/v1/tasks/${id}`),
      (r) => r.json?.status === 'succeeded',
    );
    expect(poll.json.status).toBe('succeeded');
    expect(
      (
        await eventually(
          () => store.get(id),
          (r) => r !== null,
        )
      )?.status,
    ).toBe('succeeded');
  });

  it('pages a list exactly across ties, with the tasks spread over all three primaries', async () => {
    const key = newKey();
    const owner = ownerOf(key);
    const t = now();
    const records = Array.from({ length: 45 }, (_, i) =>
      image(owner, (['accepted', 'running', 'succeeded'] as const)[i % 3], { created_at: t - (i % 4) }),
    );
    expect(new Set(records.map((r) => primaryOf(store.taskKey(r.id)))).size).toBe(3);
    for (const r of records) expect(await store.transition(r.status === 'succeeded' ? succeeded(r) : r)).toBe(true);
    const expected = [...records]
      .sort((a, b) => b.created_at - a.created_at || (a.id < b.id ? 1 : -1))
      .map((r) => [r.id, r.status]);
    const api = http(kiln.baseUrl, key);
    const seen: [string, string][] = [];
    let cursor = '';
    for (let pages = 0; pages < 20; pages++) {
      const page = await api(`/v1/tasks?limit=7${cursor}`);
      expect(page.status).toBe(200);
      if (page.json.items.length === 0) break;
      seen.push(...page.json.items.map((i: any) => [i.id, i.status] as [string, string]));
      const last = page.json.items.at(-1);
      cursor = `&before_created_at=${last.created_at}&before_id=${last.id}`;
    }
    expect(seen).toEqual(expected);
    // A batch of ids on all three primaries answers in request order.
    const ids = records.map((r) => r.id).reverse();
    const batch = await api('/v1/tasks/batch-get', { method: 'POST', json: { ids } });
    expect(batch.json.items.map((i: any) => i.id)).toEqual(ids);
    expect(batch.json.items.every((i: any) => i.status !== 'not_found')).toBe(true);
  });

  it(
    'moves a record only forward; the first terminal write wins; ' +
      'a transition run again after a partial failure converges',
    async () => {
      const owner = ownerOf(newKey());
      const r = image(owner, 'accepted');
      expect(await store.transition(r)).toBe(true);
      expect(await store.transition({ ...r, status: 'running' })).toBe(true);
      expect(await store.transition(succeeded(r))).toBe(true);
      expect(await store.transition({ ...r, status: 'failed', finished_at: now() })).toBe(false);
      expect(await store.transition({ ...r, status: 'running' })).toBe(false);
      const read = async () => {
        const out = await store.read([r.id], owner, 'image', null, 0);
        return out.limited ? null : out.views[0];
      };
      expect(await read()).toMatchObject({ status: 'succeeded' });
      const listed = async () => (await listItems(owner, 10)).map((i) => i.status);
      expect(await listed()).toEqual(['succeeded']);

      // As if the owner step and the gauge step of the terminal write had failed after its record step.
      await redis.hdel(store.ownerItemsKey(owner), r.id);
      await redis.zrem(store.ownerKey(owner), indexMember(r.created_at, r.id));
      await bumpListVersion(redis, store.ownerItemsKey(owner));
      const before = await store.unfinishedCount();
      expect(await store.reserve(r.id, 1e9)).toBe(true);
      expect(await store.unfinishedCount()).toBe(before + 1);
      expect(await listed()).toEqual([]);
      // The caller runs it again: the record says "already applied", the later steps complete.
      expect(await store.transition(succeeded(r))).toBe(false);
      expect(await listed()).toEqual(['succeeded']);
      expect(await store.unfinishedCount()).toBe(before);
      // A stale write run after that repairs nothing backwards.
      expect(await store.transition({ ...r, status: 'queued' })).toBe(false);
      expect(await listed()).toEqual(['succeeded']);
      expect(await read()).toMatchObject({ status: 'succeeded' });
    },
  );

  it('forgets expired records: reads and lists no longer show them', async () => {
    const owner = ownerOf(newKey());
    const gone = succeeded(image(owner, 'accepted', { created_at: now() - 1 }));
    const kept = succeeded(image(owner, 'accepted'));
    const t0 = Date.now();
    await store.transition(gone);
    await store.transition(kept);
    const t1 = Date.now();
    expect(await listItems(owner, 10)).toHaveLength(2);
    // The retention is on the record (its TTL) and on its list item (the expiry in its entry)...
    const retentionMs = kiln.config.retentionSeconds * 1000;
    const ttl = await redis.pttl(store.taskKey(gone.id));
    expect(ttl).toBeGreaterThan(retentionMs - (Date.now() - t0) - 1000);
    expect(ttl).toBeLessThanOrEqual(retentionMs);
    const entry = (await redis.hget(store.ownerItemsKey(owner), gone.id))!;
    const expiry = Number(entry.slice(2, 15));
    expect(expiry).toBeGreaterThanOrEqual(t0 + retentionMs - 1000);
    expect(expiry).toBeLessThanOrEqual(t1 + retentionMs + 1000);
    // ...and what it does when it runs out, brought forward (a real lapse is a week away).
    await redis.pexpire(store.taskKey(gone.id), 1);
    await redis.hset(
      store.ownerItemsKey(owner),
      gone.id,
      `${entry.slice(0, 2)}${String(Date.now() - 1).padStart(13, '0')}${entry.slice(15)}`,
    );
    await bumpListVersion(redis, store.ownerItemsKey(owner));
    const statuses = async () => {
      const out = await store.read([gone.id, kept.id], owner, 'image', null, 0);
      return out.limited ? null : out.views.map((v) => (typeof v === 'object' ? v.status : v));
    };
    expect(await eventually(statuses, (v) => v?.[0] === 'absent')).toEqual(['absent', 'succeeded']);
    expect((await listItems(owner, 10)).map((i) => i.id)).toEqual([kept.id]);
  });

  it('counts unfinished tasks over the gauge shards and refuses past the limit', async () => {
    const g = createTaskStore(redis, { prefix: `gauge${randomBytes(3).toString('hex')}:`, retentionSeconds: 3600 });
    const ids = Array.from({ length: 12 }, () => `task_${randomBytes(16).toString('hex')}`);
    for (const id of ids.slice(0, 10)) expect(await g.reserve(id, 10)).toBe(true);
    expect(await g.unfinishedCount()).toBe(10);
    expect(await g.reserve(ids[10], 10)).toBe(false);
    await g.release(ids[0]);
    expect(await g.reserve(ids[11], 10)).toBe(true);
    expect(await g.unfinishedCount()).toBe(10);
  });

  it('limits polls per task and per batch, with the limiter keys in the slots of the task and the owner', async () => {
    const limited = await startKiln({
      workers: false,
      env: {
        REDIS_CLUSTER_NODES: cluster.nodeList,
        REDIS_PREFIX: kiln.config.redisPrefix,
        KILN_SECRET: kiln.env.KILN_SECRET,
        RATE_LIMIT_TASK_MS: '5000',
        RATE_LIMIT_BATCH_MS: '5000',
      },
    });
    try {
      const key = newKey();
      const owner = ownerOf(key);
      // Random ids land on all three primaries only most of the time; draw until they do.
      const records = Array.from({ length: 9 }, () => image(owner, 'running'));
      const primaries = () => new Set(records.map((r) => primaryOf(store.taskKey(r.id)))).size;
      while (primaries() < 3 && records.length < 100) records.push(image(owner, 'running'));
      expect(primaries()).toBe(3);
      for (const r of records) await store.transition(r);
      const api = http(limited.baseUrl, key);
      expect((await api(`/v1/tasks/${records[0].id}`)).status).toBe(200);
      const again = await api(`/v1/tasks/${records[0].id}`);
      expect(again.status).toBe(429);
      expect(Number(again.headers.get('retry-after'))).toBeGreaterThan(0);
      expect((await api(`/v1/tasks/${records[1].id}`)).status).toBe(200);
      const ids = records.map((r) => r.id);
      const first = await api('/v1/tasks/batch-get', { method: 'POST', json: { ids } });
      expect(first.json.items.map((i: any) => i.status)).toEqual(ids.map(() => 'running'));
      expect((await api('/v1/tasks/batch-get', { method: 'POST', json: { ids } })).status).toBe(429);
      expect((await api('/v1/tasks/batch-get', { method: 'POST', json: { ids: ids.slice(1) } })).status).toBe(200);
    } finally {
      await limited.stop();
    }
  });

  it(
    'survives a primary killed mid-run: /readyz names it, ' + 'polls recover after the failover, no transition is lost',
    async () => {
      const api = http(kiln.baseUrl, KEY_A);
      const owner = ownerOf(KEY_A);
      const ids: string[] = [];
      for (let i = 0; i < 9; i++) {
        const sub = await api('/v1beta/models/kiln-slow:generateContent', {
          method: 'POST',
          json: submitBody(`t${i}`),
        });
        expect(sub.status).toBe(202);
        ids.push(sub.json.id);
      }
      // Mid-run: the tasks are running when their primary goes.
      await eventually(
        async () => (await store.read(ids, owner, 'image', null, 0)) as any,
        (r) => r.views.every((v: any) => v.status === 'running'),
      );
      const victimAddr = primaryOf(store.taskKey(ids[0]));
      const victim = cluster.nodes.find((n) => n.address === victimAddr)!;
      const onVictim = ids.filter((id) => primaryOf(store.taskKey(id)) === victimAddr);
      await victim.kill();

      const down = await eventually(readyz, (r) => r.body.checks.redis.ok === false, 10_000);
      expect(down.status).toBe(503);
      expect(down.body.checks.redis.detail).toContain(`primary ${victimAddr}`);

      await waitUntil(
        'failover',
        async () => {
          const m = await cluster.masters();
          return m.length === 3 && !m.includes(victim);
        },
        { timeoutMs: 45_000, intervalMs: 250 },
      );
      await cluster.waitHealthy(30_000);
      const failedOver = Date.now();
      // Polls are answered from Redis again (not the Temporal fallback) for the failed-over slots.
      await eventually(
        async () => {
          const out = await store.read(onVictim, owner, 'image', null, 0).catch(() => null);
          return out && !out.limited && out.views.every((v) => typeof v === 'object');
        },
        (ok) => ok === true,
        15_000,
      );
      const recovered = Date.now() - failedOver;
      expect(recovered).toBeLessThan(15_000);
      expect((await api(`/v1/tasks/${onVictim[0]}`)).status).toBe(200);

      // Every record converges to its workflow's result: the record, the view and the list item.
      for (const id of ids) {
        const result = (await kiln.api.client.workflow.getHandle(id).result()) as ImageTaskRecord;
        expect(result.status).toBe('succeeded');
        const stored = await eventually(
          () => store.get(id).catch(() => null),
          (r) => r?.status === result.status,
          30_000,
        );
        expect(stored?.status).toBe(result.status);
      }
      const items = await listItems(owner, 100);
      for (const id of ids) expect(items.find((i) => i.id === id)?.status).toBe('succeeded');
      expect(await store.unfinishedCount()).toBe(0);
      const up = await eventually(readyz, (r) => r.status === 200, 15_000);
      expect(up.body.checks.redis.ok).toBe(true);
      console.log(`redis-cluster: reads recovered ${recovered} ms after the failover`);
    },
    180_000,
  );

  it('pages the videos exactly across ties and primaries, as their polls answer them, owner by owner', async () => {
    const key = newKey();
    const owner = ownerOf(key);
    const t = now();
    const videos: VideoTaskRecord[] = Array.from({ length: 20 }, (_, i) => ({
      id: `video_${randomBytes(16).toString('hex')}`,
      kind: 'video',
      owner,
      model: 'kiln-video-1',
      status: 'running',
      progress: i,
      prompt: `boat ${i}`,
      seconds: '4',
      size: '320x180',
      created_at: t - (i % 3),
      completed_at: null,
      error: null,
    }));
    expect(new Set(videos.map((v) => primaryOf(store.taskKey(v.id)))).size).toBe(3);
    for (const v of videos) expect(await store.transition(v)).toBe(true);
    // A later state replaces the list item too.
    expect(await store.transition({ ...videos[0], status: 'succeeded', progress: 100, completed_at: t })).toBe(true);
    const desc = [...videos].sort((a, b) => b.created_at - a.created_at || (a.id < b.id ? 1 : -1)).map((v) => v.id);
    const api = http(kiln.baseUrl, key);
    for (const [order, expected] of [
      ['desc', desc],
      ['asc', [...desc].reverse()],
    ] as const) {
      const seen: any[] = [];
      let after = '';
      for (let pages = 0; pages < 10; pages++) {
        const page = await api(`/v1/videos?limit=6&order=${order}${after}`);
        expect(page.status, page.text).toBe(200);
        seen.push(...page.json.data);
        if (!page.json.has_more) break;
        after = `&after=${page.json.last_id}`;
      }
      expect(seen.map((v) => v.id)).toEqual(expected);
      for (const v of seen.slice(0, 3)) expect(v).toEqual((await api(`/v1/videos/${v.id}`)).json);
    }
    expect((await api('/v1/videos?limit=100')).json.data.find((v: any) => v.id === videos[0].id)).toMatchObject({
      status: 'completed',
      progress: 100,
    });
    // Another owner: none of them, and none of them as a cursor.
    const other = http(kiln.baseUrl, KEY_B);
    const theirs = (await other('/v1/videos?limit=100')).json.data.map((v: any) => v.id);
    expect(theirs.filter((id: string) => desc.includes(id))).toEqual([]);
    expect((await other(`/v1/videos?after=${videos[0].id}`)).status).toBe(400);
  });
});
