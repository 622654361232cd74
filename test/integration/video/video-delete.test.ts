// DELETE /v1/videos/{id} and the content variants (thumbnail, spritesheet), on a real Kiln: real
// Redis and Temporal, and the local provider's real MP4s (ffmpeg makes the stills). A deleted video
// must stay gone through every path that reads Temporal: the poll fallback, the reconciler and a
// read-model rebuild.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readFromTemporal } from '../../../src/tasks/fallback.js';
import { reconcileTask } from '../../../src/worker/reconcile.js';
import { VIDEO_FALLBACK } from '../../../src/video/service.js';
import { eventually, KEY_A, KEY_B, silent } from '../../support/kiln.js';
import { useVideoKiln, type VideoKilnFile } from './video-kiln.js';

let f: VideoKilnFile;
useVideoKiln((file) => (f = file));

const BODY = { model: 'v-local', prompt: 'a kiln at dusk', seconds: '2', size: '320x180' };
const blobDir = () => f.kiln.config.blobDir;
const blobFiles = () => readdirSync(blobDir()).filter((n) => !n.startsWith('.'));
const fileOf = (location: string) => location.slice(location.lastIndexOf('/') + 1);

async function finishedVideo(): Promise<string> {
  const id = await f.calls.createOk(BODY);
  const v = await f.calls.finish(id);
  expect(v.status, JSON.stringify(v)).toBe('completed');
  return id;
}

async function content(id: string, variant?: string, key = KEY_A) {
  const q = variant === undefined ? '' : `?variant=${encodeURIComponent(variant)}`;
  return f.calls.api(key)(`/v1/videos/${id}/content${q}`, { redirect: 'manual' });
}

/** The bytes behind a content redirect. */
async function follow(r: { status: number; headers: Headers }): Promise<Buffer> {
  expect(r.status).toBe(302);
  const res = await fetch(r.headers.get('location')!);
  expect(res.status).toBe(200);
  return Buffer.from(await res.arrayBuffer());
}

const isJpeg = (b: Buffer) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff;

describe('content variants', () => {
  it('thumbnail: a JPEG made once, then served from the stored blob', async () => {
    const id = await finishedVideo();
    const first = await content(id, 'thumbnail');
    const jpeg = await follow(first);
    expect(isJpeg(jpeg), jpeg.subarray(0, 4).toString('hex')).toBe(true);
    const name = fileOf(first.headers.get('location')!);
    expect(name).toMatch(/^[a-f0-9]{32}\.jpg$/);
    const made = statSync(join(blobDir(), name));
    const again = await content(id, 'thumbnail');
    expect(again.headers.get('location')).toBe(first.headers.get('location'));
    // No second ffmpeg run: the stored file was not written again (a put renames a new file in).
    const now = statSync(join(blobDir(), name));
    expect([now.ino, now.mtimeMs]).toEqual([made.ino, made.mtimeMs]);
  });

  it('spritesheet: a JPEG grid, stored beside the video; video is the default', async () => {
    const id = await finishedVideo();
    const sheet = await follow(await content(id, 'spritesheet'));
    expect(isJpeg(sheet)).toBe(true);
    const video = await follow(await content(id));
    expect(video.subarray(4, 8).toString('latin1')).toBe('ftyp');
    expect((await content(id, 'video')).headers.get('location')).toBe((await content(id)).headers.get('location'));
  });

  it('refuses an unknown variant (400, listing the allowed ones) and an unfinished video (409)', async () => {
    const id = await f.calls.createOk(BODY);
    const bad = await content(id, 'poster');
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe('invalid_request');
    expect(bad.json.error.message).toContain('video, thumbnail, spritesheet');
    const early = await content(id, 'thumbnail');
    expect(early.status).toBe(409);
    expect(early.json.error.code).toBe('task_not_ready');
    await f.calls.finish(id);
  });
});

