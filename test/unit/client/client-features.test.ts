// The client's task features with no server: cancel, webhook options on submits, the webhook secret
// calls, verifyWebhook against deliveries signed by the `standardwebhooks` package (what receivers
// are told to use), and the CLI's timing lines. Imported by the package entry point.
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import {
  APIConnectionError,
  BadRequestError,
  CanceledError,
  errorFromResponse,
  Kiln,
  NotFoundError,
  verifyWebhook,
  WebhookVerificationError,
} from 'kiln/client';
import { timingLines } from '../../../src/cli/features-commands.js';
import { fakeFetch, json, submitted, task, transportError, type Handler } from './fake-fetch.js';

const kilnWith = (handler: Handler) => {
  const fake = fakeFetch(handler);
  const kiln = new Kiln({
    baseURL: 'http://kiln.test',
    apiKey: 'secret-key',
    fetch: fake.fetch,
    polling: { retryInitialMs: 1, firstCheckMs: 0, intervalMs: 1, waitSeconds: 0 },
  });
  return { kiln, ...fake };
};
const apiError = (status: number, code: string) => json({ error: { code, message: `${code} here` } }, status);
const canceled = (id: string) =>
  task(id, 'failed', { finished_at: 3, error: { code: 'canceled', message: 'Canceled by the owner.' } });

describe('cancel', () => {
  it('tasks.cancel posts to the cancel path and types the answer, with the Retry-After hint', async () => {
    const { kiln, calls } = kilnWith(() => json(task('task_1', 'running'), 202, { 'retry-after': '2' }));
    const t = await kiln.tasks.cancel('task_1');
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual(['POST /v1/tasks/task_1/cancel']);
    expect(calls[0].headers.get('authorization')).toBe('Bearer secret-key');
    expect(t.status).toBe('running');
    expect(t.retryAfterMs).toBe(2000);
  });

  it('is retried after a lost answer (idempotent) and resolves to the canceled task', async () => {
    const { kiln, calls } = kilnWith((_c, n) => (n === 1 ? transportError() : json(canceled('task_1'), 202)));
    const t = await kiln.tasks.cancel('task_1');
    expect(calls).toHaveLength(2);
    expect(new Set(calls.map((c) => c.path))).toEqual(new Set(['/v1/tasks/task_1/cancel']));
    expect(t.error).toEqual({ code: 'canceled', message: 'Canceled by the owner.' });
  });

  it('an unknown id is NotFoundError at once, not retried', async () => {
    const { kiln, calls } = kilnWith(() => apiError(404, 'not_found'));
    const e = await kiln.tasks.cancel('task_x').catch((x) => x);
    expect(e).toBeInstanceOf(NotFoundError);
    expect(e.code).toBe('not_found');
    expect(calls).toHaveLength(1);
  });

  it('videos.cancel posts to the video path; a finished video comes back unchanged', async () => {
    const done = { id: 'video_1', object: 'video', status: 'completed', progress: 100, started_at: 5, attempts: 1 };
    const { kiln, calls } = kilnWith(() => json(done, 200));
    const v = await kiln.videos.cancel('video_1');
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual(['POST /v1/videos/video_1/cancel']);
    expect(v).toEqual(done);
    const gone = kilnWith(() => apiError(404, 'not_found'));
    await expect(gone.kiln.videos.cancel('video_x')).rejects.toBeInstanceOf(NotFoundError);
  });

  it('a direct-form request whose task was canceled is CanceledError (409 canceled)', () => {
    const e = errorFromResponse(409, new Headers(), { error: { code: 'canceled', message: 'm' } });
    expect(e).toBeInstanceOf(CanceledError);
  });
});

describe('webhook options on submits', () => {
  it('tasks.create and createAndWait send webhook and webhook_events as query parameters', async () => {
    const { kiln, calls } = kilnWith((c) =>
      c.method === 'POST' ? json(submitted('task_1'), 202) : json(task('task_1', 'succeeded', { finished_at: 2 })),
    );
    await kiln.tasks.create({ model: 'm', prompt: 'p' }, { webhook: 'https://hooks.example/k', webhookEvents: 'all' });
    expect(Object.fromEntries(calls[0].query)).toEqual({
      output: 'url',
      webhook: 'https://hooks.example/k',
      webhook_events: 'all',
    });
    await kiln.tasks.createAndWait({ model: 'm', prompt: 'p' }, { webhook: 'https://hooks.example/k' });
    const second = calls.filter((c) => c.method === 'POST')[1];
    expect(Object.fromEntries(second.query)).toEqual({ output: 'url', webhook: 'https://hooks.example/k' });
    await kiln.tasks.create({ model: 'm', prompt: 'p' });
    expect(Object.fromEntries(calls.at(-1)!.query)).toEqual({ output: 'url' });
  });

  it('videos.create puts them in the body; a refused URL is BadRequestError invalid_webhook_url', async () => {
    const { kiln, calls } = kilnWith(() => json({ id: 'video_1', object: 'video', status: 'queued' }));
    await kiln.videos.create({ model: 'v', prompt: 'p' }, { webhook: 'https://hooks.example/v', webhookEvents: 'all' });
    expect(calls[0].body).toEqual({
      model: 'v',
      prompt: 'p',
      webhook: 'https://hooks.example/v',
      webhook_events: 'all',
    });
    await kiln.videos.create({ model: 'v', prompt: 'p' });
    expect(calls[1].body).toEqual({ model: 'v', prompt: 'p' });
    const refused = kilnWith(() => apiError(400, 'invalid_webhook_url'));
    const e = await refused.kiln.videos
      .create({ model: 'v', prompt: 'p' }, { webhook: 'http://10.0.0.1/' })
      .catch((x) => x);
    expect(e).toBeInstanceOf(BadRequestError);
    expect(e.code).toBe('invalid_webhook_url');
    expect(refused.calls).toHaveLength(1);
  });
});

