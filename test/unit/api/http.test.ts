// The HTTP contract of buildApp over in-memory dependencies: authentication, validation limits,
// status codes, the error body's shape, and that a 5xx never carries internal details.
import { gzipSync } from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  EXPLODING_KEY,
  INTERNAL_DETAIL,
  request,
  startUnitApp,
  type Reply,
  type UnitApp,
} from '../../support/unit-app.js';

const SUBMIT = '/v1beta/models/kiln-image-1:generateContent?output=url';
const prompt = (text: string) => ({ contents: [{ role: 'user', parts: [{ text }] }] });

/** Every error is `{error: {code, message}}` and nothing else, as JSON. */
function expectError(r: Reply, status: number, code: string) {
  expect(r.status, r.text).toBe(status);
  expect(r.headers.get('content-type')).toMatch(/^application\/json/);
  expect(r.json).toEqual({ error: { code, message: expect.any(String) } });
  expect(r.json.error.message.length).toBeGreaterThan(0);
}

let app: UnitApp;
// A poll limiter window no slow machine can outlast between two requests of one test.
beforeAll(async () => {
  app = await startUnitApp({ RATE_LIMIT_TASK_MS: '600000' });
});
afterAll(async () => {
  await app?.close();
});
afterEach(() => {
  app.started.length = 0;
});

describe('authentication', () => {
  it('answers 401 missing_api_key without a usable bearer token', async () => {
    const refused: Record<string, string>[] = [
      {},
      { authorization: 'Basic dXNlcjpwdw==' },
      { authorization: 'Bearer ' },
      { authorization: `Bearer ${'k'.repeat(1025)}` },
    ];
    for (const headers of refused) {
      expectError(
        await request(app, 'POST', SUBMIT, { key: null, headers, body: prompt('a kiln') }),
        401,
        'missing_api_key',
      );
    }
    expectError(await request(app, 'GET', '/v1/models', { key: null }), 401, 'missing_api_key');
    expectError(await request(app, 'GET', '/v1/tasks', { key: null }), 401, 'missing_api_key');
    expectError(
      await request(app, 'POST', '/v1/videos', { key: null, body: { model: 'kiln-video-1', prompt: 'x' } }),
      401,
      'missing_api_key',
    );
    expectError(
      await request(app, 'POST', '/v1/chat/completions', { key: null, body: { model: 'kiln-chat-1', messages: [] } }),
      401,
      'missing_api_key',
    );
    expect(app.started).toEqual([]);
  });

  it("takes a Gemini client's x-goog-api-key as the key", async () => {
    const r = await request(app, 'POST', SUBMIT, {
      key: null,
      headers: { 'x-goog-api-key': 'goog-key-123' },
      body: prompt('a kiln'),
    });
    expect(r.status, r.text).toBe(202);
  });
});

