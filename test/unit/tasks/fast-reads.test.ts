// Single-task polls are answered below Koa (src/tasks/fast-reads.ts). Two things must hold: the fast
// path takes only the requests it is meant for (everything else reaches Koa untouched), and what it
// answers is byte for byte what Koa answers for the same request (status, body, headers, log line).
// A poll with an Origin header is Koa's (no CORS applies to /v1), so each case is asked both ways.
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { z } from 'zod';
// Koa's own query parser (an internal module, pinned by the lockfile): the fast path must parse alike.
const koaSearchParams = createRequire(import.meta.url)('koa/lib/search-params.js') as { parse(s: string): object };
import { ownerOfKey } from '../../../src/infra/callers.js';
import { fastReads, parseQuery, type FastList, type FastRead } from '../../../src/tasks/fast-reads.js';
import { requestObserver } from '../../../src/http/observe.js';
import { PassthroughAuth } from '../../../src/infra/callers.js';
import { KilnError } from '../../../src/shared/errors.js';
import type { ImageTaskRecord } from '../../../src/shared/image-task.js';
import type { VideoTaskRecord } from '../../../src/shared/video-task.js';
import {
  EXPLODING_KEY,
  INTERNAL_DETAIL,
  KEY,
  request,
  startUnitApp,
  type Reply,
  type UnitApp,
} from '../../support/unit-app.js';

const hex = () => randomBytes(16).toString('hex');
const now = Math.floor(Date.now() / 1000);
/** A new image task's record, finished when `succeeded`. */
const imageRecord = (status: ImageTaskRecord['status'], owner: string): ImageTaskRecord => ({
  id: `task_${hex()}`,
  kind: 'image',
  owner,
  model: 'kiln-image-1',
  status,
  created_at: now,
  finished_at: status === 'succeeded' ? now : null,
  candidates: [],
  error: null,
});
/** Headers that differ between any two answers whatever path served them. */
const VARYING = new Set(['date', 'x-request-id']);
/** Sent to make a request Koa's. */
const KOA_ORIGIN = 'http://koa.example';

function headersOf(r: Reply): Record<string, string> {
  return Object.fromEntries([...r.headers].filter(([k]) => !VARYING.has(k)));
}

/** The same GET through the fast path and through Koa: the two answers must not differ. */
async function same(app: UnitApp, path: string, opts: Parameters<typeof request>[3] = {}): Promise<Reply> {
  const fast = await request(app, 'GET', path, opts);
  const koa = await request(app, 'GET', path, { ...opts, headers: { ...opts.headers, origin: KOA_ORIGIN } });
  expect(fast.status, fast.text).toBe(koa.status);
  expect(fast.text).toBe(koa.text);
  expect(headersOf(fast)).toEqual(headersOf(koa));
  expect(fast.headers.get('x-request-id')).toBeTruthy();
  return fast;
}