describe('DELETE /v1/videos/{id}', () => {
  it('deletes a finished video: its files, its record, its list entry', async () => {
    const id = await finishedVideo();
    const videoName = fileOf((await content(id)).headers.get('location')!);
    const stills = [
      fileOf((await content(id, 'thumbnail')).headers.get('location')!),
      fileOf((await content(id, 'spritesheet')).headers.get('location')!),
    ];
    expect(blobFiles()).toEqual(expect.arrayContaining([videoName, ...stills]));
    expect((await f.calls.api()('/v1/videos?limit=100')).json.data.map((v: any) => v.id)).toContain(id);

    const del = await f.calls.api()(`/v1/videos/${id}`, { method: 'DELETE' });
    expect(del.status, del.text).toBe(200);
    expect(del.json).toEqual({ id, object: 'video.deleted', deleted: true });

    for (const name of [videoName, ...stills]) expect(blobFiles()).not.toContain(name);
    await expectGone(id);
    // Deleting twice: 404, as OpenAI answers.
    const twice = await f.calls.api()(`/v1/videos/${id}`, { method: 'DELETE' });
    expect(twice.status).toBe(404);
    expect(twice.json.error.code).toBe('not_found');
  });

  it('stays deleted through the fallback read, a late write, the reconciler and a read-model rebuild', async () => {
    const id = await finishedVideo();
    const record = (await f.kiln.api.store.get(id)) as any;
    expect((await f.calls.api()(`/v1/videos/${id}`, { method: 'DELETE' })).status).toBe(200);
    const { client: temporal, store } = f.kiln.api;

    expect((await readFromTemporal({ temporal, store }, VIDEO_FALLBACK, record.owner, [id])).size).toBe(0);
    // A worker's late write of the finished record (or a fallback's write-back) is refused.
    expect(await store.transition(record)).toBe(false);
    expect(await store.restore(record)).toBe(false);
    const deps = { temporal, store, config: f.kiln.config, log: silent };
    await store.reserveOnce(id, Number.MAX_SAFE_INTEGER);
    expect(await reconcileTask(deps, id)).toBe(false);
    await store.release(id);
    await expectGone(id);

    await f.kiln.api.rebuild.start({ restart: true });
    const done = await eventually(
      () => f.kiln.api.rebuild.progress(),
      (p) => p.state === 'done',
      60_000,
    );
    expect(done.state).toBe('done');
    await expectGone(id);
  });

  it('refuses an unfinished video (409 task_not_ready), which stays', async () => {
    const id = await f.calls.createOk(BODY);
    const r = await f.calls.api()(`/v1/videos/${id}`, { method: 'DELETE' });
    expect(r.status, r.text).toBe(409);
    expect(r.json.error.code).toBe('task_not_ready');
    expect(r.json.error.message).toContain(`POST /v1/videos/${id}/cancel`);
    expect((await f.calls.api()(`/v1/videos/${id}`)).status).toBe(200);
    await f.calls.finish(id);
    expect((await f.calls.api()(`/v1/videos/${id}`, { method: 'DELETE' })).status).toBe(200);
  });

  it("answers another owner's, an unknown and a malformed id 404, as GET does", async () => {
    const id = await finishedVideo();
    const other = await f.calls.api(KEY_B)(`/v1/videos/${id}`, { method: 'DELETE' });
    expect(other.status).toBe(404);
    expect(other.json).toEqual((await f.calls.api(KEY_B)(`/v1/videos/${id}`)).json);
    expect((await f.calls.api()(`/v1/videos/${id}`)).json.status).toBe('completed');
    expect((await content(id)).status).toBe(302);
    for (const unknown of [`video_${'0'.repeat(32)}`, 'video_x', 'task_1']) {
      const r = await f.calls.api()(`/v1/videos/${unknown}`, { method: 'DELETE' });
      expect(r.status, unknown).toBe(404);
      expect(r.json.error.code).toBe('not_found');
    }
  });

  it('refuses an Idempotency-Key reused after its video was deleted (422)', async () => {
    const headers = { 'idempotency-key': `del-${Date.now()}` };
    const first = await f.calls.api()('/v1/videos', { method: 'POST', json: BODY, headers });
    expect(first.status, first.text).toBe(200);
    await f.calls.finish(first.json.id);
    expect((await f.calls.api()(`/v1/videos/${first.json.id}`, { method: 'DELETE' })).status).toBe(200);
    const again = await f.calls.api()('/v1/videos', { method: 'POST', json: BODY, headers });
    expect(again.status, again.text).toBe(422);
    expect(again.json.error.code).toBe('idempotency_key_reused');
  });
});

/** 404 to a poll, its content (every variant) and a cancel; absent from the list. */
async function expectGone(id: string): Promise<void> {
  const api = f.calls.api();
  expect((await api(`/v1/videos/${id}`)).status).toBe(404);
  for (const v of [undefined, 'thumbnail', 'spritesheet']) expect((await content(id, v)).status, v).toBe(404);
  expect((await api(`/v1/videos/${id}/cancel`, { method: 'POST' })).status).toBe(404);
  expect((await api('/v1/videos?limit=100')).json.data.map((v: any) => v.id)).not.toContain(id);
  const batch = await api('/v1/tasks/batch-get', { method: 'POST', json: { ids: [id] } });
  expect(JSON.stringify(batch.json)).not.toContain('"completed"');
}