describe('image task submission', () => {
  it('accepts a prompt of exactly 4000 characters and starts one workflow', async () => {
    const r = await request(app, 'POST', SUBMIT, { body: prompt('p'.repeat(4000)) });
    expect(r.status, r.text).toBe(202);
    expect(r.json).toMatchObject({
      object: 'image.task',
      model: 'kiln-image-1',
      status: 'accepted',
      polling_url: `/v1/tasks/${r.json.id}`,
    });
    expect(r.json.id).toMatch(/^task_[a-f0-9]{32}$/);
    expect(app.started.map((w) => [w.type, w.id])).toEqual([['imageTaskWorkflow', r.json.id]]);
    expect(app.store.statuses(r.json.id)).toEqual(['accepted']);
  });

  it('counts characters, not UTF-16 units: 4000 emoji are allowed', async () => {
    expect((await request(app, 'POST', SUBMIT, { body: prompt('🔥'.repeat(4000)) })).status).toBe(202);
  });

  it('refuses 4001 characters with 400 prompt_too_long, before any workflow starts', async () => {
    const r = await request(app, 'POST', SUBMIT, { body: prompt('p'.repeat(4001)) });
    expectError(r, 400, 'prompt_too_long');
    expect(r.json.error.message).toContain('4001');
    // Split across parts, the total is what counts.
    expectError(
      await request(app, 'POST', SUBMIT, {
        body: { contents: [{ parts: [{ text: 'p'.repeat(2000) }, { text: 'p'.repeat(2001) }] }] },
      }),
      400,
      'prompt_too_long',
    );
    expect(app.started).toEqual([]);
  });

  it('answers 400 for requests the contract refuses', async () => {
    expectError(
      await request(app, 'POST', '/v1beta/models/kiln-image-1:generateContent', { body: prompt('x') }),
      400,
      'output_must_be_url',
    );
    expectError(await request(app, 'POST', SUBMIT, { body: prompt('   ') }), 400, 'invalid_request');
    expectError(await request(app, 'POST', SUBMIT, { body: { contents: [] } }), 400, 'invalid_request');
    expectError(
      await request(app, 'POST', SUBMIT, { body: '{"contents": [', headers: { 'content-type': 'application/json' } }),
      400,
      'invalid_request',
    );
    expect(app.started).toEqual([]);
  });

  it('answers 413 request_too_large for a body over 2 MB, also when it arrives gzipped', async () => {
    const big = JSON.stringify({ ...prompt('x'), pad: 'y'.repeat(2 * 1024 * 1024) });
    expectError(
      await request(app, 'POST', SUBMIT, { body: big, headers: { 'content-type': 'application/json' } }),
      413,
      'request_too_large',
    );
    const gz = gzipSync(big);
    expect(gz.length).toBeLessThan(100_000);
    expectError(
      await request(app, 'POST', SUBMIT, {
        body: gz,
        headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      }),
      413,
      'request_too_large',
    );
    expect(app.started).toEqual([]);
  });

  it('answers 415 for a body that is not JSON or has an unknown encoding', async () => {
    expectError(
      await request(app, 'POST', SUBMIT, { body: 'a kiln', headers: { 'content-type': 'text/plain' } }),
      415,
      'unsupported_media_type',
    );
    expectError(
      await request(app, 'POST', SUBMIT, {
        body: '{}',
        headers: { 'content-type': 'application/json', 'content-encoding': 'compress' },
      }),
      415,
      'unsupported_content_encoding',
    );
  });

  it('answers 404 model_not_found for an unknown model or one of another kind', async () => {
    const r = await request(app, 'POST', '/v1beta/models/no-such-model:generateContent?output=url', {
      body: prompt('x'),
    });
    expectError(r, 404, 'model_not_found');
    expect(r.json.error.message).toContain('no-such-model');
    expectError(
      await request(app, 'POST', '/v1beta/models/kiln-chat-1:generateContent?output=url', { body: prompt('x') }),
      404,
      'model_not_found',
    );
    expectError(
      await request(app, 'POST', '/v1/videos', { body: { model: 'kiln-image-1', prompt: 'x' } }),
      404,
      'model_not_found',
    );
    expectError(
      await request(app, 'POST', '/v1/chat/completions', {
        body: { model: 'kiln-video-1', messages: [{ role: 'user', content: 'hi' }] },
      }),
      404,
      'model_not_found',
    );
    expect(app.started).toEqual([]);
  });
});

