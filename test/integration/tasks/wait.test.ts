// Wait (long-poll) on polls and batches, against real Redis pub/sub and a real Kiln: records are
// written straight into the read model (as the workers would), so each transition happens at a
// moment the test chooses.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Redis } from 'ioredis';
import { ownerOfKey } from '../../../src/infra/callers.js';
import type { ImageTaskRecord } from '../../../src/shared/image-task.js';
import type { VideoTaskRecord } from '../../../src/shared/video-task.js';
import { Kiln as KilnClient } from '../../../src/client/index.js';
import { KEY_A, KEY_B, eventually, http, startKiln, type Kiln } from '../../support/kiln.js';
import { imageRecord, succeededRecord } from '../../support/records.js';
import { longPoll } from '../../../src/tasks/long-poll.js';
import { WaitRegistry } from '../../../src/tasks/waits.js';
import type { ViewText } from '../../../src/tasks/poll.js';
import { slowProxy } from '../../support/slow-proxy.js';
import { startRedisCluster } from '../../../scripts/production/redis-cluster.js';
import { freePorts } from '../../../scripts/production/proc.js';

let kiln: Kiln;
let owner: string;
let api: ReturnType<typeof http>;

beforeAll(async () => {
  kiln = await startKiln({
    models: [
      { id: 'kiln-image-1', provider: 'local', latencyMs: 800, idempotent: true },
      { id: 'kiln-video-1', kind: 'video', provider: 'local', latencyMs: 500, pollIntervalMs: 100 },
    ],
  });
  owner = ownerOfKey(kiln.config.ownerKey, KEY_A);
  api = http(kiln.baseUrl, KEY_A);
});
afterAll(async () => {
  await kiln?.stop();
});

/**
 * How soon an answer woken by its event (or by a drain, or a down subscriber) must come. Far below
 * every wait asked for here (30 s or more), so it tells a woken wait from one that ran out, and
 * far above what a loaded machine takes: latency is measured by `npm run bench:waits`, not here.
 */
const WOKEN_MS = 5_000;

const image = (status: ImageTaskRecord['status']) => imageRecord(owner, status);
const write = (r: ImageTaskRecord | VideoTaskRecord, store = kiln.api.store) => store.transition(r);

/** Starts a request and reports its answer with the time it arrived. */
function timed(p: Promise<{ status: number; json: any; headers: Headers }>) {
  return p.then((r) => ({ ...r, at: performance.now() }));
}

async function waiting(k: Kiln = kiln): Promise<number> {
  const text = await (await fetch(`${k.baseUrl}/metrics`)).text();
  return Number(/^kiln_wait_requests (\d+)/m.exec(text)?.[1] ?? NaN);
}
const untilWaiting = (n: number, k: Kiln = kiln) =>
  eventually(
    () => waiting(k),
    (v) => v === n,
  );

/** Holds a wait (GET `path`, owner A), makes `change` once it waits; its answer, `after` the change (ms). */
async function wokenBy(k: Kiln, path: string, change: () => Promise<unknown>) {
  const held = timed(http(k.baseUrl, KEY_A)(path));
  expect(await untilWaiting(1, k)).toBe(1);
  const changed = performance.now();
  await change();
  const a = await held;
  return { ...a, after: a.at - changed };
}

