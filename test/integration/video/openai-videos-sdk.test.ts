// The whole OpenAI videos resource through the unmodified `openai` SDK (only its base URL and key
// set), on a real Kiln: create → retrieve → downloadContent (video and thumbnail) → delete, remix
// refused, another owner's video not found, and an uncertain video as OpenAI's `failed` with
// `error.code: "uncertain"`, so the SDK's pollers stop. Two API processes: a video deleted through
// one is gone from the other's memory at once (the deletion feed, src/tasks/deletion-feed.ts).
import OpenAI, { APIError, BadRequestError, ConflictError, NotFoundError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drop } from '../providers/openai-videos/fake-openai-videos.js';
import { KEY_A, KEY_B, startKiln, type Kiln } from '../../support/kiln.js';
import { useVideoKiln, type VideoKilnFile } from './video-kiln.js';

let f: VideoKilnFile;
useVideoKiln((file) => (f = file));
/** A second API process on the same Redis and Temporal (no workers). */
let other: Kiln;
beforeAll(async () => {
  other = await startKiln({ workers: false, env: { ...f.kiln.env, FINISHED_VIEWS_CACHE_MB: '16' } });
}, 120_000);
afterAll(() => other?.stop());

const sdk = (key = KEY_A, base = f.kiln.baseUrl) => new OpenAI({ apiKey: key, baseURL: `${base}/v1`, maxRetries: 0 });

async function completed(client = sdk()) {
  const created = await client.videos.create({
    model: 'v-local',
    prompt: 'a kiln at dusk',
    seconds: '2' as never,
    size: '320x180' as never,
  });
  expect(created).toMatchObject({
    object: 'video',
    status: 'queued',
    model: 'v-local',
    remixed_from_video_id: null,
    expires_at: null,
  });
  let v = created;
  for (let i = 0; i < 300 && (v.status === 'queued' || v.status === 'in_progress'); i++) {
    await new Promise((r) => setTimeout(r, 100));
    v = await client.videos.retrieve(created.id);
  }
  expect(v.status, JSON.stringify(v)).toBe('completed');
  return v;
}

describe('the OpenAI SDK, unmodified', () => {
  it('create → retrieve → downloadContent (video, thumbnail) → delete', async () => {
    const client = sdk();
    const v = await completed(client);
    expect(v.progress).toBe(100);
    // expires_at: when Kiln stops serving it, its record's retention after it finished.
    const retention = f.kiln.config.retentionSeconds;
    expect(v.expires_at! - v.completed_at!).toBeGreaterThanOrEqual(retention - 2);
    expect(v.expires_at! - v.completed_at!).toBeLessThanOrEqual(retention + 2);

    const mp4 = Buffer.from(await (await client.videos.downloadContent(v.id)).arrayBuffer());
    expect(mp4.subarray(4, 8).toString('latin1')).toBe('ftyp');
    const jpeg = Buffer.from(await (await client.videos.downloadContent(v.id, { variant: 'thumbnail' })).arrayBuffer());
    expect(jpeg.subarray(0, 3).toString('hex')).toBe('ffd8ff');

    // Another owner: not found, for every call (nothing deleted).
    const stranger = sdk(KEY_B);
    await expect(stranger.videos.retrieve(v.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(stranger.videos.delete(v.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(stranger.videos.downloadContent(v.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(stranger.videos.remix(v.id, { prompt: 'again' })).rejects.toBeInstanceOf(NotFoundError);

    // Remix: refused with a clear error for the owner's own video.
    const remix = await client.videos.remix(v.id, { prompt: 'again' }).catch((e: unknown) => e);
    expect(remix).toBeInstanceOf(BadRequestError);
    expect((remix as APIError).message).toMatch(/Remix is not supported/);

    expect(await client.videos.delete(v.id)).toEqual({ id: v.id, object: 'video.deleted', deleted: true });
    await expect(client.videos.retrieve(v.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(client.videos.downloadContent(v.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(client.videos.delete(v.id)).rejects.toBeInstanceOf(NotFoundError);
    const listed: string[] = [];
    for await (const item of client.videos.list({ limit: 100 })) listed.push(item.id);
    expect(listed).not.toContain(v.id);
  });

  it('an unfinished video cannot be deleted: 409, as the SDK raises it', async () => {
    const client = sdk();
    const v = await client.videos.create({
      model: 'v-local',
      prompt: 'slow',
      seconds: '2' as never,
      size: '320x180' as never,
    });
    const err = await client.videos.delete(v.id).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConflictError);
    expect((err as APIError).message).toMatch(/only a finished video can be deleted/);
    await f.calls.finish(v.id);
  });

  it('uncertain: `failed` with error.code "uncertain" and uncertain_reason, so a poller stops', async () => {
    f.fake.enqueueCreate(drop());
    const client = sdk();
    const v = await client.videos.create({ model: 'v-oa', prompt: 'lost answer' });
    let seen = v;
    for (let i = 0; i < 200 && (seen.status === 'queued' || seen.status === 'in_progress'); i++) {
      await new Promise((r) => setTimeout(r, 100));
      seen = await client.videos.retrieve(v.id);
    }
    expect(seen.status).toBe('failed');
    expect(seen.error?.code).toBe('uncertain');
    expect(seen.error?.message).toMatch(/Idempotency-Key/);
    expect((seen as unknown as { uncertain_reason: string }).uncertain_reason).toBeTruthy();
    // Exactly one create reached the upstream: never resent.
    expect(f.fake.creates()).toHaveLength(1);
  });
});

describe('deletion across API processes', () => {
  it("a video deleted through one process is gone from the other's memory within a second", async () => {
    const v = await completed();
    const there = sdk(KEY_A, other.baseUrl);
    // Read twice on the other process: the second answer comes from its memory.
    expect((await there.videos.retrieve(v.id)).status).toBe('completed');
    expect((await there.videos.retrieve(v.id)).status).toBe('completed');
    expect(other.api.store.finished?.get(v.id, await ownerOf(v.id), 'video')).toBeTruthy();
    await sdk().videos.delete(v.id);
    const start = Date.now();
    let gone = false;
    while (!gone && Date.now() - start < 1000) {
      gone = await there.videos.retrieve(v.id).then(
        () => false,
        (e: unknown) => e instanceof NotFoundError,
      );
    }
    expect(gone).toBe(true);
  });
});

async function ownerOf(id: string): Promise<string> {
  return ((await f.kiln.api.store.get(id)) as { owner: string } | null)?.owner ?? '';
}
