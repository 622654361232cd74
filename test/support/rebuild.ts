// What the read-model rebuild tests share (test/integration/read-model-rebuild*.test.ts): a mix of
// finished and running image and video tasks for two owners, some with a webhook; snapshots of
// every task and every owner's lists; the rebuild's HTTP calls and CLI; and the comparison of a
// state after the rebuild with the snapshot's (the same, or a later one).
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, webhookEnv, type Receiver } from '../integration/webhooks/webhook-receiver.js';
import { http, KEY_A, KEY_B, startKiln, submitBody, waitForStatus, type Kiln } from './kiln.js';

export const OPERATOR_TOKEN = 'rebuild-test-operator-token-0123456789abcdef';
export const OWNERS = [KEY_A, KEY_B];
const run = promisify(execFile);

export const REBUILD_MODELS = [
  { id: 'img', provider: 'local', latencyMs: 200, idempotent: true },
  { id: 'img-slow', provider: 'local', latencyMs: 25_000, idempotent: true, timeoutMs: 60_000 },
  { id: 'vid', kind: 'video', provider: 'local', latencyMs: 300, idempotent: true, pollIntervalMs: 200 },
  {
    id: 'vid-slow',
    kind: 'video',
    provider: 'local',
    latencyMs: 25_000,
    idempotent: true,
    pollIntervalMs: 1000,
    timeoutMs: 60_000,
  },
];

export interface Task {
  id: string;
  key: string;
  kind: 'image' | 'video';
  slow: boolean;
  webhook: boolean;
}

const path = (t: Pick<Task, 'id' | 'kind'>) => `/v1/${t.kind === 'image' ? 'tasks' : 'videos'}/${t.id}`;

/** Submits the mix: per owner, finished and slow tasks of both kinds, some with a webhook. */
export async function submitMix(kiln: Kiln, hook: (path: string) => string): Promise<Task[]> {
  const tasks: Task[] = [];
  for (const key of OWNERS) {
    const api = http(kiln.baseUrl, key);
    const image = async (model: string, webhook: boolean, i: number) => {
      const q = new URLSearchParams({ output: 'url', ...(webhook ? { webhook: hook('/img') } : {}) });
      const r = await api(`/v1beta/models/${model}:generateContent?${q}`, {
        method: 'POST',
        json: submitBody(`p${i}`),
      });
      expect(r.status, r.text).toBe(202);
      tasks.push({ id: r.json.id, key, kind: 'image', slow: model === 'img-slow', webhook });
    };
    const video = async (model: string, webhook: boolean) => {
      const json = { model, prompt: 'a kiln at night', ...(webhook ? { webhook: hook('/vid') } : {}) };
      const r = await api('/v1/videos', { method: 'POST', json });
      expect(r.status, r.text).toBe(200);
      tasks.push({ id: r.json.id, key, kind: 'video', slow: model === 'vid-slow', webhook });
    };
    for (let i = 0; i < 5; i++) await image('img', i < 2, i);
    await image('img-slow', true, 9);
    await video('vid', true);
    await video('vid', false);
    await video('vid-slow', false);
  }
  return tasks;
}

const RANK: Record<string, number> = {
  accepted: 0,
  queued: 1,
  running: 2,
  in_progress: 2,
  succeeded: 3,
  completed: 3,
  failed: 3,
  uncertain: 3,
};
const finished = (v: any) => RANK[v.status] === 3;

/** Finished tasks finished (webhooks delivered), slow ones under way. */
export async function settle(kiln: Kiln, tasks: Task[]): Promise<void> {
  for (const t of tasks) {
    const get = () => http(kiln.baseUrl, t.key)(path(t));
    if (t.slow) await waitForStatus(get, (s) => s === 'running' || s === 'in_progress');
    else {
      await waitForStatus(get, (s) => RANK[s] === 3);
      if (t.webhook) await waitForStatus(async () => ({ json: (await get()).json.webhook }), 'delivered');
    }
  }
}