describe('answers of the fast path and of Koa', () => {
  let app: UnitApp;
  let owner: string;
  beforeAll(async () => {
    app = await startUnitApp({ RATE_LIMIT_TASK_MS: '0' });
    owner = ownerOfKey(app.config.ownerKey, KEY);
  });
  afterAll(async () => {
    await app?.close();
  });
  const image = (status: ImageTaskRecord['status'], who = owner) => imageRecord(status, who);

  it('a finished task: 200, the stored view, no Retry-After', async () => {
    const t = image('succeeded');
    await app.store.transition(t);
    const r = await same(app, `/v1/tasks/${t.id}`);
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ id: t.id, status: 'succeeded' });
    expect(r.headers.get('retry-after')).toBeNull();
    expect(r.headers.get('content-type')).toBe('application/json; charset=utf-8');
  });

  it('an unfinished task: Retry-After', async () => {
    const t = image('running');
    await app.store.transition(t);
    const r = await same(app, `/v1/tasks/${t.id}`);
    expect(r.json).toMatchObject({ id: t.id, status: 'running' });
    expect(r.headers.get('retry-after')).toBe(String(app.config.pollAfterSeconds));
  });

  it('a video, finished and unfinished', async () => {
    const video = (status: VideoTaskRecord['status']): VideoTaskRecord => ({
      id: `video_${hex()}`,
      kind: 'video',
      owner,
      model: 'kiln-video-1',
      status,
      progress: status === 'succeeded' ? 100 : 10,
      prompt: 'a kiln',
      seconds: '4',
      size: '720x1280',
      created_at: now,
      completed_at: status === 'succeeded' ? now : null,
      error: null,
    });
    for (const v of [video('succeeded'), video('running')]) {
      await app.store.transition(v);
      const r = await same(app, `/v1/videos/${v.id}`);
      expect(r.status, r.text).toBe(200);
      expect(r.json).toMatchObject({ id: v.id });
    }
  });

  it("another owner's task, an unknown id and a malformed one: the same 404", async () => {
    const theirs = image('succeeded', ownerOfKey(app.config.ownerKey, 'another-owner-key-000000'));
    await app.store.transition(theirs);
    for (const path of [
      `/v1/tasks/${theirs.id}`,
      `/v1/tasks/task_${hex()}`,
      '/v1/tasks/not-a-task-id',
      '/v1/videos/x',
    ]) {
      const r = await same(app, path);
      expect(r.status, path).toBe(404);
      expect(r.json.error.code).toBe('not_found');
    }
  });

  it('no key, a malformed key, and an authentication that fails inside: 401, 401, masked 500', async () => {
    const t = image('succeeded');
    await app.store.transition(t);
    expect((await same(app, `/v1/tasks/${t.id}`, { key: null })).status).toBe(401);
    expect((await same(app, `/v1/tasks/${t.id}`, { headers: { authorization: 'Bearer a b' }, key: null })).status).toBe(
      401,
    );
    const boom = await same(app, `/v1/tasks/${t.id}`, { key: EXPLODING_KEY });
    expect(boom.status).toBe(500);
    expect(boom.json.error.code).toBe('internal_error');
    expect(boom.text).not.toContain(INTERNAL_DETAIL);
  });

  it('list pages of tasks and videos, and every refusal of their queries', async () => {
    for (let i = 0; i < 3; i++) await app.store.transition(image('succeeded'));
    const paths = [
      '/v1/tasks',
      '/v1/tasks?',
      '/v1/tasks?limit=2',
      '/v1/tasks?limit=0',
      '/v1/tasks?limit=101',
      '/v1/tasks?limit=abc',
      '/v1/tasks?limit=1&limit=2',
      '/v1/tasks?days=4',
      '/v1/tasks?before_id=task_x',
      `/v1/tasks?before_created_at=${now + 1}&before_id=task_x`,
      '/v1/tasks?__proto__=1&limit=%32',
      '/v1/tasks?unknown=1',
      '/v1/videos',
      '/v1/videos?limit=1&order=asc',
      '/v1/videos?after=not-a-video',
      '/v1/videos?order=sideways',
    ];
    const statuses = [];
    for (const path of paths) statuses.push((await same(app, path)).status);
    expect(statuses).toContain(200);
    expect(statuses).toContain(400);
    expect((await same(app, '/v1/tasks?limit=2', { key: null })).status).toBe(401);
  });

  it("echoes a sane X-Request-Id, replaces an odd one, and logs the same request line as Koa's", async () => {
    const t = image('succeeded');
    await app.store.transition(t);
    const sane = await request(app, 'GET', `/v1/tasks/${t.id}`, { headers: { 'x-request-id': 'poll-1.a:b' } });
    expect(sane.headers.get('x-request-id')).toBe('poll-1.a:b');
    const odd = await request(app, 'GET', `/v1/tasks/${t.id}`, { headers: { 'x-request-id': 'a b' } });
    expect(odd.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    await request(app, 'GET', `/v1/tasks/${t.id}`, { headers: { 'x-request-id': 'poll-2', origin: KOA_ORIGIN } });
    const lines = app.logs().filter((l) => l.msg === 'request' && (l.reqId === 'poll-1.a:b' || l.reqId === 'poll-2'));
    expect(lines).toHaveLength(2);
    const [fast, koa] = lines.map(({ time: _t, ms: _ms, reqId: _r, pid: _p, ...rest }) => rest);
    expect(fast).toEqual(koa);
    expect(fast).toMatchObject({ method: 'GET', route: '/v1/tasks/:id', status: 200, taskId: t.id, owner });
  });

  it("logs a masked 500's error under the request id the client was sent, on both paths", async () => {
    const t = image('succeeded');
    await app.store.transition(t);
    const ask = (reqId: string, extra: Record<string, string> = {}) =>
      request(app, 'GET', `/v1/tasks/${t.id}`, { key: EXPLODING_KEY, headers: { 'x-request-id': reqId, ...extra } });
    const fast = await ask('boom-fast');
    const koa = await ask('boom-koa', { origin: KOA_ORIGIN });
    for (const [r, reqId] of [
      [fast, 'boom-fast'],
      [koa, 'boom-koa'],
    ] as const) {
      expect(r.status).toBe(500);
      expect(r.headers.get('x-request-id')).toBe(reqId);
      const errors = app.logs().filter((l) => l.msg === 'unhandled error' && l.reqId === reqId);
      expect(errors, reqId).toHaveLength(1);
      expect(errors[0]).toMatchObject({ taskId: t.id, route: '/v1/tasks/:id' });
      expect(JSON.stringify(errors[0])).toContain(INTERNAL_DETAIL);
    }
  });
});

