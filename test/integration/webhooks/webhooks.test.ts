// Signed, durable webhooks: real Temporal, Redis and workers; receivers are real
// HTTPS servers on 127.0.0.2 (exempted by WEBHOOK_ALLOW as if public), and signatures are checked
// on the receiving side with the `standardwebhooks` package.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Payload } from '@temporalio/common';
import { AesGcmCodec } from '../../../src/temporal/codec.js';
import { KEY_A, KEY_B, eventually, http, startKiln, submitBody, waitForStatus, type Kiln } from '../../support/kiln.js';
import {
  startReceiver,
  submitPath,
  verify,
  WEBHOOK_MODELS as MODELS,
  webhookEnv,
  type Receiver,
} from './webhook-receiver.js';

const ENV = webhookEnv();

let kiln: Kiln;
let receiver: Receiver;
const api = (key = KEY_A) => http(kiln.baseUrl, key);

beforeAll(async () => {
  [kiln, receiver] = await Promise.all([startKiln({ models: MODELS, env: ENV }), startReceiver()]);
});
afterAll(async () => {
  await Promise.all([kiln?.stop(), receiver?.close()]);
});

async function submitWithWebhook(query: Record<string, string>, key = KEY_A, headers: Record<string, string> = {}) {
  const res = await api(key)(submitPath(query), { method: 'POST', json: submitBody('webhook test'), headers });
  expect(res.status, res.text).toBe(202);
  return res.json.id as string;
}

const secretOf = async (key = KEY_A) => (await api(key)('/v1/webhooks/secret')).json.secret as string;

/** The poll answer without `webhook` (which describes the delivery itself, not the task). */
async function pollWithoutWebhook(path: string) {
  const { webhook: _w, ...rest } = (await api()(path)).json;
  return rest;
}

/** Requests the receiver got for one task (it is shared by the tests of this file). */
const forTask = (id: string) => receiver.received.filter((r) => JSON.parse(r.body).id === id);

/** Every encrypted payload in a history, decrypted. */
async function decodedPayloads(events: unknown): Promise<Buffer[]> {
  const payloads: Payload[] = [];
  const walk = (v: unknown) => {
    if (!v || typeof v !== 'object' || v instanceof Uint8Array) return;
    const p = v as Payload;
    if (p.metadata?.encoding && Buffer.from(p.metadata.encoding).toString() === 'binary/encrypted') payloads.push(p);
    else for (const x of Object.values(v)) walk(x);
  };
  walk(events);
  expect(payloads.length).toBeGreaterThan(0);
  const decoded = await new AesGcmCodec(kiln.config.payloadKey).decode(payloads);
  return decoded.map((p) => Buffer.from(p.data ?? []));
}