describe('wait on GET /v1/tasks/{id}', () => {
  it('answers on a status change, not at its timeout, reading the new view, with Preference-Applied', async () => {
    const r = image('accepted');
    await write(r);
    const answer = timed(api(`/v1/tasks/${r.id}?wait=30`));
    expect(await untilWaiting(1)).toBe(1);
    const changed = performance.now();
    await write({ ...r, status: 'running' });
    const a = await answer;
    expect(a.status).toBe(200);
    expect(a.json.status).toBe('running');
    expect(a.headers.get('preference-applied')).toBe('wait=30');
    expect(a.at - changed).toBeLessThan(WOKEN_MS);
    expect(await untilWaiting(0)).toBe(0);
  });

  it('answers after N seconds with the current state when nothing changes (Prefer: wait=1)', async () => {
    const r = image('queued');
    await write(r);
    const t0 = performance.now();
    const a = await api(`/v1/tasks/${r.id}`, { headers: { prefer: 'respond-async, wait=1' } });
    const took = performance.now() - t0;
    expect(a.json.status).toBe('queued');
    expect(a.headers.get('preference-applied')).toBe('wait=1');
    expect(a.headers.get('retry-after')).not.toBeNull();
    expect(took).toBeGreaterThanOrEqual(990);
    expect(took).toBeLessThan(1000 + WOKEN_MS);
  });

  it('answers a finished task at once, and another owner gets 404 as for a plain poll', async () => {
    const r = succeededRecord(image('running'));
    await write(r);
    const t0 = performance.now();
    const a = await api(`/v1/tasks/${r.id}?wait=60`);
    expect(a.json.status).toBe('succeeded');
    expect(a.headers.get('preference-applied')).toBe('wait=60');
    const other = await http(kiln.baseUrl, KEY_B)(`/v1/tasks/${r.id}?wait=30`);
    expect(other.status).toBe(404);
    expect(other.json.error.code).toBe('not_found');
    const unknown = await api(`/v1/tasks/task_${randomBytes(16).toString('hex')}?wait=30`);
    expect(unknown.status).toBe(404);
    expect(performance.now() - t0).toBeLessThan(WOKEN_MS);
  });

  it('refuses bad values with 400 invalid_request; 1 and 60 are accepted', async () => {
    const r = succeededRecord(image('running'));
    await write(r);
    const cases: [string, Record<string, string>, number][] = [
      ['?wait=1', {}, 200],
      ['?wait=60', {}, 200],
      ['', { prefer: 'wait=1' }, 200],
      ['', { prefer: 'wait=60' }, 200],
      ['?wait=7', { prefer: 'wait=7' }, 200],
      ['', { prefer: 'handling=lenient' }, 200],
      ['?wait=0', {}, 400],
      ['?wait=61', {}, 400],
      ['?wait=1.5', {}, 400],
      ['?wait=abc', {}, 400],
      ['?wait=', {}, 400],
      ['?wait=-1', {}, 400],
      ['?wait=1&wait=2', {}, 400],
      ['', { prefer: 'wait=0' }, 400],
      ['', { prefer: 'wait=61' }, 400],
      ['', { prefer: 'wait=abc' }, 400],
      ['?wait=5', { prefer: 'wait=6' }, 400],
    ];
    for (const [query, headers, status] of cases) {
      const a = await api(`/v1/tasks/${r.id}${query}`, { headers });
      expect({ query, headers, status: a.status }).toEqual({ query, headers, status });
      if (status === 400) {
        expect(a.json.error.code).toBe('invalid_request');
        expect(a.json.error.message).toMatch(/wait/i);
      }
    }
  });

  it('counts once against the poll limiter; a limited wait on an unfinished task is held, not refused', async () => {
    // A window no run of this test outlasts, so the plain poll below always falls inside it.
    const limited = await startKiln({ workers: false, env: { RATE_LIMIT_TASK_MS: '60000' } });
    try {
      const r = imageRecord(ownerOfKey(limited.config.ownerKey, KEY_A), 'accepted');
      await write(r, limited.api.store);
      const get = http(limited.baseUrl, KEY_A);
      const answer = get(`/v1/tasks/${r.id}?wait=10`);
      expect(await untilWaiting(1, limited)).toBe(1);
      await write({ ...r, status: 'queued' }, limited.api.store);
      const a = await answer;
      expect([a.status, a.json.status]).toEqual([200, 'queued']);
      // The wait's own first read holds the limiter: a plain poll now is refused...
      expect((await get(`/v1/tasks/${r.id}`)).status).toBe(429);
      // ...but a wait asked again at once is held (the task is unfinished) and answers the next change.
      const held = get(`/v1/tasks/${r.id}?wait=10`);
      expect(await untilWaiting(1, limited)).toBe(1);
      await write({ ...r, status: 'running' }, limited.api.store);
      const b = await held;
      expect([b.status, b.json.status]).toEqual([200, 'running']);
      // With the task finished there is nothing to wait for: the limiter's refusal stands.
      await write(succeededRecord({ ...r, status: 'running' }), limited.api.store);
      const done = await get(`/v1/tasks/${r.id}?wait=10`);
      expect(done.status).toBe(429);
      expect(Number(done.headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      await limited.stop();
    }
  });

  it('1,000 concurrent waits on one task are all released by one transition', async () => {
    const r = image('running');
    await write(r);
    const answers = Array.from({ length: 1000 }, () => timed(api(`/v1/tasks/${r.id}?wait=60`)));
    expect(
      await eventually(
        () => waiting(),
        (n) => n === 1000,
        30_000,
      ),
    ).toBe(1000);
    const changed = performance.now();
    await write(succeededRecord(r));
    const all = await Promise.all(answers);
    expect(all.every((a) => a.status === 200 && a.json.status === 'succeeded')).toBe(true);
    // Released by the change, not by their 60 s timeout; 1,000 answers take a while on a loaded machine.
    expect(Math.max(...all.map((a) => a.at)) - changed).toBeLessThan(4 * WOKEN_MS);
    expect(await untilWaiting(0)).toBe(0);
  });

  it('frees the slot of a client that disconnects at once', async () => {
    const r = image('running');
    await write(r);
    const ac = new AbortController();
    const gone = fetch(`${kiln.baseUrl}/v1/tasks/${r.id}?wait=60`, {
      headers: { authorization: `Bearer ${KEY_A}` },
      signal: ac.signal,
    }).catch(() => 'aborted');
    expect(await untilWaiting(1)).toBe(1);
    ac.abort();
    expect(await gone).toBe('aborted');
    const t0 = performance.now();
    expect(await untilWaiting(0)).toBe(0);
    expect(performance.now() - t0).toBeLessThan(WOKEN_MS);
  });
});

describe('wait in POST /v1/tasks/batch-get and on GET /v1/videos/{id}', () => {
  it('a batch wakes when any listed task changes status', async () => {
    const [a, b] = [image('queued'), image('running')];
    await write(a);
    await write(b);
    const answer = timed(api('/v1/tasks/batch-get', { method: 'POST', json: { ids: [a.id, b.id], wait: 30 } }));
    expect(await untilWaiting(1)).toBe(1);
    const changed = performance.now();
    await write(succeededRecord(b));
    const res = await answer;
    expect(res.headers.get('preference-applied')).toBe('wait=30');
    expect(res.json.items.map((i: any) => i.status)).toEqual(['queued', 'succeeded']);
    expect(res.at - changed).toBeLessThan(WOKEN_MS);
  });

  it('a batch answers at once when a listed id is finished or not found; bad waits are 400', async () => {
    const a = image('queued');
    await write(a);
    const t0 = performance.now();
    const missing = `task_${randomBytes(16).toString('hex')}`;
    const res = await api('/v1/tasks/batch-get', { method: 'POST', json: { ids: [a.id, missing], wait: 30 } });
    expect(res.json.items.map((i: any) => i.status)).toEqual(['queued', 'not_found']);
    expect(performance.now() - t0).toBeLessThan(WOKEN_MS);
    for (const wait of [0, 61, 1.5, '5', null]) {
      const bad = await api('/v1/tasks/batch-get', { method: 'POST', json: { ids: [a.id], wait } });
      expect({ wait, status: bad.status, code: bad.json.error.code }).toEqual({
        wait,
        status: 400,
        code: 'invalid_request',
      });
    }
    const disagree = await api('/v1/tasks/batch-get', {
      method: 'POST',
      json: { ids: [a.id], wait: 5 },
      headers: { prefer: 'wait=9' },
    });
    expect(disagree.status).toBe(400);
  });

  it('a video wait wakes on a change of its OpenAI status, not on accepted -> queued', async () => {
    const v: VideoTaskRecord = {
      id: `video_${randomBytes(16).toString('hex')}`,
      kind: 'video',
      owner,
      model: 'kiln-video-1',
      status: 'accepted',
      progress: 0,
      prompt: 'waves',
      seconds: '4',
      size: '720x1280',
      created_at: Math.floor(Date.now() / 1000),
      completed_at: null,
      error: null,
    };
    await write(v);
    const t0 = performance.now();
    const first = timed(api(`/v1/videos/${v.id}?wait=1`));
    expect(await untilWaiting(1)).toBe(1);
    await write({ ...v, status: 'queued' });
    const a = await first;
    expect(a.json.status).toBe('queued');
    expect(a.at - t0).toBeGreaterThanOrEqual(990);
    const second = timed(api(`/v1/videos/${v.id}`, { headers: { prefer: 'wait=30' } }));
    expect(await untilWaiting(1)).toBe(1);
    const changed = performance.now();
    await write({ ...v, status: 'running', progress: 10 });
    const b = await second;
    expect([b.json.status, b.headers.get('preference-applied')]).toEqual(['in_progress', 'wait=30']);
    expect(b.at - changed).toBeLessThan(WOKEN_MS);
    expect((await api(`/v1/videos/${v.id}?wait=0`)).status).toBe(400);
  });
});

describe('the client and the CLI use wait', () => {
  it('createAndWait returns when the task finishes, not on the contract schedule (50 s)', async () => {
    const sub = new Redis(kiln.config.redisUrl);
    const finished = new Map<string, number>();
    sub.on('message', (_c, m: string) => {
      const [id, status] = m.split(' ');
      if (status === 'succeeded') finished.set(id, performance.now());
    });
    await sub.subscribe(kiln.api.store.waitChannel);
    try {
      const client = new KilnClient({ baseURL: kiln.baseUrl, apiKey: KEY_A });
      const task = await client.tasks.createAndWait({ model: 'kiln-image-1', prompt: 'a quick fox' });
      const done = performance.now();
      expect(task.status).toBe('succeeded');
      expect(done - finished.get(task.id)!).toBeLessThan(WOKEN_MS);
    } finally {
      sub.disconnect();
    }
  });

  it('falls back to the schedule when the server does not apply the preference', async () => {
    const seen: { at: number; prefer?: string | string[] }[] = [];
    const server: Server = createServer((req, res) => {
      seen.push({ at: performance.now(), prefer: req.headers.prefer });
      const status = seen.length < 3 ? 'running' : 'succeeded';
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'task_1', object: 'image.task', status }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      // The first check is late enough that the probe at once can never be mistaken for it.
      const client = new KilnClient({ baseURL, apiKey: 'k', polling: { firstCheckMs: 6000, intervalMs: 700 } });
      const t0 = performance.now();
      const task = await client.tasks.wait('task_1');
      expect(task.status).toBe('succeeded');
      // A probe at once (asking to wait), then the contract's first check and interval.
      expect(seen.map((s) => s.prefer)).toEqual(['wait=30', 'wait=30', 'wait=30']);
      expect(seen[0].at - t0).toBeLessThan(WOKEN_MS);
      expect(seen[1].at - t0).toBeGreaterThanOrEqual(5950);
      expect(seen[2].at - seen[1].at).toBeGreaterThanOrEqual(650);
    } finally {
      server.close();
    }
  });
});

describe('degraded and stopping', () => {
  it('answers at once (without Preference-Applied) while the subscriber is down, and on shutdown', async () => {
    const k = await startKiln({ workers: false });
    try {
      const get = http(k.baseUrl, KEY_A);
      const r = imageRecord(ownerOfKey(k.config.ownerKey, KEY_A), 'running');
      await write(r, k.api.store);
      // Shutdown: the waiting request answers at once with the current state.
      const held = timed(get(`/v1/tasks/${r.id}?wait=60`));
      expect(await untilWaiting(1, k)).toBe(1);
      const stopAt = performance.now();
      k.api.drain();
      const a = await held;
      expect([a.status, a.json.status]).toEqual([200, 'running']);
      expect(a.at - stopAt).toBeLessThan(WOKEN_MS);
      const afterDrain = await get(`/v1/tasks/${r.id}?wait=60`);
      expect(afterDrain.headers.get('preference-applied')).toBeNull();
    } finally {
      await k.stop();
    }
    const d = await startKiln({ workers: false });
    try {
      const get = http(d.baseUrl, KEY_A);
      const r = imageRecord(ownerOfKey(d.config.ownerKey, KEY_A), 'running');
      await write(r, d.api.store);
      const held = timed(get(`/v1/tasks/${r.id}?wait=60`));
      expect(await untilWaiting(1, d)).toBe(1);
      const downAt = performance.now();
      const subscriber = (d.api.waits as unknown as { subscriber: Redis }).subscriber;
      subscriber.disconnect();
      const a = await held;
      expect([a.status, a.json.status]).toEqual([200, 'running']);
      expect(a.at - downAt).toBeLessThan(WOKEN_MS);
      const t0 = performance.now();
      const now = await get(`/v1/tasks/${r.id}?wait=60`);
      expect([now.status, now.headers.get('preference-applied')]).toEqual([200, null]);
      expect(performance.now() - t0).toBeLessThan(WOKEN_MS);
      // Connected (and subscribed) again: waits are honoured and woken again.
      await subscriber.connect();
      const back = await eventually(
        () => get(`/v1/tasks/${r.id}?wait=1`),
        (x) => x.headers.get('preference-applied') === 'wait=1',
      );
      expect(back.json.status).toBe('running');
      const woken = await wokenBy(d, `/v1/tasks/${r.id}?wait=30`, () => write(succeededRecord(r), d.api.store));
      expect([woken.json.status, woken.headers.get('preference-applied')]).toEqual(['succeeded', 'wait=30']);
      expect(woken.after).toBeLessThan(WOKEN_MS);
    } finally {
      await d.stop();
    }
  });
});

describe('the subscription follows the waiters', () => {
  const numsub = async (r: Redis, channel: string) =>
    Number(((await r.pubsub('NUMSUB', channel)) as [string, number])[1]);

  it('an API process nobody waits on is not subscribed; a wait subscribes first and is woken', async () => {
    const k = await startKiln({ workers: false });
    const redis = new Redis(inject('redisUrl'));
    try {
      const channel = k.api.store.waitChannel;
      const r = imageRecord(ownerOfKey(k.config.ownerKey, KEY_A), 'running');
      await write(r, k.api.store);
      expect(await numsub(redis, channel)).toBe(0);
      expect((await http(k.baseUrl, KEY_A)(`/v1/tasks/${r.id}`)).json.status).toBe('running');
      expect(await numsub(redis, channel)).toBe(0);
      // Counted as waiting once its first read is done, which comes after the SUBSCRIBE's answer.
      const a = await wokenBy(k, `/v1/tasks/${r.id}?wait=30`, async () => {
        expect(await numsub(redis, channel)).toBe(1);
        await write(succeededRecord(r), k.api.store);
      });
      expect([a.json.status, a.headers.get('preference-applied')]).toEqual(['succeeded', 'wait=30']);
      expect(a.after).toBeLessThan(WOKEN_MS);
    } finally {
      redis.disconnect();
      await k.stop();
    }
  });

  it('unsubscribes once idle, and a wait that follows at once subscribes again and misses nothing', async () => {
    const redis = new Redis(inject('redisUrl'));
    const channel = `wait-idle-${randomBytes(4).toString('hex')}`;
    // The subscriber's link is slow (25 ms each way): a read and a publish made before its SUBSCRIBE
    // is answered would overtake it, and that round's change would be missed (30 s instead of ~50 ms).
    const url = new URL(inject('redisUrl'));
    const proxy = await slowProxy({ host: url.hostname, port: Number(url.port) }, 25);
    const registry = new WaitRegistry(new Redis(proxy.port, '127.0.0.1', { lazyConnect: true }), channel, undefined, 0);
    await registry.start();
    try {
      // Each round: the change is published after the waiter's first read, and the round ends with
      // no waiter, so the next one starts while (or right after) the idle UNSUBSCRIBE is sent.
      for (let i = 0; i < 20; i++) {
        const id = `task_${i}`;
        let reads = 0;
        const read = async (): Promise<(ViewText | null)[]> => {
          reads += 1;
          if (reads === 1) setImmediate(() => void redis.publish(channel, `${id} succeeded`));
          return [{ status: reads === 1 ? 'running' : 'succeeded', json: '{}' }];
        };
        const t0 = performance.now();
        const { views, applied } = await longPoll(registry, [id], { seconds: 30 }, read);
        expect([views[0]?.status, applied, reads]).toEqual(['succeeded', true, 2]);
        expect(performance.now() - t0).toBeLessThan(WOKEN_MS);
      }
      expect(
        await eventually(
          () => numsub(redis, channel),
          (n) => n === 0,
        ),
      ).toBe(0);
    } finally {
      registry.close();
      redis.disconnect();
      await proxy.close();
    }
  });
});

describe('on a Redis Cluster', () => {
  it('wakes a wait whose task key lives on another primary than the subscriber', async () => {
    const ports = await freePorts(12);
    const cluster = await startRedisCluster({
      dir: join(inject('tmpRoot'), `wait-cluster-${randomBytes(3).toString('hex')}`),
      ports: ports.slice(0, 6),
      busPorts: ports.slice(6),
      fresh: true,
    });
    const k = await startKiln({ workers: false, env: { REDIS_CLUSTER_NODES: cluster.nodeList } });
    try {
      const get = http(k.baseUrl, KEY_A);
      // Tasks spread over the three primaries: the subscriber sits on one of them.
      const records = Array.from({ length: 6 }, () => imageRecord(ownerOfKey(k.config.ownerKey, KEY_A), 'queued'));
      for (const r of records) await write(r, k.api.store);
      for (const r of records) {
        const answer = timed(get(`/v1/tasks/${r.id}?wait=30`));
        expect(await untilWaiting(1, k)).toBe(1);
        const changed = performance.now();
        await write({ ...r, status: 'running' }, k.api.store);
        const a = await answer;
        expect([a.json.status, a.headers.get('preference-applied')]).toEqual(['running', 'wait=30']);
        expect(a.at - changed).toBeLessThan(WOKEN_MS);
      }
    } finally {
      await k.stop();
      await cluster.stop();
    }
  }, 180_000);
});

describe('the document', () => {
  it('documents wait, Prefer and Preference-Applied as the handlers enforce them', async () => {
    const doc = (await api('/openapi.json')).json;
    const get = doc.paths['/v1/tasks/{id}'].get;
    const wait = get.parameters.find((p: any) => p.name === 'wait');
    expect(wait).toMatchObject({ in: 'query', schema: { type: 'integer', minimum: 1, maximum: 60 } });
    expect(get.parameters.find((p: any) => p.name === 'prefer')?.in).toBe('header');
    expect(get.responses['200'].headers['Preference-Applied']).toBeDefined();
    const video = doc.paths['/v1/videos/{id}'].get;
    expect(video.parameters.map((p: any) => p.name)).toEqual(expect.arrayContaining(['wait', 'prefer']));
    const batch = doc.paths['/v1/tasks/batch-get'].post;
    const body = batch.requestBody.content['application/json'].schema;
    const schema = body.$ref ? doc.components.schemas[body.$ref.split('/').pop()] : body;
    expect(schema.properties.wait).toMatchObject({ type: 'integer', minimum: 1, maximum: 60 });
  });

  // What `npm run fuzz` checks for this parameter, pinned: random values are accepted exactly when
  // the document's schema accepts them.
  it('accepts a random wait value exactly when the documented schema does', async () => {
    const r = succeededRecord(image('running'));
    await write(r);
    let seed = 13;
    const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const values = Array.from({ length: 40 }, () => {
      const n = Math.floor(rnd() * 140) - 40;
      const pick = rnd();
      return pick < 0.6 ? String(n) : pick < 0.8 ? `${n}.${Math.floor(rnd() * 10)}` : `${n}x`;
    });
    for (const v of values) {
      const valid = /^\d+$/.test(v) && Number(v) >= 1 && Number(v) <= 60;
      const a = await api(`/v1/tasks/${r.id}?wait=${encodeURIComponent(v)}`);
      expect({ v, status: a.status }).toEqual({ v, status: valid ? 200 : 400 });
    }
  });
});