describe('polls a process answers from memory (a known key, a finished task, no poll limit)', () => {
  let app: UnitApp;
  let owner: string;
  beforeAll(async () => {
    app = await startUnitApp({ RATE_LIMIT_TASK_MS: '0', FINISHED_VIEWS_CACHE_MB: '1' });
    owner = ownerOfKey(app.config.ownerKey, KEY);
  });
  afterAll(async () => {
    await app?.close();
  });
  const image = (status: ImageTaskRecord['status'], who = owner) => imageRecord(status, who);
  /** A poll, and how many store reads it made. */
  const poll = async (path: string, opts: Parameters<typeof request>[3] = {}) => {
    const before = app.store.reads;
    const r = await request(app, 'GET', path, opts);
    return { r, reads: app.store.reads - before };
  };

  it("answers a repeat poll with no store read: the same bytes, headers and log line as Koa's", async () => {
    const t = image('succeeded');
    await app.store.transition(t);
    const first = await poll(`/v1/tasks/${t.id}`);
    expect(first.reads).toBe(1);
    const again = await poll(`/v1/tasks/${t.id}`, { headers: { 'x-request-id': 'mem-1' } });
    expect(again.reads).toBe(0);
    const koa = await poll(`/v1/tasks/${t.id}`, { headers: { 'x-request-id': 'mem-koa', origin: KOA_ORIGIN } });
    expect(again.r.status).toBe(200);
    expect(again.r.text).toBe(first.r.text);
    expect(again.r.text).toBe(koa.r.text);
    expect(headersOf(again.r)).toEqual(headersOf(koa.r));
    expect(again.r.headers.get('x-request-id')).toBe('mem-1');
    const line = (id: string) => {
      const found = app.logs().filter((l) => l.msg === 'request' && l.reqId === id);
      expect(found, id).toHaveLength(1);
      const { time: _t, ms: _ms, reqId: _r, ...rest } = found[0];
      return rest;
    };
    expect(line('mem-1')).toEqual(line('mem-koa'));
    expect(line('mem-1')).toMatchObject({ route: '/v1/tasks/:id', status: 200, taskId: t.id, owner });
  });

  it('not a finished video: it can be deleted through another process, so Redis answers', async () => {
    const v: VideoTaskRecord = {
      id: `video_${hex()}`,
      kind: 'video',
      owner,
      model: 'kiln-video-1',
      status: 'succeeded',
      progress: 100,
      prompt: 'a kiln',
      seconds: '4',
      size: '720x1280',
      created_at: now,
      completed_at: now,
      error: null,
    };
    await app.store.transition(v);
    const first = await poll(`/v1/videos/${v.id}`);
    const again = await poll(`/v1/videos/${v.id}`);
    expect([first.reads, again.reads]).toEqual([1, 1]);
    expect(again.r.text).toBe(first.r.text);
    expect(again.r.json).toMatchObject({ id: v.id, status: 'completed' });
  });

  it("never answers from memory for another owner, a task's other kind, a missing or a failing key", async () => {
    const t = image('succeeded');
    await app.store.transition(t);
    expect((await poll(`/v1/tasks/${t.id}`)).reads).toBe(1);
    // Cached now; each of these must still get what Koa answers.
    const other = await poll(`/v1/tasks/${t.id}`, { key: 'another-owner-key-000000' });
    expect(other.r.status).toBe(404);
    expect(other.r.json.error.code).toBe('not_found');
    const asVideo = await poll(`/v1/videos/${t.id}`);
    expect(asVideo.r.status).toBe(404);
    expect((await poll(`/v1/tasks/${t.id}`, { key: null })).r.status).toBe(401);
    expect((await poll(`/v1/tasks/${t.id}`, { headers: { authorization: 'Bearer a b' }, key: null })).r.status).toBe(
      401,
    );
    const boom = await poll(`/v1/tasks/${t.id}`, { key: EXPLODING_KEY });
    expect(boom.r.status).toBe(500);
    expect(boom.r.text).not.toContain(INTERNAL_DETAIL);
  });

  it('reads an unfinished task from the store on every poll, and shows its next state at once', async () => {
    const t = image('running');
    await app.store.transition(t);
    const polls = [await poll(`/v1/tasks/${t.id}`), await poll(`/v1/tasks/${t.id}`)];
    expect(polls.map((p) => [p.reads, p.r.json.status])).toEqual([
      [1, 'running'],
      [1, 'running'],
    ]);
    await app.store.transition({ ...t, status: 'succeeded', finished_at: now });
    const done = await poll(`/v1/tasks/${t.id}`);
    expect([done.reads, done.r.json.status, done.r.headers.get('retry-after')]).toEqual([1, 'succeeded', null]);
    expect((await poll(`/v1/tasks/${t.id}`)).reads).toBe(0);
  });
});