export interface Snapshot {
  views: Map<string, any>;
  /** Per owner and kind, the ids of the list in order. */
  lists: Map<string, string[]>;
}

/** Every owner's lists, by owner and kind. */
export async function lists(kiln: Kiln): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  for (const key of OWNERS) {
    const api = http(kiln.baseUrl, key);
    out.set(
      `${key} image`,
      (await api('/v1/tasks?limit=100')).json.items.map((i: any) => i.id),
    );
    out.set(
      `${key} video`,
      (await api('/v1/videos?limit=100')).json.data.map((v: any) => v.id),
    );
  }
  return out;
}

/** The lists first: a poll of a task Redis lost writes its finished record back (the fallback). */
export async function snapshot(kiln: Kiln, tasks: Task[]): Promise<Snapshot> {
  const owned = await lists(kiln);
  // Polls must come from Redis, not from this process's memory of finished views.
  kiln.api.store.finished?.clear();
  const views = new Map<string, any>();
  for (const t of tasks) {
    const r = await http(kiln.baseUrl, t.key)(path(t));
    expect(r.status, r.text).toBe(200);
    views.set(t.id, r.json);
  }
  return { views, lists: owned };
}

/** Every task in the same state as before, or (still running then) a later one; every list the same. */
export function expectSameOrLater(before: Snapshot, after: Snapshot): void {
  for (const [id, was] of before.views) {
    const now = after.views.get(id);
    if (finished(was)) expect(now, id).toEqual(was);
    else {
      expect(RANK[now.status], `${id}: ${was.status} -> ${now.status}`).toBeGreaterThanOrEqual(RANK[was.status]);
      expect(now.created_at).toBe(was.created_at);
    }
  }
  expect(after.lists).toEqual(before.lists);
}

export const admin = (kiln: Kiln, token: string | null = OPERATOR_TOKEN) => http(kiln.baseUrl, token);

