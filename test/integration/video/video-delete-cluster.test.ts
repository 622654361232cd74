// DELETE /v1/videos/{id} on a Redis Cluster (3 primaries + 3 replicas, started here) with two API
// processes on it: the second keeps finished videos' views in memory (src/tasks/store/finished-views.ts)
// and hears of the deletion on the deletion feed (src/tasks/deletion-feed.ts). A deleted video is 404
// to a poll on both within a second, gone from both lists, and a late terminal write of it through
// the cluster store (its record step, then its owner step in another slot) does not list it again,
// even when the delete lands between the two steps.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePorts } from '../../../scripts/production/proc.js';
import { startRedisCluster, type RedisCluster } from '../../../scripts/production/redis-cluster.js';
import { ownerOfKey } from '../../../src/infra/callers.js';
import { createTaskStore } from '../../../src/tasks/store/create.js';
import { keySlot } from '../../../src/tasks/store/cluster-slots.js';
import type { TaskStore } from '../../../src/tasks/store/task-store.js';
import type { AnyTaskRecord } from '../../../src/shared/records.js';
import { eventually, KEY_A, startKiln, type Kiln } from '../../support/kiln.js';
import { videoApi } from './video-kiln.js';

const MODELS = [
  {
    id: 'v-local',
    kind: 'video',
    provider: 'local',
    latencyMs: 300,
    idempotent: true,
    seconds: ['2'],
    sizes: ['320x180'],
    pollIntervalMs: 100,
    heartbeatTimeoutMs: 1000,
    // The local renderer (jimp frames, then ffmpeg) takes seconds on a loaded 2-core machine.
    timeoutMs: 30_000,
  },
];
const BODY = { model: 'v-local', prompt: 'a kiln at dusk', seconds: '2', size: '320x180' };

let cluster: RedisCluster;
/** The API process that deletes (with the workers), and a second API process on the same cluster. */
let a: Kiln;
let b: Kiln;
let callsA: ReturnType<typeof videoApi>;
let callsB: ReturnType<typeof videoApi>;
let owner: string;
/** A connection of the test's own, as a worker's store would have. */
let late: Cluster;

beforeAll(async () => {
  const ports = await freePorts(12);
  cluster = await startRedisCluster({
    dir: join(inject('tmpRoot'), `redis-cluster-delete-${randomBytes(3).toString('hex')}`),
    ports: ports.slice(0, 6),
    busPorts: ports.slice(6),
    fresh: true,
  });
  a = await startKiln({ env: { REDIS_CLUSTER_NODES: cluster.nodeList }, models: MODELS });
  b = await startKiln({
    workers: false,
    env: {
      REDIS_CLUSTER_NODES: cluster.nodeList,
      REDIS_PREFIX: a.config.redisPrefix,
      KILN_SECRET: a.env.KILN_SECRET,
      TEMPORAL_TASK_QUEUE: a.env.TEMPORAL_TASK_QUEUE,
    },
    models: MODELS,
  });
  callsA = videoApi(a);
  callsB = videoApi(b);
  owner = ownerOfKey(a.config.ownerKey, KEY_A);
  expect(ownerOfKey(b.config.ownerKey, KEY_A)).toBe(owner);
  late = connect();
}, 180_000);
afterAll(async () => {
  late?.disconnect();
  await b?.stop();
  await a?.stop();
  await cluster?.stop();
});

/** A cluster connection of the test's own. */
const connect = () =>
  new Cluster(cluster.nodeList.split(',').map((n) => ({ host: n.split(':')[0], port: Number(n.split(':')[1]) })));

/** The process's in-memory view of the video, if it keeps one. */
const cached = (k: Kiln, id: string) => k.api.store.finished?.get(id, owner, 'video');
const listed = async (calls: ReturnType<typeof videoApi>) =>
  (await calls.api()('/v1/videos?limit=100')).json.data.map((v: any) => v.id) as string[];

/** A finished video, polled (and so kept in memory) by both API processes, and listed by both. */
async function finishedEverywhere(): Promise<{ id: string; record: AnyTaskRecord }> {
  const id = await callsA.createOk(BODY);
  const v = await callsA.finish(id);
  expect(v.status, JSON.stringify(v)).toBe('completed');
  for (const [k, calls] of [
    [a, callsA],
    [b, callsB],
  ] as const) {
    // The first poll from Redis keeps the view; the deletion feed must be live for that (it is at start).
    const view = await eventually(
      async () => ((await calls.api()(`/v1/videos/${id}`)).json?.status === 'completed' ? cached(k, id) : undefined),
      (c) => typeof c === 'object',
    );
    expect(view, 'kept in memory').toMatchObject({ status: 'succeeded' });
    expect(await listed(calls)).toContain(id);
  }
  const record = (await a.api.store.get(id)) as AnyTaskRecord | null;
  expect(record?.status).toBe('succeeded');
  return { id, record: record! };
}

/** The video's traces in the cluster: its record, its index member and its list item. */
async function inRedis(store: TaskStore, id: string) {
  const redis = a.api.redis as Cluster;
  // Strings: ioredis 6.0.0 types zrange's stop argument as string only.
  const members = await redis.zrange(store.ownerKey(owner, 'video'), '0', '-1');
  return {
    record: await redis.hget(store.taskKey(id), 'j'),
    tombstone: await redis.hget(store.taskKey(id), 'x'),
    member: members.some((m) => m.endsWith(`:${id}`)),
    item: await redis.hexists(store.ownerItemsKey(owner, 'video'), id),
  };
}

