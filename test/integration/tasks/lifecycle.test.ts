import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKiln, http, submitBody, waitForStatus, KEY_A, KEY_B, type Kiln } from '../../support/kiln.js';

let kiln: Kiln;
beforeAll(async () => {
  kiln = await startKiln({ models: [{ id: 'kiln-image-1', provider: 'local', latencyMs: 600, idempotent: true }] });
});
afterAll(async () => {
  await kiln?.stop();
});

describe('image task lifecycle', () => {
  it('goes submit → unfinished poll → 409 → success → 302 → PNG bytes', async () => {
    const api = http(kiln.baseUrl, KEY_A);
    const sub = await api('/v1beta/models/kiln-image-1:generateContent', { method: 'POST', json: submitBody() });
    expect(sub.status).toBe(202);
    const id = sub.json.id;
    expect(id).toMatch(/^task_[a-f0-9]{32}$/);
    expect(sub.json).toMatchObject({
      object: 'image.task',
      model: 'kiln-image-1',
      status: 'accepted',
      polling_url: `/v1/tasks/${id}`,
      content_url: `/v1/tasks/${id}/content`,
    });

    const first = await api(`/v1/tasks/${id}`);
    expect(first.status).toBe(200);
    expect(['accepted', 'queued', 'running']).toContain(first.json.status);
    expect(first.json).toMatchObject({ id, model: 'kiln-image-1', finished_at: null, candidates: null, error: null });
    expect(first.headers.get('retry-after')).toBe('10');

    const early = await api(`/v1/tasks/${id}/content`);
    expect(early.status).toBe(409);
    expect(early.json.error.code).toBe('task_not_ready');

    const done = await waitForStatus(() => api(`/v1/tasks/${id}`), 'succeeded');
    expect(done).toMatchObject({ id, object: 'image.task', model: 'kiln-image-1', status: 'succeeded', error: null });
    expect(Number.isInteger(done.created_at)).toBe(true);
    expect(Number.isInteger(done.finished_at)).toBe(true);
    expect(done.finished_at).toBeGreaterThanOrEqual(done.created_at);
    expect(done.created_at).toBeLessThan(1e10);
    expect(typeof done.response_id).toBe('string');
    expect(typeof done.model_version).toBe('string');
    expect(done.candidates[0].finishReason).toBe('STOP');
    const url = done.candidates[0].content.parts[0].inlineData.data;
    expect(url).toMatch(new RegExp(`^${kiln.baseUrl}/v1/files/[a-f0-9]{32}\\.png$`));

    const content = await api(`/v1/tasks/${id}/content`);
    expect(content.status).toBe(302);
    expect(content.headers.get('location')).toBe(url);

    const img = await fetch(url);
    expect(img.status).toBe(200);
    expect(img.headers.get('content-type')).toBe('image/png');
    const bytes = Buffer.from(await img.arrayBuffer());
    expect(bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))).toBe(true);
  });
});