/** Polls the progress until `ok` holds. */
export async function rebuildUntil(kiln: Kiln, ok: (p: any) => boolean, timeoutMs = 60_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const p = (await admin(kiln)('/admin/v1/read-model/rebuild')).json;
    if (ok(p) || Date.now() > deadline) return p;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** `kiln admin rebuild-read-model` against this Kiln: its exit code and its --json answer. */
export async function rebuildCli(kiln: Kiln, ...args: string[]): Promise<{ code: number; out: any }> {
  const env = { ...process.env, KILN_BASE_URL: kiln.baseUrl, KILN_OPERATOR_TOKEN: OPERATOR_TOKEN };
  try {
    const r = await run(process.execPath, ['bin/kiln.js', '--json', 'admin', 'rebuild-read-model', ...args], {
      env,
      timeout: 60_000,
    });
    return { code: 0, out: JSON.parse(r.stdout) };
  } catch (err) {
    const e = err as { code: number; stdout: string };
    return { code: e.code, out: e.stdout };
  }
}

/** Waits until every slow task has finished. */
export async function finishAll(kiln: Kiln, tasks: Task[]): Promise<void> {
  for (const t of tasks)
    await waitForStatus(
      () => http(kiln.baseUrl, t.key)(path(t)),
      (s) => RANK[s] === 3,
      60_000,
    );
}

export interface RebuildSetup {
  /** Where Kiln's Redis is: REDIS_URL or REDIS_CLUSTER_NODES. */
  env: Record<string, string>;
  /** FLUSHALL on every primary. */
  flush(): Promise<void>;
}

/**
 * The scenario on one Redis deployment: tasks, snapshot, data loss, a rebuild stopped mid-way and
 * resumed by the CLI, then the same answers; running tasks finish; a second rebuild changes nothing.
 */
export function describeRebuild(name: string, setup: () => Promise<RebuildSetup & { stop(): Promise<void> }>) {
  describe(name, () => {
    let kiln: Kiln;
    let receiver: Receiver;
    let backing: Awaited<ReturnType<typeof setup>>;
    let tasks: Task[];
    let before: Snapshot;

    beforeAll(async () => {
      backing = await setup();
      receiver = await startReceiver();
      kiln = await startKiln({
        models: REBUILD_MODELS,
        env: { ...backing.env, ...webhookEnv(), KILN_OPERATOR_TOKEN: OPERATOR_TOKEN },
      });
      tasks = await submitMix(kiln, (p) => receiver.url(p));
      await settle(kiln, tasks);
      before = await snapshot(kiln, tasks);
    }, 180_000);
    afterAll(async () => {
      await kiln?.stop();
      await receiver?.close();
      await backing?.stop();
    });

    it('rebuilds every task, list, gauge and webhook state after FLUSHALL, resuming when stopped', async () => {
      await backing.flush();
      // Empty but for running tasks: a running video's progress write may land between the flush
      // and this read, and it writes its record (and list item) back, as any transition does.
      const slowIds = new Set(tasks.filter((t) => t.slow).map((t) => t.id));
      expect([...(await lists(kiln)).values()].flat().filter((id) => !slowIds.has(id))).toEqual([]);

      // A small page size, so the run can be stopped between pages (as a process shutting down does).
      // The rebuild's step hook stops it right after its second page, however fast the machine is.
      const rebuild = kiln.api.rebuild;
      const stoppedAtTwo = new Promise<void>((resolve) => {
        rebuild.afterStep = (p) => {
          if (p.pages < 2) return;
          rebuild.afterStep = null;
          resolve(rebuild.stop());
        };
      });
      const t0 = Date.now();
      const started = await admin(kiln)('/admin/v1/read-model/rebuild', { method: 'POST', json: { page_size: 2 } });
      expect(started.status, started.text).toBe(202);
      expect(started.json).toMatchObject({ state: 'running', active: true, runs: 1 });
      await stoppedAtTwo;
      const stopped = await rebuildUntil(kiln, () => true);
      expect(stopped).toMatchObject({ state: 'running', phase: 'listing', active: false, runs: 1, pages: 2 });

      // The CLI takes it up where it stopped.
      const cli = await rebuildCli(kiln);
      const ms = Date.now() - t0;
      expect(cli.code, JSON.stringify(cli.out)).toBe(0);
      expect(cli.out).toMatchObject({ state: 'done', phase: 'done', runs: 2, errors: 0, workflows: tasks.length });
      expect(cli.out.pages).toBeGreaterThan(stopped.pages);
      expect(cli.out.webhooks).toBe(tasks.filter((t) => t.webhook && !t.slow).length);
      console.info(`[rebuild ${name}] ${tasks.length} tasks: ${JSON.stringify(cli.out)} (${ms} ms wall)`);

      // The gauge holds a place for every slow task still running, and for no other. A slow task may
      // end by now on a loaded machine (giving its place back as it writes its final record, or
      // after), so the places are read before the views.
      const places = await kiln.api.store.unfinishedIds(Math.floor(Date.now() / 1000) + 3600, null, 100);
      const held = new Set(places.map((u) => u.id));
      const after = await snapshot(kiln, tasks);
      expectSameOrLater(before, after);
      expect([...held].filter((id) => !slowIds.has(id))).toEqual([]);
      for (const id of slowIds) if (!finished(after.views.get(id))) expect(held.has(id), id).toBe(true);
    });

    it('lets running tasks finish and show it; a second rebuild changes nothing', async () => {
      await finishAll(kiln, tasks);
      const done = await snapshot(kiln, tasks);
      expectSameOrLater(before, done);
      expect(await kiln.api.store.unfinishedCount()).toBe(0);
      const again = await admin(kiln)('/admin/v1/read-model/rebuild', { method: 'POST', json: { restart: true } });
      expect(again.status).toBe(202);
      const p = await rebuildUntil(kiln, (x) => x.state === 'done');
      expect(p).toMatchObject({ state: 'done', written: 0, webhooks: 0, unchanged: tasks.length, runs: 1 });
      expect(await snapshot(kiln, tasks)).toEqual(done);
      expect(await kiln.api.store.unfinishedCount()).toBe(0);
    });
  });
}