const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('webhooks', () => {
  it('delivers one signed terminal delivery (body = the poll answer); the poll shows it delivered', async () => {
    const id = await submitWithWebhook({ webhook: receiver.url('/terminal') });
    const accepted = await api()(`/v1/tasks/${id}`);
    expect(accepted.json.webhook).toEqual({ status: 'pending', attempts: 0, last_error: null });
    await waitForStatus(() => api()(`/v1/tasks/${id}`), 'succeeded');
    const polled = await eventually(
      () => api()(`/v1/tasks/${id}`),
      (r) => r.json.webhook?.status === 'delivered',
    );
    expect(polled.json.webhook).toEqual({ status: 'delivered', attempts: 1, last_error: null });
    await settle(800);
    const got = forTask(id);
    expect(got).toHaveLength(1);
    const [delivery] = got;
    expect(delivery.path).toBe('/terminal');
    expect(delivery.headers['content-type']).toBe('application/json');
    expect(delivery.headers['webhook-id']).toBe(`msg_${id}_succeeded`);
    expect(verify(await secretOf(), delivery)).toEqual(await pollWithoutWebhook(`/v1/tasks/${id}`));
    expect(JSON.parse(delivery.body).status).toBe('succeeded');
  });

  it('stops at 410 Gone without retrying', async () => {
    receiver.script = [410];
    const id = await submitWithWebhook({ webhook: receiver.url('/gone') });
    const polled = await eventually(
      () => api()(`/v1/tasks/${id}`),
      (r) => r.json.webhook?.status === 'stopped',
      20_000,
    );
    expect(polled.json.webhook).toMatchObject({ status: 'stopped', attempts: 1 });
    expect(polled.json.webhook.last_error).toMatch(/410/);
    await settle(1500);
    expect(forTask(id).map((r) => r.status)).toEqual([410]);
  });

  it('retries a failing receiver with backoff and shows each attempt in the poll', async () => {
    receiver.script = [503, 500];
    const id = await submitWithWebhook({ webhook: receiver.url('/flaky') });
    const polled = await eventually(
      () => api()(`/v1/tasks/${id}`),
      (r) => r.json.webhook?.status === 'delivered',
      20_000,
    );
    expect(polled.json.webhook).toEqual({ status: 'delivered', attempts: 3, last_error: null });
    const got = forTask(id);
    expect(got.map((r) => r.status)).toEqual([503, 500, 200]);
    // One delivery: the same id on every attempt; each attempt is signed on its own.
    expect(new Set(got.map((r) => r.headers['webhook-id'])).size).toBe(1);
    const secret = await secretOf();
    for (const r of got) expect(() => verify(secret, r)).not.toThrow();
    // Backoff: the second wait is at least the doubled first one (200 ms, then 400 ms).
    expect(got[2].at - got[1].at).toBeGreaterThanOrEqual(350);
  });

  it('delivers queued, running and the end in order with webhook_events=all', async () => {
    const id = await submitWithWebhook({ webhook: receiver.url('/all'), webhook_events: 'all' });
    await eventually(
      async () => forTask(id).length,
      (n) => n >= 3,
      20_000,
    );
    await settle(800);
    const got = forTask(id);
    expect(got.map((r) => JSON.parse(r.body).status)).toEqual(['queued', 'running', 'succeeded']);
    expect(got.map((r) => r.headers['webhook-id'])).toEqual([
      `msg_${id}_queued`,
      `msg_${id}_running`,
      `msg_${id}_succeeded`,
    ]);
    const secret = await secretOf();
    for (const r of got) expect(() => verify(secret, r)).not.toThrow();
    expect(verify(secret, got[2])).toEqual(await pollWithoutWebhook(`/v1/tasks/${id}`));
    const done = await eventually(
      () => api()(`/v1/tasks/${id}`),
      (r) => r.json.webhook?.status === 'delivered',
    );
    expect(done.json.webhook).toEqual({ status: 'delivered', attempts: 1, last_error: null });
  });

  it('delivers a video task with its webhook field, as the video poll shows it', async () => {
    const res = await api()('/v1/videos', {
      method: 'POST',
      json: { model: 'kiln-video-1', prompt: 'a webhook video', webhook: receiver.url('/video') },
    });
    expect(res.status, res.text).toBe(200);
    const id = res.json.id as string;
    expect(res.json.webhook).toEqual({ status: 'pending', attempts: 0, last_error: null });
    await waitForStatus(() => api()(`/v1/videos/${id}`), 'completed', 30_000);
    const polled = await eventually(
      () => api()(`/v1/videos/${id}`),
      (r) => r.json.webhook?.status === 'delivered',
    );
    expect(polled.json.webhook).toEqual({ status: 'delivered', attempts: 1, last_error: null });
    const got = forTask(id);
    expect(got).toHaveLength(1);
    expect(verify(await secretOf(), got[0])).toEqual(await pollWithoutWebhook(`/v1/videos/${id}`));
  });

  it('delivers every video event in order for a multipart create with webhook_events=all', async () => {
    const form = new FormData();
    form.set('model', 'kiln-video-1');
    form.set('prompt', 'every event');
    form.set('webhook', receiver.url('/video-all'));
    form.set('webhook_events', 'all');
    const res = await api()('/v1/videos', { method: 'POST', body: form });
    expect(res.status, res.text).toBe(200);
    const id = res.json.id as string;
    await eventually(
      async () => forTask(id).length,
      (n) => n >= 3,
      30_000,
    );
    await settle(800);
    const got = forTask(id);
    expect(got.map((r) => JSON.parse(r.body).status)).toEqual(['queued', 'in_progress', 'completed']);
    const secret = await secretOf();
    for (const r of got) expect(() => verify(secret, r)).not.toThrow();
    expect(verify(secret, got[2])).toEqual(await pollWithoutWebhook(`/v1/videos/${id}`));
  });

  it('delivers a direct-form task too', async () => {
    const res = await api()(
      `/v1beta/models/kiln-image-direct:generateContent?${new URLSearchParams({ webhook: receiver.url('/direct') })}`,
      { method: 'POST', json: submitBody('direct webhook', { generationConfig: { responseModalities: ['IMAGE'] } }) },
    );
    expect(res.status, res.text).toBe(200);
    expect(res.json.candidates).toHaveLength(1);
    const id = res.headers.get('x-kiln-task-id')!;
    const [delivery] = await eventually(
      async () => forTask(id),
      (got) => got.length === 1,
      20_000,
    );
    expect(verify(await secretOf(), delivery)).toMatchObject({ id, status: 'succeeded' });
  });

  it('serves a per-owner secret and rotates it: new deliveries use the new one, the old one fails', async () => {
    const first = (await api()('/v1/webhooks/secret')).json;
    expect(first).toMatchObject({ object: 'webhook.secret', generation: expect.any(Number) });
    expect(first.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect((await api()('/v1/webhooks/secret')).json).toEqual(first);
    const other = (await api(KEY_B)('/v1/webhooks/secret')).json;
    expect(other.secret).not.toBe(first.secret);

    const rotated = await api()('/v1/webhooks/secret/rotate', { method: 'POST' });
    expect(rotated.status).toBe(200);
    expect(rotated.headers.get('cache-control')).toBe('no-store');
    expect(rotated.json.generation).toBe(first.generation + 1);
    expect(rotated.json.secret).not.toBe(first.secret);
    expect((await api()('/v1/webhooks/secret')).json).toEqual(rotated.json);
    // Another owner's secret does not move.
    expect((await api(KEY_B)('/v1/webhooks/secret')).json).toEqual(other);

    const id = await submitWithWebhook({ webhook: receiver.url('/rotated') });
    const [delivery] = await eventually(
      async () => forTask(id),
      (got) => got.length === 1,
      20_000,
    );
    expect(() => verify(rotated.json.secret, delivery)).not.toThrow();
    expect(() => verify(first.secret, delivery)).toThrow();
    expect(() => verify(other.secret, delivery)).toThrow();
  });

  it('refuses invalid webhook URLs at submit with invalid_webhook_url', async () => {
    const cases: [string, RegExp][] = [
      ['http://example.com/hook', /https/],
      ['https://user:pw@example.com/hook', /credentials/],
      [`https://example.com/${'a'.repeat(2048)}`, /2048/],
      ['https://127.0.0.1/hook', /loopback/],
      ['https://10.1.2.3/hook', /private/],
      ['https://[::1]/hook', /loopback/],
      ['https://169.254.169.254/latest', /linkLocal/],
      ['not a url', /absolute https URL/],
    ];
    for (const [url, why] of cases) {
      const res = await api()(submitPath({ webhook: url }), { method: 'POST', json: submitBody() });
      expect({ url, status: res.status, code: res.json?.error?.code }).toEqual({
        url,
        status: 400,
        code: 'invalid_webhook_url',
      });
      expect(res.json.error.message).toMatch(why);
      const video = await api()('/v1/videos', {
        method: 'POST',
        json: { model: 'kiln-video-1', prompt: 'x', webhook: url },
      });
      expect({ url, status: video.status, code: video.json?.error?.code }).toEqual({
        url,
        status: 400,
        code: 'invalid_webhook_url',
      });
    }
    const events = await api()(submitPath({ webhook: receiver.url(), webhook_events: 'some' }), {
      method: 'POST',
      json: submitBody(),
    });
    expect({ status: events.status, code: events.json.error.code }).toEqual({ status: 400, code: 'invalid_request' });
    const lonely = await api()(submitPath({ webhook_events: 'all' }), { method: 'POST', json: submitBody() });
    expect({ status: lonely.status, code: lonely.json.error.code }).toEqual({ status: 400, code: 'invalid_request' });
  });

  it('never answers a random webhook parameter with anything but 202 or a 400 it documents', async () => {
    // A small seeded fuzz of the new query parameters (the OpenAPI fuzzer covers them too).
    let seed = 13;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const pieces = [
      'https://',
      'http://',
      '//',
      '@',
      ':',
      '[',
      ']',
      '::1',
      '127.0.0.2',
      '%00',
      '#',
      '?',
      '/',
      'é',
      ' ',
    ];
    const pick = () => pieces[rand(pieces.length)];
    for (let i = 0; i < 40; i++) {
      const url = Array.from({ length: 1 + rand(6) }, pick).join('');
      const events = ['terminal', 'all', '', 'ALL'][rand(4)];
      const res = await api()(submitPath({ webhook: url, webhook_events: events }), {
        method: 'POST',
        json: submitBody('fuzz'),
      });
      expect([202, 400], `${url} ${events}: ${res.text}`).toContain(res.status);
      if (res.status === 400) expect(['invalid_webhook_url', 'invalid_request']).toContain(res.json.error.code);
    }
  });

  it('refuses a host name that resolves to a private address at delivery, and says why', async () => {
    const port = new URL(receiver.url()).port;
    const id = await submitWithWebhook({ webhook: `https://localhost:${port}/private` });
    const polled = await eventually(
      () => api()(`/v1/tasks/${id}`),
      (r) => r.json.webhook?.status === 'failed',
      20_000,
    );
    expect(polled.json.webhook).toMatchObject({ status: 'failed', attempts: 1 });
    expect(polled.json.webhook.last_error).toMatch(/localhost resolves to a loopback address/);
    expect(receiver.received.some((r) => r.path === '/private')).toBe(false);
  });

  it('makes the webhook part of an Idempotency-Key request', async () => {
    const key = `wh-${Date.now()}`;
    const url = receiver.url('/keyed');
    const first = await submitWithWebhook({ webhook: url }, KEY_A, { 'idempotency-key': key });
    const again = await api()(submitPath({ webhook: url }), {
      method: 'POST',
      json: submitBody('webhook test'),
      headers: { 'idempotency-key': key },
    });
    expect({ status: again.status, id: again.json.id }).toEqual({ status: 202, id: first });
    const others: Record<string, string>[] = [
      { webhook: receiver.url('/other') },
      { webhook: url, webhook_events: 'all' },
      {},
    ];
    for (const query of others) {
      const other = await api()(submitPath(query), {
        method: 'POST',
        json: submitBody('webhook test'),
        headers: { 'idempotency-key': key },
      });
      expect({ status: other.status, code: other.json?.error?.code }).toEqual({
        status: 422,
        code: 'idempotency_key_reused',
      });
    }
  });

  it('keeps the signing secret out of Temporal history and Redis, and shows each delivery as a workflow', async () => {
    const id = await submitWithWebhook({ webhook: receiver.url('/history') });
    await eventually(
      async () => forTask(id).length,
      (n) => n === 1,
      20_000,
    );
    const secret = await secretOf();
    const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
    const needles = [secret, secret.slice('whsec_'.length), key.toString('hex')];
    const handle = kiln.api.client.workflow.getHandle(`${id}/webhook/succeeded`);
    expect((await handle.describe()).type).toBe('webhookDeliveryWorkflow');
    expect(await handle.result()).toEqual({ status: 'delivered', attempts: 1, last_error: null });
    for (const wf of [id, `${id}/webhook/succeeded`]) {
      const raw = await kiln.api.client.workflowService.getWorkflowExecutionHistory({
        namespace: 'default',
        execution: { workflowId: wf },
      });
      const events = raw.history?.events ?? [];
      expect(events.length).toBeGreaterThan(0);
      const text = Buffer.concat([Buffer.from(JSON.stringify(events)), ...(await decodedPayloads(events))]);
      for (const n of needles) expect(text.includes(n), `${wf} history holds the secret`).toBe(false);
    }
    const keys = await kiln.api.redis.keys(`${kiln.config.redisPrefix}*`);
    for (const k of keys) {
      const type = await kiln.api.redis.type(k);
      const dump =
        type === 'hash'
          ? JSON.stringify(await kiln.api.redis.hgetall(k))
          : type === 'string'
            ? await kiln.api.redis.get(k)
            : '';
      for (const n of needles) expect(dump?.includes(n), k).toBe(false);
    }
  });
});
