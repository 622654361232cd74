// Nothing lost: workers stopped or killed, the Temporal server restarted, Redis restarted or emptied.
import { join } from 'node:path';
import { mkdtempSync } from 'node:fs';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { startRedis, startTemporal } from '../../../scripts/services.js';
import { workerChild } from '../../support/worker-child.js';
import { startKiln, http, submitBody, waitForStatus, TERMINAL, type Kiln } from '../../support/kiln.js';

const MODELS = [
  { id: 'kiln-image-1', provider: 'local', latencyMs: 300, idempotent: true, heartbeatTimeoutMs: 1000 },
  { id: 'slow-local', provider: 'local', latencyMs: 4000, idempotent: true, heartbeatTimeoutMs: 1000 },
];
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});

async function kilnWith(opts: Parameters<typeof startKiln>[0] = {}): Promise<Kiln> {
  const k = await startKiln({ models: MODELS, ...opts });
  cleanups.push(() => k.stop());
  return k;
}

const submit = (k: Kiln, model = 'kiln-image-1', prompt = 'durable') =>
  http(k.baseUrl)(`/v1beta/models/${model}:generateContent`, { method: 'POST', json: submitBody(prompt) }).then((r) => {
    expect(r.status).toBe(202);
    return r.json.id as string;
  });

const workerProcess = (k: Kiln) => workerChild(k.env, (child) => cleanups.push(async () => child.kill('SIGKILL')));