describe('webhook secret', () => {
  const body = (generation: number) => ({ object: 'webhook.secret', secret: `whsec_c2VjcmV0LSR7Z2VufQ==`, generation });

  it('secret() reads it and rotateSecret() posts the rotation', async () => {
    const { kiln, calls } = kilnWith((c) => json(body(c.method === 'POST' ? 2 : 1)));
    expect(await kiln.webhooks.secret()).toEqual(body(1));
    expect(await kiln.webhooks.rotateSecret()).toEqual(body(2));
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual([
      'GET /v1/webhooks/secret',
      'POST /v1/webhooks/secret/rotate',
    ]);
  });

  it('retries 503 and transport errors, then surfaces the typed error', async () => {
    const { kiln, calls } = kilnWith((_c, n) => (n === 1 ? apiError(503, 'service_unavailable') : json(body(1))));
    expect((await kiln.webhooks.secret()).generation).toBe(1);
    expect(calls).toHaveLength(2);
    const down = kilnWith(() => transportError());
    await expect(down.kiln.webhooks.rotateSecret()).rejects.toBeInstanceOf(APIConnectionError);
    expect(down.calls).toHaveLength(3);
  });
});

describe('verifyWebhook (WebCrypto) against standardwebhooks signatures', () => {
  const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const payload = JSON.stringify(task('task_1', 'succeeded', { finished_at: 2 }));
  const now = Date.UTC(2026, 10, 23, 18, 0, 0);
  const signedHeaders = (body = payload, at = now, key = secret) => ({
    'webhook-id': 'msg_task_1_succeeded',
    'webhook-timestamp': String(Math.floor(at / 1000)),
    'webhook-signature': new Webhook(key).sign('msg_task_1_succeeded', new Date(at), body),
  });

  it('accepts a delivery signed with the secret and returns the task (plain object or Headers)', async () => {
    const h = signedHeaders();
    expect(await verifyWebhook(payload, h, secret, { now })).toEqual(JSON.parse(payload));
    expect(await verifyWebhook(payload, new Headers(h), secret, { now: now + 200_000 })).toMatchObject({
      id: 'task_1',
    });
    // During a rotation a delivery may carry several signatures; one match suffices.
    const other = new Webhook('whsec_b3RoZXIta2V5LW9mLTMyLWJ5dGVzLWxvbmctZW5vdWdo').sign(
      'msg_task_1_succeeded',
      new Date(now),
      payload,
    );
    const both = { ...h, 'webhook-signature': `${other} ${h['webhook-signature']}` };
    expect(await verifyWebhook(payload, both, secret, { now })).toMatchObject({ status: 'succeeded' });
  });

  it('refuses an altered body, another secret, a stale timestamp and missing headers', async () => {
    const h = signedHeaders();
    const refuse = (p: string, hs: Record<string, string>, s = secret, at = now) =>
      expect(verifyWebhook(p, hs, s, { now: at })).rejects.toBeInstanceOf(WebhookVerificationError);
    await refuse(payload.replace('succeeded', 'failed'), h);
    await refuse(payload, h, 'whsec_b3RoZXIta2V5LW9mLTMyLWJ5dGVzLWxvbmctZW5vdWdo');
    await refuse(payload, h, secret, now + 301_000);
    await refuse(payload, signedHeaders(payload, now - 3_600_000));
    const { 'webhook-signature': _s, ...unsigned } = h;
    await refuse(payload, unsigned);
    await refuse(payload, { ...h, 'webhook-signature': 'v1,AAAA' });
    await refuse(payload, { ...h, 'webhook-timestamp': 'soon' });
  });
});

describe('kiln timing lines', () => {
  it('shows the queue and upstream time, attempts and the webhook state', () => {
    const t = {
      created_at: 100,
      started_at: 102.5,
      attempts: 2,
      webhook: { status: 'pending' as const, attempts: 1, last_error: 'HTTP 503' },
    };
    expect(timingLines(t, 110)).toEqual([
      'queued 2.5 s, upstream 7.5 s (2 attempts)',
      'webhook pending (1 attempt, last error: HTTP 503)',
    ]);
    expect(timingLines({ created_at: 100, started_at: null, attempts: 0 }, null, 104)).toEqual(['queued 4.0 s so far']);
    expect(timingLines({ created_at: 100, started_at: 101, attempts: 1 }, null, 104)).toEqual([
      'queued 1.0 s, upstream 3.0 s so far (1 attempt)',
    ]);
    // Canceled before it started: no timing to show, and no webhook line without a webhook.
    expect(timingLines({ created_at: 100, started_at: null, attempts: 0 }, 101)).toEqual([]);
  });
});
