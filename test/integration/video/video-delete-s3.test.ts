// DELETE /v1/videos/{id} with BLOB_STORE=s3, against moto (a real S3-compatible server): the video
// object and its stills leave the bucket, their URLs stop serving, and a delete whose S3 removal
// fails (S3 refusing the delete, or away) answers 503 and completes when repeated once S3 is back.
// Kiln reaches moto through a small HTTP proxy here, so S3 can refuse or go away and come back with
// the bucket's objects intact (moto keeps them in memory only: a restarted moto has none).
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { CreateBucketCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/env.js';
import { createBlobs, S3BlobStore } from '../../../src/blobs/stores.js';
import { startMoto } from '../../support/moto.js';
import { KEY_A, KEY_B, startKiln, type Kiln } from '../../support/kiln.js';
import { videoApi } from './video-kiln.js';

const S3_ENV = {
  S3_REGION: 'us-east-1',
  S3_ACCESS_KEY_ID: 'test-access-key',
  S3_SECRET_ACCESS_KEY: 'test-secret-key-3f9a',
  S3_PREFIX: 'kiln/',
};
const BUCKET = 'kiln-video-delete';
const BODY = { model: 'v-local', prompt: 'a kiln at dusk', seconds: '2', size: '320x180' };

/** An S3 error reply: its status and code. */
type S3Error = { status: number; code: string };
const ACCESS_DENIED: S3Error = { status: 403, code: 'AccessDenied' };

/**
 * An HTTP proxy in front of moto. `answer` may answer a request itself with an S3 error (403
 * AccessDenied: a bucket whose policy refuses it); `down()` stops listening (S3 away: connections
 * are refused) and `up()` listens again on the same port.
 */
interface S3Proxy {
  endpoint: string;
  answer: ((req: IncomingMessage) => Promise<S3Error | null> | S3Error | null) | null;
  /** Requests seen, as "METHOD path" (no query: the SDK adds one, ?x-id=DeleteObject). */
  seen: string[];
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

const pathOf = (req: IncomingMessage) => (req.url ?? '').split('?')[0];

async function s3Proxy(target: string): Promise<S3Proxy> {
  const to = new URL(target);
  const sockets = new Set<Socket>();
  const proxy: S3Proxy = {
    endpoint: '',
    answer: null,
    seen: [],
    down: () => stop(),
    up: () => listen(port),
    close: () => stop(),
  };
  let server: Server;
  const listen = (p: number) => {
    server = createServer(async (req, res) => {
      proxy.seen.push(`${req.method} ${pathOf(req)}`);
      const error = await proxy.answer?.(req);
      if (error) {
        req.resume();
        res.writeHead(error.status, { 'content-type': 'application/xml' });
        res.end(
          `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${error.code}</Code><Message>${error.code}</Message></Error>`,
        );
        return;
      }
      // Host stays as the client sent it: the request's signature covers it.
      const up = request(
        { host: to.hostname, port: to.port, method: req.method, path: req.url, headers: req.headers },
        (r) => {
          res.writeHead(r.statusCode ?? 502, r.headers);
          r.pipe(res);
        },
      );
      up.on('error', () => res.destroy());
      req.pipe(up);
    });
    server.on('connection', (s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    return new Promise<void>((r) => server.listen(p, '127.0.0.1', r));
  };
  const stop = () =>
    new Promise<void>((r) => {
      for (const s of sockets) s.destroy();
      server.close(() => r());
    });
  await listen(0);
  const port = (server!.address() as AddressInfo).port;
  proxy.endpoint = `http://127.0.0.1:${port}`;
  return proxy;
}

let moto: Awaited<ReturnType<typeof startMoto>>;
let proxy: S3Proxy;
let s3: S3BlobStore;
let kiln: Kiln;
let calls: ReturnType<typeof videoApi>;

beforeAll(async () => {
  moto = await startMoto();
  proxy = await s3Proxy(moto.endpoint);
  // The test's own client speaks to moto directly (as s3-blobs.test.ts does).
  const { blobs } = createBlobs(
    loadConfig({
      KILN_SECRET: 'x'.repeat(32),
      BLOB_STORE: 's3',
      S3_BUCKET: BUCKET,
      S3_ENDPOINT: moto.endpoint,
      ...S3_ENV,
    }),
  );
  s3 = blobs as S3BlobStore;
  await s3.client.send(new CreateBucketCommand({ Bucket: BUCKET }));
  kiln = await startKiln({
    env: { BLOB_STORE: 's3', S3_BUCKET: BUCKET, S3_ENDPOINT: proxy.endpoint, ...S3_ENV },
    models: [
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
    ],
  });
  calls = videoApi(kiln);
}, 120_000);
afterAll(async () => {
  await kiln?.stop();
  await proxy?.close();
  moto?.stop();
});

/** The bucket's keys, as moto lists them. */
async function keys(): Promise<string[]> {
  const out = await s3.client.send(new ListObjectsV2Command({ Bucket: BUCKET }));
  return (out.Contents ?? []).map((o) => o.Key!);
}

/** The object key behind a presigned URL Kiln returned (path-style: /bucket/key). */
const keyOf = (url: string) => decodeURIComponent(new URL(url).pathname).slice(`/${BUCKET}/`.length);

const content = (id: string, variant?: string) =>
  calls.api()(`/v1/videos/${id}/content${variant ? `?variant=${variant}` : ''}`);
const del = (id: string) => calls.api()(`/v1/videos/${id}`, { method: 'DELETE' });

/** A finished local video and its thumbnail, both in the bucket: their URLs and keys. */
async function finishedWithThumbnail() {
  const id = await calls.createOk(BODY);
  const v = await calls.finish(id);
  expect(v.status, JSON.stringify(v)).toBe('completed');
  const video = await content(id);
  expect(video.status, video.text).toBe(302);
  const thumb = await content(id, 'thumbnail');
  expect(thumb.status, thumb.text).toBe(302);
  const urls = { video: video.headers.get('location')!, thumbnail: thumb.headers.get('location')! };
  expect(urls.video.startsWith(`${proxy.endpoint}/${BUCKET}/kiln/`), urls.video).toBe(true);
  const k = { video: keyOf(urls.video), thumbnail: keyOf(urls.thumbnail) };
  expect(k.video).toMatch(/^kiln\/[a-f0-9]{32}\.mp4$/);
  expect(k.thumbnail).toMatch(/^kiln\/[a-f0-9]{32}\.jpg$/);
  expect(await keys()).toEqual(expect.arrayContaining([k.video, k.thumbnail]));
  expect((await fetch(urls.thumbnail)).status).toBe(200);
  return { id, urls, keys: k };
}

/** Gone: 404 to a poll, a second delete and every content variant; the stored URLs no longer serve. */
async function expectGone(id: string, urls: Record<string, string>, k: Record<string, string>) {
  const listed = await keys();
  for (const key of Object.values(k)) expect(listed).not.toContain(key);
  for (const url of Object.values(urls)) expect((await fetch(url)).status, url).toBe(404);
  expect((await calls.api()(`/v1/videos/${id}`)).status).toBe(404);
  for (const v of [undefined, 'thumbnail', 'spritesheet']) expect((await content(id, v)).status, v).toBe(404);
  expect((await calls.api()('/v1/videos?limit=100')).json.data.map((v: any) => v.id)).not.toContain(id);
  const twice = await del(id);
  expect(twice.status, twice.text).toBe(404);
  expect(twice.json.error.code).toBe('not_found');
}

describe('DELETE /v1/videos/{id} with BLOB_STORE=s3', () => {
  it('removes the video object and its still from the bucket; their URLs stop serving; a second delete is 404', async () => {
    const v = await finishedWithThumbnail();
    proxy.seen.length = 0;
    const r = await del(v.id);
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual({ id: v.id, object: 'video.deleted', deleted: true });
    // The delete removed them (the spritesheet, never made, is deleted as an absent key: no error).
    for (const key of Object.values(v.keys)) expect(proxy.seen).toContain(`DELETE /${BUCKET}/${key}`);
    await expectGone(v.id, v.urls, v.keys);
  });

  it('answers 503 while S3 refuses the delete, and completes when repeated', async () => {
    const v = await finishedWithThumbnail();
    proxy.answer = (req) => (req.method === 'DELETE' ? ACCESS_DENIED : null);
    try {
      const refused = await del(v.id);
      expect(refused.status, refused.text).toBe(503);
      expect(refused.json.error.code).toBe('service_unavailable');
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      proxy.answer = null;
    }
    // Nothing is gone: the video, its files and its list entry are all still there.
    expect(await keys()).toEqual(expect.arrayContaining(Object.values(v.keys)));
    expect((await calls.api()(`/v1/videos/${v.id}`)).json.status).toBe('completed');
    expect((await content(v.id)).headers.get('location')).toBe(v.urls.video);
    expect((await calls.api()('/v1/videos?limit=100')).json.data.map((x: any) => x.id)).toContain(v.id);

    const again = await del(v.id);
    expect(again.status, again.text).toBe(200);
    await expectGone(v.id, v.urls, v.keys);
  });

  it('answers 503 when S3 refuses part of the files, and completes when repeated', async () => {
    const v = await finishedWithThumbnail();
    // The video's delete is refused, the still's goes through.
    proxy.answer = (req) =>
      req.method === 'DELETE' && pathOf(req) === `/${BUCKET}/${v.keys.video}` ? ACCESS_DENIED : null;
    try {
      const r = await del(v.id);
      expect(r.status, r.text).toBe(503);
      expect(r.json.error.code).toBe('service_unavailable');
    } finally {
      proxy.answer = null;
    }
    const left = await keys();
    expect(left).toContain(v.keys.video);
    expect(left).not.toContain(v.keys.thumbnail);
    // Until the delete completes, the video is there; its thumbnail is made again on request.
    expect((await calls.api()(`/v1/videos/${v.id}`)).json.status).toBe('completed');
    const thumb = await content(v.id, 'thumbnail');
    expect(thumb.status, thumb.text).toBe(302);
    expect(keyOf(thumb.headers.get('location')!)).toBe(v.keys.thumbnail);

    expect((await del(v.id)).status).toBe(200);
    await expectGone(v.id, v.urls, v.keys);
  });

  it('answers 503 while S3 is away, and completes when repeated after it is back', async () => {
    const v = await finishedWithThumbnail();
    await proxy.down();
    try {
      const r = await del(v.id);
      expect(r.status, r.text).toBe(503);
      expect(r.json.error.code).toBe('service_unavailable');
      // The record is untouched: the video still answers (from Redis; S3 is not asked for a poll).
      expect((await calls.api()(`/v1/videos/${v.id}`)).json.status).toBe('completed');
    } finally {
      await proxy.up();
    }
    expect(await keys()).toEqual(expect.arrayContaining(Object.values(v.keys)));
    const again = await del(v.id);
    expect(again.status, again.text).toBe(200);
    await expectGone(v.id, v.urls, v.keys);
  });

  it('completes on a store that answers 404 NoSuchKey to the delete of an absent key (GCS), not of an absent bucket', async () => {
    const v = await finishedWithThumbnail();
    // The spritesheet was never made: its delete is of an absent key.
    const absent = async (req: IncomingMessage) => {
      const key = pathOf(req).slice(`/${BUCKET}/`.length);
      return req.method === 'DELETE' && !(await keys()).includes(key) ? { status: 404, code: 'NoSuchKey' } : null;
    };
    proxy.answer = (req) => (req.method === 'DELETE' ? { status: 404, code: 'NoSuchBucket' } : null);
    try {
      const r = await del(v.id);
      expect(r.status, r.text).toBe(503);
      proxy.seen.length = 0;
      proxy.answer = absent;
      const ok = await del(v.id);
      expect(ok.status, ok.text).toBe(200);
    } finally {
      proxy.answer = null;
    }
    // The video, the thumbnail and the spritesheet (a removal of the refused attempt may land late).
    expect(new Set(proxy.seen.filter((s) => s.startsWith('DELETE '))).size).toBe(3);
    await expectGone(v.id, v.urls, v.keys);
  });

  it("answers another owner's delete 404 and leaves the objects", async () => {
    const v = await finishedWithThumbnail();
    const other = await calls.api(KEY_B)(`/v1/videos/${v.id}`, { method: 'DELETE' });
    expect(other.status).toBe(404);
    expect(await keys()).toEqual(expect.arrayContaining(Object.values(v.keys)));
    expect((await calls.api(KEY_A)(`/v1/videos/${v.id}`, { method: 'DELETE' })).status).toBe(200);
    await expectGone(v.id, v.urls, v.keys);
  });
});