describe('durability', () => {
  it('answers polls, batches and lists while every worker is stopped, then finishes the work', async () => {
    const k = await kilnWith();
    const api = http(k.baseUrl);
    const done = await submit(k);
    await waitForStatus(() => api(`/v1/tasks/${done}`), 'succeeded');
    await k.stopWorker();
    const pending = await submit(k);

    const one = await api(`/v1/tasks/${pending}`);
    expect(one.status).toBe(200);
    expect(one.json).toMatchObject({
      id: pending,
      status: 'accepted',
      finished_at: null,
      candidates: null,
      error: null,
    });
    const batch = await api('/v1/tasks/batch-get', { method: 'POST', json: { ids: [done, pending] } });
    expect(batch.json.items.map((i: { status: string }) => i.status)).toEqual(['succeeded', 'accepted']);
    const list = await api('/v1/tasks');
    // Newest first; two tasks of the same second are ordered by id, descending.
    const expected = [
      { id: done, t: batch.json.items[0].created_at },
      { id: pending, t: batch.json.items[1].created_at },
    ]
      .sort((x, y) => y.t - x.t || (y.id > x.id ? 1 : -1))
      .map((x) => x.id);
    expect(list.json.items.map((i: { id: string }) => i.id)).toEqual(expected);

    await k.startWorker();
    await waitForStatus(() => api(`/v1/tasks/${pending}`), 'succeeded');
  });

  it('finishes a task whose worker was killed mid-upstream-call, once a worker is back', async () => {
    const k = await kilnWith({ workers: false });
    const api = http(k.baseUrl);
    const first = await workerProcess(k);
    const id = await submit(k, 'slow-local');
    await waitForStatus(() => api(`/v1/tasks/${id}`), 'running');
    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    const during = await api(`/v1/tasks/${id}`);
    expect(during.json.status).toBe('running');
    await workerProcess(k);
    const end = await waitForStatus(() => api(`/v1/tasks/${id}`), TERMINAL, 45_000);
    // The local provider is idempotent, so the lost attempt is simply retried.
    expect(end.status).toBe('succeeded');
  }, 90_000);

  it('keeps every task across a Temporal dev server restart on the same SQLite file', async () => {
    const dir = mkdtempSync(join(inject('tmpRoot'), 'temporal-restart-'));
    const temporal = await startTemporal({ dbFile: join(dir, 'dev.sqlite') });
    cleanups.push(() => temporal.stop());
    const k = await kilnWith({ temporalAddress: temporal.url, workers: false });
    const api = http(k.baseUrl);
    const ids = [await submit(k), await submit(k), await submit(k)];
    await temporal.stop();
    // Reads come from Redis: they keep answering while Temporal is down.
    const down = await api('/v1/tasks/batch-get', { method: 'POST', json: { ids } });
    expect(down.json.items.map((i: { status: string }) => i.status)).toEqual(['accepted', 'accepted', 'accepted']);
    await temporal.start();
    await k.startWorker();
    for (const id of ids) await waitForStatus(() => api(`/v1/tasks/${id}`), 'succeeded', 45_000);
    // Visibility is eventually consistent: give it a moment to show all three closed.
    let closed = 0;
    for (let i = 0; i < 50 && closed < 3; i++) {
      closed = 0;
      for await (const wf of k.api.client.workflow.list({
        query: `WorkflowId IN (${ids.map((x) => `'${x}'`).join(',')})`,
      }))
        if (wf.status.name === 'COMPLETED') closed++;
      if (closed < 3) await new Promise((r) => setTimeout(r, 100));
    }
    expect(closed).toBe(3);
  }, 120_000);

  it('rides out a Redis restart mid-task and repairs a lost record from Temporal', async () => {
    const redis = await startRedis({ dir: mkdtempSync(join(inject('tmpRoot'), 'redis-restart-')) });
    cleanups.push(() => redis.stop());
    const k = await kilnWith({ redisUrl: redis.url });
    const api = http(k.baseUrl);
    const id = await submit(k, 'slow-local');
    await waitForStatus(() => api(`/v1/tasks/${id}`), 'running');
    await redis.stop('SIGKILL');
    // Redis down: the poll is answered from Temporal instead of failing or hanging.
    const t0 = Date.now();
    const during = await api(`/v1/tasks/${id}`);
    // Redis fails fast in the API: the answer is Temporal's, in about a second; the bound catches a
    // read left waiting on Redis, not the fallback's speed.
    expect(Date.now() - t0).toBeLessThan(15_000);
    expect(during.status).toBe(200);
    expect(['accepted', 'queued', 'running']).toContain(during.json.status);
    await redis.start();
    const end = await waitForStatus(() => api(`/v1/tasks/${id}`), 'succeeded', 45_000);
    expect(end.candidates[0].content.parts[0].inlineData.data).toMatch(/^http/);

    // Lose the record entirely: the next poll answers from Temporal and writes the record back.
    await k.api.redis.del(k.api.store.taskKey(id));
    // The API process keeps finished views: ask as one that has not seen this task.
    k.api.store.finished?.clear();
    const repaired = await waitForStatus(() => api(`/v1/tasks/${id}`), 'succeeded', 15_000);
    expect(repaired).toEqual(end);
    expect(await k.api.store.get(id)).toMatchObject({ id, status: 'succeeded' });
  }, 120_000);
});

describe('unknown ids', () => {
  it('asks Temporal about an unknown well-formed id once, then remembers it is missing', async () => {
    const k = await kilnWith({ workers: false });
    const api = http(k.baseUrl);
    const ghost = `task_${'e'.repeat(32)}`;
    const first = await api('/v1/tasks/batch-get', { method: 'POST', json: { ids: [ghost] } });
    expect(first.json.items[0]).toMatchObject({ id: ghost, status: 'not_found' });
    const owner = (await import('../../../src/infra/callers.js')).ownerOfKey(
      k.config.ownerKey,
      (await import('../../support/kiln.js')).KEY_A,
    );
    expect(await k.api.store.recentlyMissing(owner, [ghost])).toEqual(new Set([ghost]));
    // Another owner's view of the same id is separate.
    expect(await k.api.store.recentlyMissing('someone-else', [ghost])).toEqual(new Set());
    const again = await api(`/v1/tasks/${ghost}`);
    expect(again.status).toBe(404);
  });
});
