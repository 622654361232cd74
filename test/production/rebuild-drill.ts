// The read-model rebuild drill (test/production/drills.test.ts runs it): 300 image tasks of two
// owners, some finished and some in flight; snapshot of every task and both owners' whole lists;
// FLUSHALL on every Redis primary; the rebuild, with its lock holder killed mid-way and resumed by
// the other API process, while tasks keep finishing. Afterwards every task answers the state of the
// snapshot or a later one, and every list has the same ids in the same order.
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { KilnDeployment } from '../../scripts/production/kiln.js';
import { call, control, submit, waitAllTerminal, TERMINAL } from './support.js';

export const DRILL_OPERATOR_TOKEN = `drill-operator-${randomBytes(16).toString('hex')}`;
/** The page after which the first run waits (src/api/main.ts), so the drill kills its process mid-run. */
const HOLD_AT = 3;
/** The API processes' env this drill needs. */
export const REBUILD_DRILL_ENV = { KILN_DRILL_HOLD_REBUILD_AT: String(HOLD_AT) };
const PATH = '/admin/v1/read-model/rebuild';
const RANK: Record<string, number> = { accepted: 0, queued: 1, running: 2, succeeded: 3, failed: 3, uncertain: 3 };

/** The owner's whole image list, newest first, page by page. */
async function wholeList(base: string, key: string): Promise<string[]> {
  const ids: string[] = [];
  let cursor = '';
  for (;;) {
    const r = await call(base, key, `/v1/tasks?limit=100${cursor}`);
    expect(r.status, r.text).toBe(200);
    const items = r.json.items as { id: string; created_at: number }[];
    ids.push(...items.map((i) => i.id));
    if (items.length < 100) return ids;
    const last = items.at(-1)!;
    cursor = `&before_created_at=${last.created_at}&before_id=${last.id}`;
  }
}

async function views(base: string, key: string, ids: string[]): Promise<Map<string, any>> {
  const out = new Map<string, any>();
  for (let i = 0; i < ids.length; i += 100) {
    const r = await call(base, key, '/v1/tasks/batch-get', { json: { ids: ids.slice(i, i + 100) } });
    expect(r.status, r.text).toBe(200);
    for (const item of r.json.items) out.set(item.id, item);
  }
  return out;
}

const progress = async (base: string) => (await call(base, DRILL_OPERATOR_TOKEN, PATH)).json;

/** Runs the drill; returns the owners' keys (the caller checks them against Temporal). */
export async function rebuildDrill(k: KilnDeployment, slowModel: string): Promise<string[]> {
  const bases = k.apis.map((a) => a.url);
  const keys = [`rebuild-a-${randomBytes(6).toString('hex')}`, `rebuild-b-${randomBytes(6).toString('hex')}`];
  const tasks: { id: string; key: string }[] = [];
  const submitAll = async (from: number, to: number, model: string) => {
    for (let i = from; i < to; i += 20)
      await Promise.all(
        Array.from({ length: Math.min(20, to - i) }, async (_, j) => {
          const key = keys[(i + j) % 2];
          const r = await submit(bases[(i + j) % 2], key, model, `rebuild ${i + j}`);
          expect(r.status, r.text).toBe(202);
          tasks.push({ id: r.json.id, key });
        }),
      );
  };
  // 240 finished, then 60 in flight (a minute each) during the snapshot, the data loss and the rebuild.
  await submitAll(0, 240, 'kiln-image-1');
  for (const key of keys)
    await waitAllTerminal(
      bases,
      key,
      tasks.filter((t) => t.key === key).map((t) => t.id),
    );
  await submitAll(240, 300, slowModel);

  // The lists first: a poll of a task Redis lost would write its record back.
  const before = { lists: new Map<string, string[]>(), views: new Map<string, any>() };
  for (const key of keys) before.lists.set(key, await wholeList(bases[0], key));
  for (const key of keys)
    for (const [id, v] of await views(bases[1], key, before.lists.get(key)!)) before.views.set(id, v);
  expect(before.views.size).toBe(300);
  const inFlight = [...before.views.values()].filter((v) => !TERMINAL.includes(v.status)).length;
  expect(inFlight).toBeGreaterThan(0);

  await control('redis/flushall');
  // Gone, but for tasks that were in flight: one that finishes after the flush writes its record.
  const unfinished = new Set([...before.views.values()].filter((v) => !TERMINAL.includes(v.status)).map((v) => v.id));
  for (const key of keys) expect((await wholeList(bases[0], key)).filter((id) => !unfinished.has(id))).toEqual([]);

  const t0 = Date.now();
  const started = await call(bases[0], DRILL_OPERATOR_TOKEN, PATH, { json: { page_size: 20 } });
  expect(started.status, started.text).toBe(202);
  // The first run waits after its third page (of 15): however fast the machine, it is mid-run here.
  await expect.poll(async () => (await progress(bases[1])).pages, { timeout: 60_000, interval: 100 }).toBe(HOLD_AT);
  expect(await progress(bases[1])).toMatchObject({ state: 'running', phase: 'listing', active: true, runs: 1 });
  // The lock holder dies mid-run: the other API process takes it up once the lock has lapsed.
  await k.apis[0].kill();
  await expect
    .poll(async () => (await call(bases[1], DRILL_OPERATOR_TOKEN, PATH, { json: {} })).json.runs, {
      timeout: 60_000,
      interval: 1000,
    })
    .toBe(2);
  await expect.poll(async () => (await progress(bases[1])).state, { timeout: 120_000, interval: 500 }).toBe('done');
  const done = await progress(bases[1]);
  console.info(
    `[drill rebuild] ${inFlight} of 300 in flight at the snapshot; ${Date.now() - t0} ms wall with a lock ` +
      `lapse; ${JSON.stringify(done)}`,
  );
  expect(done).toMatchObject({ errors: 0, runs: 2 });
  expect(done.workflows).toBeGreaterThanOrEqual(300);
  await k.apis[0].start();

  for (const key of keys) {
    const after = await views(bases[0], key, before.lists.get(key)!);
    for (const [id, was] of before.views) {
      if (!after.has(id)) continue;
      const now = after.get(id);
      if (TERMINAL.includes(was.status)) expect(now, id).toEqual(was);
      else expect(RANK[now.status], `${id} ${was.status} -> ${now.status}`).toBeGreaterThanOrEqual(RANK[was.status]);
    }
    expect(await wholeList(bases[1], key)).toEqual(before.lists.get(key));
  }
  // The tasks in flight finish, and their lists still hold every id in the same order.
  for (const key of keys)
    await waitAllTerminal(
      bases,
      key,
      tasks.filter((t) => t.key === key).map((t) => t.id),
    );
  for (const key of keys) expect(await wholeList(bases[0], key)).toEqual(before.lists.get(key));
  return keys;
}