describe('polling', () => {
  it('answers a submitted task with Retry-After, then 429 rate_limited for a poll that comes too soon', async () => {
    const {
      json: { id },
    } = await request(app, 'POST', SUBMIT, { body: prompt('a kiln') });
    const first = await request(app, 'GET', `/v1/tasks/${id}`);
    expect(first.status, first.text).toBe(200);
    expect(first.json).toMatchObject({ id, status: 'accepted' });
    expect(first.headers.get('retry-after')).toBe(String(app.config.pollAfterSeconds));
    const second = await request(app, 'GET', `/v1/tasks/${id}`);
    expectError(second, 429, 'rate_limited');
    expect(Number(second.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });

  it("keeps one owner's task from another: 404 not_found", async () => {
    const {
      json: { id },
    } = await request(app, 'POST', SUBMIT, { body: prompt('a kiln') });
    expectError(await request(app, 'GET', `/v1/tasks/${id}`, { key: 'someone-else-entirely' }), 404, 'not_found');
    expectError(await request(app, 'GET', '/v1/tasks/not-a-task-id'), 404, 'not_found');
  });

  it('answers 409 task_not_ready for the content of an unfinished task', async () => {
    const {
      json: { id },
    } = await request(app, 'POST', SUBMIT, { body: prompt('a kiln') });
    const r = await request(app, 'GET', `/v1/tasks/${id}/content`);
    expectError(r, 409, 'task_not_ready');
    expect(r.headers.get('retry-after')).toBeTruthy();
  });
});

describe('routing', () => {
  it('answers an unknown path with 404 not_found as JSON', async () => {
    for (const p of ['/v1/nothing', '/v1/tasks/a/b/c', '/v1/files/..%2F..%2Fetc%2Fpasswd', '/console/nothing'])
      expectError(await request(app, 'GET', p), 404, 'not_found');
    // `GET /` redirects to the console (below); other methods there are still unknown paths.
    expectError(await request(app, 'POST', '/'), 404, 'not_found');
    expectError(await request(app, 'POST', '/console/'), 404, 'not_found');
  });

  it('redirects GET / to the console', async () => {
    const res = await fetch(`${app.url}/`, { redirect: 'manual' });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe('/console/');
  });

  it('answers a wrong method with 405 method_not_allowed and an Allow header', async () => {
    const cases: [string, string, string][] = [
      ['PUT', '/v1/tasks', 'GET'],
      ['DELETE', '/v1/tasks/task_x', 'GET'],
      ['GET', SUBMIT, 'POST'],
      ['GET', '/v1/chat/completions', 'POST'],
      ['DELETE', '/v1/videos', 'POST'],
      ['POST', '/v1/tasks/batch-get/content', 'GET'],
    ];
    for (const [method, path, allowed] of cases) {
      const r = await request(app, method, path);
      expectError(r, 405, 'method_not_allowed');
      const allow = r.headers.get('allow') ?? '';
      expect(allow.split(/,\s*/), `${method} ${path}`).toContain(allowed);
      expect(allow.split(/,\s*/)).not.toContain(method);
    }
  });
});

describe('failures inside Kiln', () => {
  it('answers 500 internal_error without internal details, and logs them', async () => {
    const r = await request(app, 'GET', '/v1/models', { key: EXPLODING_KEY });
    expectError(r, 500, 'internal_error');
    expect(r.text).not.toContain(INTERNAL_DETAIL);
    expect(r.text).not.toMatch(/stack|at .*\.ts/);
    expect(JSON.stringify(app.logs())).toContain(INTERNAL_DETAIL);
  });

  it('answers 503 queue_full with Retry-After when the unfinished-task limit is reached', async () => {
    const small = await startUnitApp({ MAX_UNFINISHED_TASKS: '1' });
    try {
      expect((await request(small, 'POST', SUBMIT, { body: prompt('one') })).status).toBe(202);
      const r = await request(small, 'POST', SUBMIT, { body: prompt('two') });
      expectError(r, 503, 'queue_full');
      expect(r.headers.get('retry-after')).toBe(String(small.config.pollAfterSeconds));
      expect(small.started).toHaveLength(1);
    } finally {
      await small.close();
    }
  });

  it('answers 503 service_unavailable while the read model is down, not a 500', async () => {
    const down = await startUnitApp();
    try {
      down.store.down = new Error(`redis: ${INTERNAL_DETAIL}`);
      const r = await request(down, 'POST', SUBMIT, { body: prompt('a kiln') });
      expectError(r, 503, 'service_unavailable');
      expect(r.text).not.toContain(INTERNAL_DETAIL);
      expect(down.started).toEqual([]);
    } finally {
      await down.close();
    }
  });
});

describe('videos and chat', () => {
  it('creates a video task (200, OpenAI video object) and refuses a bad one with 400', async () => {
    const r = await request(app, 'POST', '/v1/videos', {
      body: { model: 'kiln-video-1', prompt: 'a kiln at dusk', seconds: '4' },
    });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({
      object: 'video',
      model: 'kiln-video-1',
      status: 'queued',
      progress: 0,
      seconds: '4',
    });
    expect(app.started.map((w) => w.type)).toEqual(['videoTaskWorkflow']);
    expectError(
      await request(app, 'POST', '/v1/videos', { body: { model: 'kiln-video-1', prompt: 'p'.repeat(4001) } }),
      400,
      'prompt_too_long',
    );
    expectError(
      await request(app, 'POST', '/v1/videos', { body: { model: 'kiln-video-pro', prompt: 'x', seconds: '4' } }),
      400,
      'invalid_request',
    );
  });

  it('answers a chat completion from the local model', async () => {
    const r = await request(app, 'POST', '/v1/chat/completions', {
      body: { model: 'kiln-chat-1', messages: [{ role: 'user', content: [{ type: 'text', text: 'hello' }] }] },
    });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({
      object: 'chat.completion',
      model: 'kiln-chat-1',
      choices: [{ message: { role: 'assistant', content: expect.any(String) } }],
    });
    expectError(
      await request(app, 'POST', '/v1/chat/completions', { body: { model: 'kiln-chat-1', messages: 'hello' } }),
      400,
      'invalid_request',
    );
  });
});