async function expectGone(id: string): Promise<void> {
  for (const calls of [callsA, callsB]) {
    const poll = await calls.api()(`/v1/videos/${id}`);
    expect(poll.status, poll.text).toBe(404);
    expect(poll.json.error.code).toBe('not_found');
    expect((await calls.api()(`/v1/videos/${id}/content`)).status).toBe(404);
    expect(await listed(calls)).not.toContain(id);
  }
  expect(cached(a, id)).toBeUndefined();
  expect(cached(b, id)).toBeUndefined();
  expect(await inRedis(a.api.store, id)).toEqual({ record: null, tombstone: owner, member: false, item: 0 });
}

describe('DELETE /v1/videos/{id} on a Redis Cluster', () => {
  it('is 404 within a second to a poll on both API processes (the second had it in memory), and unlisted', async () => {
    const { id } = await finishedEverywhere();
    const del = await callsA.api()(`/v1/videos/${id}`, { method: 'DELETE' });
    expect(del.status, del.text).toBe(200);
    const deletedAt = Date.now();
    // The second process answers from memory until the deletion feed reaches it.
    const poll = await eventually(
      () => callsB.api()(`/v1/videos/${id}`),
      (r) => r.status === 404,
      1000,
    );
    const after = Date.now() - deletedAt;
    expect(poll.status, `still ${poll.status} ${after} ms after the delete`).toBe(404);
    expect(after).toBeLessThan(1000);
    await expectGone(id);
    // Deleting again, through either process: 404.
    for (const calls of [callsA, callsB]) {
      const twice = await calls.api()(`/v1/videos/${id}`, { method: 'DELETE' });
      expect(twice.status, twice.text).toBe(404);
    }
  });

  it('stays deleted after a late terminal write of its old record through the cluster store', async () => {
    const { id, record } = await finishedEverywhere();
    expect((await callsA.api()(`/v1/videos/${id}`, { method: 'DELETE' })).status).toBe(200);
    await eventually(
      async () => cached(b, id),
      (c) => c === undefined,
      1000,
    );
    // A worker's late write, a rebuild's restore and a write through the second process's store: all refused.
    const worker = createTaskStore(late, { prefix: a.config.redisPrefix, retentionSeconds: a.config.retentionSeconds });
    expect(await worker.transition(record)).toBe(false);
    expect(await worker.restore(record)).toBe(false);
    expect(await b.api.store.transition(record)).toBe(false);
    expect(await a.api.store.transition({ ...record, status: 'failed' } as AnyTaskRecord)).toBe(false);
    await expectGone(id);
  });

  it('a late write that finds the tombstone takes out a list entry that an earlier, failed write put back', async () => {
    const { id, record } = await finishedEverywhere();
    const store = a.api.store;
    const redis = a.api.redis as Cluster;
    const index = store.ownerKey(owner, 'video');
    const items = store.ownerItemsKey(owner, 'video');
    const member = (await redis.zrange(index, '0', '-1')).find((m) => m.endsWith(`:${id}`))!;
    const entry = (await redis.hget(items, id))!;
    expect((await callsA.api()(`/v1/videos/${id}`, { method: 'DELETE' })).status).toBe(200);
    // The second process hears of the delete within a second (the first test): waited for here.
    await eventually(
      async () => cached(b, id),
      (c) => c === undefined,
      1000,
    );
    // What a late write leaves when its owner step ran after the delete's UNLIST and it then failed
    // (its caller runs it again).
    await redis.zadd(index, 0, member);
    await redis.hset(items, id, entry);
    expect(await listed(callsA)).toContain(id);
    const worker = createTaskStore(late, { prefix: a.config.redisPrefix, retentionSeconds: a.config.retentionSeconds });
    expect(await worker.transition(record)).toBe(false);
    await expectGone(id);
  });

  it('stays unlisted when the delete lands between the record step and the owner step of a late write', async () => {
    const { id, record } = await finishedEverywhere();
    const store = a.api.store;
    // The task hash and the owner's keys are in different slots: the write is two steps.
    expect(keySlot(store.taskKey(id))).not.toBe(keySlot(store.ownerKey(owner, 'video')));
    let deleted: number | null = null;
    const conn = connect();
    try {
      pauseBefore(conn, 'kilnOwnerStep', async () => {
        // The late write's record step has run (and found the finished record): the delete comes now.
        deleted = (await callsA.api()(`/v1/videos/${id}`, { method: 'DELETE' })).status;
      });
      const worker = createTaskStore(conn, {
        prefix: a.config.redisPrefix,
        retentionSeconds: a.config.retentionSeconds,
      });
      expect(await worker.transition(record)).toBe(false);
    } finally {
      conn.disconnect();
    }
    expect(deleted).toBe(200);
    await eventually(
      async () => cached(b, id),
      (c) => c === undefined,
      1000,
    );
    await expectGone(id);
  });
});

/**
 * The next pipeline of `cluster` that runs the script `name` first awaits `before` (once): a pause
 * between the steps of a cluster transition, which sends each step as a pipeline of its own.
 */
function pauseBefore(cluster: Cluster, name: string, before: () => Promise<void>): void {
  let pending: (() => Promise<void>) | null = before;
  const pipeline = cluster.pipeline.bind(cluster);
  cluster.pipeline = ((...args: Parameters<Cluster['pipeline']>) => {
    const p = pipeline(...args) as any;
    const script = p[name];
    let runs = false;
    p[name] = (...a: unknown[]) => {
      runs = true;
      return script.apply(p, a);
    };
    const exec = p.exec.bind(p);
    p.exec = async (...a: unknown[]) => {
      if (runs && pending) {
        const hook = pending;
        pending = null;
        await hook();
      }
      return exec(...a);
    };
    return p;
  }) as Cluster['pipeline'];
}