describe('owner isolation', () => {
  it("treats another owner's task exactly like a missing one on all four read endpoints", async () => {
    const a = http(kiln.baseUrl, KEY_A);
    const b = http(kiln.baseUrl, KEY_B);
    const sub = await a('/v1beta/models/kiln-image-1:generateContent', {
      method: 'POST',
      json: submitBody('owner a only'),
    });
    const id = sub.json.id;
    await waitForStatus(() => a(`/v1/tasks/${id}`), 'succeeded');
    const missing = `task_${'0'.repeat(32)}`;

    for (const probe of [id, missing]) {
      const get = await b(`/v1/tasks/${probe}`);
      expect(get.status).toBe(404);
      expect(get.json).toEqual({ error: { code: 'not_found', message: `Task ${probe} was not found.` } });
      const content = await b(`/v1/tasks/${probe}/content`);
      expect(content.status).toBe(404);
      expect(content.json).toEqual({ error: { code: 'not_found', message: `Task ${probe} was not found.` } });
    }
    const batch = await b('/v1/tasks/batch-get', { method: 'POST', json: { ids: [id, missing] } });
    expect(batch.status).toBe(200);
    expect(batch.json.items).toEqual([
      {
        id,
        object: 'image.task',
        status: 'not_found',
        error: { code: 'not_found', message: `Task ${id} was not found.` },
      },
      {
        id: missing,
        object: 'image.task',
        status: 'not_found',
        error: { code: 'not_found', message: `Task ${missing} was not found.` },
      },
    ]);
    const listB = await b('/v1/tasks?limit=100');
    expect(listB.json.items.map((t: { id: string }) => t.id)).not.toContain(id);
    const listA = await a('/v1/tasks?limit=100');
    expect(listA.json.items.map((t: { id: string }) => t.id)).toContain(id);
    const batchA = await a('/v1/tasks/batch-get', { method: 'POST', json: { ids: [id] } });
    expect(batchA.json.items[0]).toMatchObject({ id, status: 'succeeded' });
  });
});