describe('a finished task in memory with a poll limit', () => {
  let app: UnitApp;
  beforeAll(async () => {
    app = await startUnitApp({ RATE_LIMIT_TASK_MS: '600000', FINISHED_VIEWS_CACHE_MB: '1' });
  });
  afterAll(async () => {
    await app?.close();
  });

  it('still asks the store (the limiter is there): the second poll is a 429', async () => {
    const t = imageRecord('succeeded', ownerOfKey(app.config.ownerKey, KEY));
    await app.store.transition(t);
    const id = t.id;
    const before = app.store.reads;
    expect((await request(app, 'GET', `/v1/tasks/${id}`)).status).toBe(200);
    const second = await request(app, 'GET', `/v1/tasks/${id}`);
    expect(second.status).toBe(429);
    expect(app.store.reads - before).toBe(2);
  });
});

describe('the poll limiter on the fast path', () => {
  let app: UnitApp;
  beforeAll(async () => {
    app = await startUnitApp({ RATE_LIMIT_TASK_MS: '600000' });
  });
  afterAll(async () => {
    await app?.close();
  });

  it('a second poll within the window: the same 429 with Retry-After on both paths', async () => {
    const submit = async () =>
      (
        await request(app, 'POST', '/v1beta/models/kiln-image-1:generateContent?output=url', {
          body: { contents: [{ role: 'user', parts: [{ text: 'a kiln' }] }] },
        })
      ).json.id as string;
    const [a, b] = [await submit(), await submit()];
    expect((await request(app, 'GET', `/v1/tasks/${a}`)).status).toBe(200);
    const koaPoll = { headers: { origin: KOA_ORIGIN } };
    expect((await request(app, 'GET', `/v1/tasks/${b}`, koaPoll)).status).toBe(200);
    const fast = await request(app, 'GET', `/v1/tasks/${a}`);
    const koa = await request(app, 'GET', `/v1/tasks/${b}`, koaPoll);
    expect(fast.status, fast.text).toBe(429);
    expect(fast.json.error.code).toBe('rate_limited');
    expect(fast.text.replace(a, 'ID')).toBe(koa.text.replace(b, 'ID'));
    expect(headersOf(fast)).toEqual(headersOf(koa));
    expect(Number(fast.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });
});

describe("a list's query string", () => {
  it('is parsed exactly as Koa parses it', () => {
    const koaParse = (q: string) => koaSearchParams.parse(q);
    for (const q of [
      '',
      'limit=5',
      'limit=1&limit=2',
      'a=%20b+c',
      '__proto__=1',
      'x',
      'x=&y',
      'k=%E2%9C%93',
      'a[b]=1',
      '&&=&',
    ]) {
      expect(parseQuery(q), q).toEqual(koaParse(q));
      expect(Object.keys(parseQuery(q)), q).toEqual(Object.keys(koaParse(q) as object));
    }
  });
});

describe('which requests the fast path takes', () => {
  let url: string;
  const slow: string[] = [];
  const close: (() => void)[] = [];
  /** Which of the read's calls answered: `get <id>` (a promise) or `peek <id>` (from memory). */
  const calls: string[] = [];
  beforeAll(async () => {
    const log = pino({ level: 'silent' });
    const read: FastRead = {
      prefix: '/v1/tasks/',
      route: '/v1/tasks/:id',
      pollAfterSeconds: 10,
      get: async (_caller, id) => {
        calls.push(`get ${id}`);
        if (id === 'task_missing') throw new KilnError('not_found', `Task ${id} was not found.`);
        return { status: 'succeeded', json: `{"id":"${id}"}` };
      },
      peek: (_caller, id) => {
        calls.push(`peek ${id}`);
        return id === 'task_mem' ? { status: 'succeeded', json: `{"id":"${id}","from":"memory"}` } : undefined;
      },
    };
    const list: FastList = {
      path: '/v1/tasks',
      query: z.object({ limit: z.string().optional() }),
      list: async (_caller, q: { limit?: string }) => `{"limit":${JSON.stringify(q.limit ?? null)}}`,
    };
    const fast = fastReads({
      auth: new PassthroughAuth(Buffer.alloc(32, 1)),
      observer: requestObserver({ log }),
      log,
      reads: [read],
      lists: [list],
    });
    // What the fast path does not take goes on, as to Koa (src/api/app.ts).
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      if (fast(req, res)) return;
      slow.push(`${req.method} ${req.url}`);
      res.writeHead(299).end('slow');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    close.push(() => server.close());
  });
  afterAll(() => close.forEach((c) => c()));

  const ask = (path: string, init: RequestInit = {}) =>
    fetch(url + path, { ...init, headers: { authorization: `Bearer ${KEY}`, ...(init.headers ?? {}) } });

  it('takes a list page with its query', async () => {
    expect(await (await ask('/v1/tasks')).text()).toBe('{"limit":null}');
    expect(await (await ask('/v1/tasks?limit=5')).text()).toBe('{"limit":"5"}');
    expect(await (await ask('/v1/tasks?')).text()).toBe('{"limit":null}');
    expect(slow).toEqual([]);
  });

  it('takes a plain GET of one task, and answers its errors itself', async () => {
    const ok = await ask('/v1/tasks/task_abc');
    expect(ok.status).toBe(200);
    expect(await ok.text()).toBe('{"id":"task_abc"}');
    const missing = await ask('/v1/tasks/task_missing');
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: { code: 'not_found', message: 'Task task_missing was not found.' } });
    expect(slow).toEqual([]);
  });

  it('answers from memory, with no promise, only for a key it already knows and a view memory holds', async () => {
    calls.length = 0;
    const fresh = 'a-key-this-process-never-saw-0001';
    const first = await ask('/v1/tasks/task_mem', { headers: { authorization: `Bearer ${fresh}` } });
    expect(await first.text()).toBe('{"id":"task_mem"}');
    const again = await ask('/v1/tasks/task_mem', { headers: { authorization: `Bearer ${fresh}` } });
    expect(again.status).toBe(200);
    expect(again.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(again.headers.get('x-request-id')).toBeTruthy();
    expect(await again.text()).toBe('{"id":"task_mem","from":"memory"}');
    expect(await (await ask('/v1/tasks/task_other')).text()).toBe('{"id":"task_other"}');
    expect(calls).toEqual(['get task_mem', 'peek task_mem', 'peek task_other', 'get task_other']);
    expect(slow).toEqual([]);
  });

  it('leaves to Koa: other methods, queries, long-poll preferences, browsers, odd ids, sub-resources', async () => {
    slow.length = 0;
    const cases: [string, RequestInit][] = [
      ['/v1/tasks/task_abc', { method: 'POST' }],
      ['/v1/tasks/task_abc', { method: 'HEAD' }],
      ['/v1/tasks/task_abc?wait=5', {}],
      ['/v1/tasks/task_abc?x=1', {}],
      ['/v1/tasks/task_abc', { headers: { prefer: 'wait=5' } }],
      ['/v1/tasks/task_abc', { headers: { origin: 'http://example.test' } }],
      ['/v1/tasks/task_%61bc', {}],
      ['/v1/tasks/task_abc/', {}],
      ['/v1/tasks/task_abc/content', {}],
      ['/v1/tasks/', {}],
      [`/v1/tasks/task_${'a'.repeat(260)}`, {}],
      ['/v1/tasksx/task_abc', {}],
      ['/v1/tasksx', {}],
      ['/v1/tasks', { method: 'POST' }],
      ['/v1/tasks?limit=5', { headers: { origin: 'http://example.test' } }],
    ];
    for (const [path, init] of cases)
      expect((await ask(path, init)).status, `${init.method ?? 'GET'} ${path}`).toBe(299);
    expect(slow).toHaveLength(cases.length);
  });
});
