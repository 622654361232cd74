// GET /v1/videos: the caller's video tasks, OpenAI list shape, paged by a video id cursor. Records
// are written into the real read model (ties, many pages, old and legacy records) beside a video
// made end to end by a local model, and read back through the API and the client.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Kiln as KilnClient } from '../../../src/client/index.js';
import { ownerOfKey } from '../../../src/infra/callers.js';
import type { VideoTaskRecord } from '../../../src/shared/video-task.js';
import { http, KEY_A, KEY_B, startKiln, submitBody, waitForStatus, type Kiln } from '../../support/kiln.js';
import { videoRecord as sharedVideoRecord } from '../../support/records.js';

let kiln: Kiln;
beforeAll(async () => {
  kiln = await startKiln({
    models: [
      { id: 'img', provider: 'local', latencyMs: 0, idempotent: true },
      { id: 'v-local', kind: 'video', provider: 'local', latencyMs: 100, idempotent: true, timeoutMs: 30_000 },
    ],
  });
}, 120_000);
afterAll(async () => {
  await kiln?.stop();
});

const now = () => Math.floor(Date.now() / 1000);
const newKey = () => `test-key-${randomBytes(12).toString('hex')}`;
const ownerOf = (key: string) => ownerOfKey(kiln.config.ownerKey, key);

/** A record of this suite's local video model (test/support/records.ts has the rest of it). */
const videoRecord = (owner: string, over: Partial<VideoTaskRecord> = {}): VideoTaskRecord =>
  sharedVideoRecord(owner, { model: 'v-local', size: '320x180', ...over });

/** Every page from `first`, following `after` = last_id while has_more; the ids seen. */
async function walk(key: string, first: string): Promise<{ ids: string[]; pages: any[] }> {
  const api = http(kiln.baseUrl, key);
  const ids: string[] = [];
  const pages: any[] = [];
  let query = first;
  for (let n = 0; n < 30; n++) {
    const page = await api(`/v1/videos?${query}`);
    expect(page.status, page.text).toBe(200);
    pages.push(page.json);
    ids.push(...page.json.data.map((v: any) => v.id));
    if (!page.json.has_more) break;
    query = `${first}&after=${page.json.last_id}`;
  }
  return { ids, pages };
}