describe('list pagination', () => {
  it('pages newest first without repeats or gaps when many tasks share one created_at second', async () => {
    const owner = 'pagination-owner-key-000000';
    const api = http(kiln.baseUrl, owner);
    const { ownerOfKey } = await import('../../../src/infra/callers.js');
    const ownerHash = ownerOfKey(kiln.config.ownerKey, owner);
    const now = Math.floor(Date.now() / 1000);
    // 23 tasks in two seconds (forced ties), plus a few submitted through the API.
    const seeded: string[] = [];
    for (let i = 0; i < 23; i++) {
      const id = `task_${i.toString(16).padStart(2, '0')}${'a'.repeat(30)}`;
      seeded.push(id);
      await kiln.api.store.transition({
        id,
        kind: 'image',
        owner: ownerHash,
        model: 'kiln-image-1',
        status: 'succeeded',
        created_at: now - 10 - (i % 2),
        finished_at: now,
        candidates: [],
        error: null,
      });
    }
    const submitted: string[] = [];
    for (let i = 0; i < 4; i++)
      submitted.push(
        (await api('/v1beta/models/kiln-image-1:generateContent', { method: 'POST', json: submitBody(`p${i}`) })).json
          .id,
      );

    const seen: { id: string; created_at: number }[] = [];
    let cursor = '';
    for (let page = 0; page < 20; page++) {
      const res = await api(`/v1/tasks?limit=4${cursor}`);
      expect(res.status).toBe(200);
      expect(res.json).toMatchObject({ object: 'list', days: 3 });
      if (res.json.items.length === 0) break;
      expect(res.json.items.length).toBeLessThanOrEqual(4);
      seen.push(...res.json.items);
      const last = res.json.items.at(-1);
      cursor = `&before_created_at=${last.created_at}&before_id=${last.id}`;
    }
    const ids = seen.map((t) => t.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.sort()).toEqual([...seeded, ...submitted].sort());
    // Newest first: created_at never increases, ties ordered by id descending.
    for (let i = 1; i < seen.length; i++) {
      const [p, c] = [seen[i - 1], seen[i]];
      expect(p.created_at > c.created_at || (p.created_at === c.created_at && p.id > c.id)).toBe(true);
    }
    for (const item of seen)
      expect(Object.keys(item).sort()).toEqual([
        'attempts',
        'channel',
        'content_url',
        'created_at',
        'finished_at',
        'id',
        'model',
        'started_at',
        'status',
      ]);
  });

  /** A stored succeeded record of `owner`'s, `age` seconds older than `now`. */
  const seeded = async (owner: string, n: number, now: number, age: number) => {
    const { ownerOfKey } = await import('../../../src/infra/callers.js');
    const r = {
      id: `task_${n.toString(16).padStart(32, 'c')}`,
      kind: 'image' as const,
      owner: ownerOfKey(kiln.config.ownerKey, owner),
      model: 'kiln-image-1',
      status: 'succeeded' as const,
      created_at: now - age,
      finished_at: now,
      candidates: [],
      error: null,
    };
    await kiln.api.store.transition(r);
    return r;
  };
  it('uses before_created_at alone as an exclusive bound and leaves out tasks older than the window', async () => {
    const owner = 'window-owner-key-0000000000';
    const api = http(kiln.baseUrl, owner);
    const now = Math.floor(Date.now() / 1000);
    const young = await seeded(owner, 0xb1, now, 100);
    const mid = await seeded(owner, 0xb2, now, 2 * 86400);
    const old = await seeded(owner, 0xb3, now, 2 * 86400 + 3600);
    const all = await api('/v1/tasks');
    expect(all.json.items.map((t: { id: string }) => t.id)).toEqual([young.id, mid.id, old.id]);
    const oneDay = await api('/v1/tasks?days=1');
    expect(oneDay.json).toMatchObject({ days: 1 });
    expect(oneDay.json.items.map((t: { id: string }) => t.id)).toEqual([young.id]);
    const before = await api(`/v1/tasks?before_created_at=${young.created_at}`);
    expect(before.json.items.map((t: { id: string }) => t.id)).toEqual([mid.id, old.id]);
  });

  const idsOf = (r: { json: { items: { id: string }[] } }) => r.json.items.map((t) => t.id);

  it('answers 20 items without limit, limit=100 at most 100 of 101, newest first', async () => {
    const owner = 'limit-owner-key-000000000000';
    const api = http(kiln.baseUrl, owner);
    const now = Math.floor(Date.now() / 1000);
    const records = await Promise.all(Array.from({ length: 101 }, (_, i) => seeded(owner, i + 1, now, i + 1)));
    const ids = records.map((r) => r.id);
    expect(idsOf(await api('/v1/tasks'))).toEqual(ids.slice(0, 20));
    expect(idsOf(await api('/v1/tasks?limit=100'))).toEqual(ids.slice(0, 100));
    expect(idsOf(await api('/v1/tasks?limit=1'))).toEqual(ids.slice(0, 1));
  });

  it('keeps a task created exactly `days` days ago and leaves out one a second older', async () => {
    // The answer's window starts at the server's clock: exact only when no second ticks between
    // the seeding and the answer, so an attempt that saw one starts again.
    for (let attempt = 0; ; attempt++) {
      const owner = `edge-owner-key-${attempt}-00000000000`;
      const api = http(kiln.baseUrl, owner);
      const now = Math.floor(Date.now() / 1000);
      // The fourth, a second past three days, is in no answer.
      const [oneDay, pastOneDay, threeDays] = await Promise.all(
        [86400, 86401, 3 * 86400, 3 * 86400 + 1].map((age, i) => seeded(owner, 0x1000 + attempt * 8 + i, now, age)),
      );
      const all = await api('/v1/tasks');
      const one = await api('/v1/tasks?days=1');
      if (Math.floor(Date.now() / 1000) !== now && attempt < 5) continue;
      expect(Math.floor(Date.now() / 1000), 'a second ticked during every attempt').toBe(now);
      expect(idsOf(all)).toEqual([oneDay!.id, pastOneDay!.id, threeDays!.id]);
      expect(idsOf(one)).toEqual([oneDay!.id]);
      return;
    }
  });
});

describe('discovery', () => {
  it('lists models in the OpenAI list shape and answers /healthz', async () => {
    const models = await http(kiln.baseUrl)('/v1/models');
    expect(models.status).toBe(200);
    expect(models.json).toEqual({
      object: 'list',
      data: [expect.objectContaining({ id: 'kiln-image-1', object: 'model', kind: 'image', form: 'task' })],
    });
    const health = await http(kiln.baseUrl, null)('/healthz');
    expect(health.status).toBe(200);
  });
});