describe('GET /v1/videos', () => {
  it('lists a video made end to end exactly as GET /v1/videos/{id} answers it, not among image tasks', async () => {
    const key = newKey();
    const api = http(kiln.baseUrl, key);
    const created = await api('/v1/videos', { method: 'POST', json: { model: 'v-local', prompt: 'a kite' } });
    expect(created.status, created.text).toBe(200);
    const id = created.json.id;
    const early = await api('/v1/videos');
    expect(early.json).toMatchObject({ object: 'list', first_id: id, last_id: id, has_more: false });
    expect(early.json.data[0]).toMatchObject({ id, object: 'video', prompt: 'a kite' });
    const done = await waitForStatus(
      () => api(`/v1/videos/${id}`),
      (s) => s === 'completed' || s === 'failed',
      60_000,
    );
    expect(done.status).toBe('completed');
    const list = await api('/v1/videos');
    expect(list.json.data).toEqual([done]);
    const image = await api('/v1beta/models/img:generateContent', {
      method: 'POST',
      json: submitBody('a cup'),
    });
    expect(image.status, image.text).toBe(202);
    expect((await api('/v1/tasks')).json.items.map((i: any) => i.id)).toEqual([image.json.id]);
    expect((await api('/v1/videos')).json.data.map((v: any) => v.id)).toEqual([id]);
  }, 90_000);

  it('pages exactly across ties in both orders; first_id, last_id and has_more describe each page', async () => {
    const key = newKey();
    const owner = ownerOf(key);
    const t = now();
    // 23 videos over 4 seconds: most share a created_at with others.
    const records = Array.from({ length: 23 }, (_, i) => videoRecord(owner, { created_at: t - (i % 4) }));
    for (const r of records) expect(await kiln.api.store.transition(r)).toBe(true);
    const desc = [...records].sort((a, b) => b.created_at - a.created_at || (a.id < b.id ? 1 : -1)).map((r) => r.id);

    const down = await walk(key, 'limit=5');
    expect(down.ids).toEqual(desc);
    expect(down.pages.map((p) => p.data.length)).toEqual([5, 5, 5, 5, 3]);
    expect(down.pages.map((p) => p.has_more)).toEqual([true, true, true, true, false]);
    for (const p of down.pages) {
      expect(p.first_id).toBe(p.data[0].id);
      expect(p.last_id).toBe(p.data.at(-1).id);
    }
    expect((await walk(key, 'limit=5&order=asc')).ids).toEqual([...desc].reverse());
    // A page that ends exactly at the last video says there is no more.
    const whole = await walk(key, 'limit=23');
    expect(whole.pages).toHaveLength(1);
    expect(whole.pages[0].has_more).toBe(false);
    // The default page is 20, newest first.
    const first = await http(kiln.baseUrl, key)('/v1/videos');
    expect(first.json.data.map((v: any) => v.id)).toEqual(desc.slice(0, 20));
    expect(first.json.has_more).toBe(true);
    // Items are the stored poll views.
    const one = await http(kiln.baseUrl, key)(`/v1/videos/${desc[3]}`);
    expect(first.json.data[3]).toEqual(one.json);
  });

  it("shows only the caller's videos of the last 3 days; a cursor must be one of them", async () => {
    const keyA = newKey();
    const keyB = newKey();
    const mine = videoRecord(ownerOf(keyA), { status: 'succeeded', progress: 100, completed_at: now() });
    const old = videoRecord(ownerOf(keyA), { created_at: now() - 3 * 86400 - 60 });
    const theirs = videoRecord(ownerOf(keyB));
    for (const r of [mine, old, theirs]) await kiln.api.store.transition(r);
    const a = http(kiln.baseUrl, keyA);
    const b = http(kiln.baseUrl, keyB);
    expect((await a('/v1/videos')).json.data.map((v: any) => v.id)).toEqual([mine.id]);
    expect((await b('/v1/videos')).json.data.map((v: any) => v.id)).toEqual([theirs.id]);
    const empty = await http(kiln.baseUrl, newKey())('/v1/videos');
    expect(empty.json).toEqual({ object: 'list', data: [], first_id: null, last_id: null, has_more: false });
    // Another owner's id, an id never issued, and an image task's id are refused as cursors, clearly.
    for (const after of [theirs.id, `video_${'0'.repeat(32)}`]) {
      const res = await a(`/v1/videos?after=${after}`);
      expect(res.status).toBe(400);
      expect(res.json.error.code).toBe('invalid_request');
      expect(res.json.error.message).toContain(`after: ${after} is not one of your videos`);
    }
    expect((await a(`/v1/videos?after=${mine.id}`)).json.data).toEqual([]);
  });

  it('refuses limits and cursors outside the contract with 400, at the edges and one past them', async () => {
    const api = http(kiln.baseUrl, KEY_A);
    for (const q of ['limit=1', 'limit=100', 'order=asc', 'order=desc']) {
      expect((await api(`/v1/videos?${q}`)).status, q).toBe(200);
    }
    for (const q of [
      'limit=0',
      'limit=101',
      'limit=abc',
      'limit=5.0',
      'limit=',
      'after=task_x',
      'after=video_12',
      'order=up',
    ]) {
      const res = await api(`/v1/videos?${q}`);
      expect(res.status, q).toBe(400);
      expect(res.json.error.code, q).toBe('invalid_request');
    }
  });

  it('lists a record written before views were stored', async () => {
    const key = newKey();
    const r = videoRecord(ownerOf(key));
    await kiln.api.redis.hset(kiln.api.store.taskKey(r.id), 'j', JSON.stringify(r));
    await kiln.api.redis.zadd(
      kiln.api.store.ownerKey(r.owner, 'video'),
      0,
      `${String(r.created_at).padStart(10, '0')}:${r.id}`,
    );
    const page = await http(kiln.baseUrl, key)('/v1/videos');
    expect(page.json.data).toEqual([expect.objectContaining({ id: r.id, status: 'in_progress', progress: 40 })]);
  });

  it('the client lists a page and iterates every page', async () => {
    const key = newKey();
    const owner = ownerOf(key);
    const records = Array.from({ length: 7 }, (_, i) => videoRecord(owner, { created_at: now() - i }));
    for (const r of records) await kiln.api.store.transition(r);
    const client = new KilnClient({ baseURL: kiln.baseUrl, apiKey: key });
    const page = await client.videos.listPage({ limit: 3 });
    expect(page.data.map((v) => v.id)).toEqual(records.slice(0, 3).map((r) => r.id));
    expect(page.has_more).toBe(true);
    const next = await client.videos.listPage({ limit: 3, after: page.last_id! });
    expect(next.data.map((v) => v.id)).toEqual(records.slice(3, 6).map((r) => r.id));
    const all = [];
    for await (const v of client.videos.list({ limit: 2 })) all.push(v.id);
    expect(all).toEqual(records.map((r) => r.id));
    // A client of another owner sees none of them.
    const other = new KilnClient({ baseURL: kiln.baseUrl, apiKey: KEY_B });
    const theirs = [];
    for await (const v of other.videos.list()) theirs.push(v.id);
    expect(theirs.filter((id) => records.some((r) => r.id === id))).toEqual([]);
  });

  it('`kiln videos list` prints a page, or every page with --all', async () => {
    const key = newKey();
    const records = Array.from({ length: 3 }, (_, i) => videoRecord(ownerOf(key), { created_at: now() - i }));
    for (const r of records) await kiln.api.store.transition(r);
    const cli = (args: string[]) =>
      new Promise<{ code: number; stdout: string }>((resolve) => {
        const env = { ...process.env, KILN_BASE_URL: kiln.baseUrl, KILN_API_KEY: key, KILN_CLI_FROM_SOURCE: '1' };
        execFile(process.execPath, ['bin/kiln.js', ...args], { env, timeout: 45_000 }, (err, stdout) =>
          resolve({ code: err ? Number(err.code ?? -1) : 0, stdout }),
        );
      });
    const page = await cli(['videos', 'list', '--json', '--limit', '2']);
    expect(page.code).toBe(0);
    expect(JSON.parse(page.stdout).map((v: any) => v.id)).toEqual(records.slice(0, 2).map((r) => r.id));
    const all = await cli(['videos', 'list', '--json', '--limit', '2', '--all']);
    expect(JSON.parse(all.stdout).map((v: any) => v.id)).toEqual(records.map((r) => r.id));
    const text = await cli(['videos', 'list', '--after', records[0].id]);
    expect(
      text.stdout
        .trim()
        .split('\n')
        .map((l) => l.split(' ')[0]),
    ).toEqual([records[1].id, records[2].id]);
  }, 60_000);
});
