// Webhook deliveries that take time: the retry limit, and retries across a killed worker process
// (real Temporal, Redis, worker processes and an HTTPS receiver; signatures checked with
// `standardwebhooks`).
import type { ChildProcess } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { workerChild } from '../../support/worker-child.js';
import { eventually, http, startKiln, submitBody, type Kiln } from '../../support/kiln.js';
import { startReceiver, submitPath, verify, WEBHOOK_MODELS as MODELS, webhookEnv } from './webhook-receiver.js';

const ENV = webhookEnv();
const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('webhook retry limit', () => {
  it('gives a delivery up as failed once the maximum age has passed', async () => {
    const k = await startKiln({
      models: MODELS,
      env: { ...ENV, WEBHOOK_RETRY_INITIAL_MS: '200', WEBHOOK_RETRY_MAX_MS: '400', WEBHOOK_MAX_AGE_MS: '2500' },
    });
    const r = await startReceiver();
    try {
      r.fallback = 503;
      const res = await http(k.baseUrl)(submitPath({ webhook: r.url('/never') }), {
        method: 'POST',
        json: submitBody('never accepted'),
      });
      expect(res.status, res.text).toBe(202);
      const poll = () => http(k.baseUrl)(`/v1/tasks/${res.json.id}`);
      const done = await eventually(poll, (p) => p.json.webhook?.status === 'failed', 30_000);
      expect(done.json.webhook.last_error).toMatch(/the receiver answered 503; gave up after/);
      // Retried first (the exact count depends on how busy the machine is), then given up.
      expect(done.json.webhook.attempts).toBeGreaterThanOrEqual(2);
      expect(r.received).toHaveLength(done.json.webhook.attempts);
      // Nothing more after giving up.
      await settle(1000);
      expect(r.received).toHaveLength(done.json.webhook.attempts);
    } finally {
      await r.close();
      await k.stop();
    }
  }, 60_000);
});

describe('webhook durability', () => {
  const children: ChildProcess[] = [];
  afterAll(() => {
    for (const c of children) c.kill('SIGKILL');
  });

  const workerProcess = (k: Kiln) => workerChild(k.env, (child) => children.push(child));

  it('3 failures, then one accepted and signed delivery, across a worker kill', async () => {
    const k = await startKiln({
      models: MODELS,
      workers: false,
      env: { ...ENV, WEBHOOK_RETRY_INITIAL_MS: '1500', WEBHOOK_RETRY_MAX_MS: '1500' },
    });
    const r = await startReceiver();
    try {
      r.script = [500, 500, 500];
      let worker = await workerProcess(k);
      const res = await http(k.baseUrl)(submitPath({ webhook: r.url('/durable') }), {
        method: 'POST',
        json: submitBody('durable webhook'),
      });
      expect(res.status, res.text).toBe(202);
      const id = res.json.id as string;
      const poll = () => http(k.baseUrl)(`/v1/tasks/${id}`);
      // The first attempt failed and was recorded: the delivery now waits on a durable timer.
      await eventually(poll, (p) => p.json.webhook?.attempts === 1, 30_000);
      await settle(300);
      worker.kill('SIGKILL');
      await new Promise((ok) => worker.once('exit', ok));
      const during = r.received.length;
      await settle(2000);
      // Nothing is delivered while no worker runs.
      expect(r.received.length).toBe(during);
      worker = await workerProcess(k);
      const done = await eventually(poll, (p) => p.json.webhook?.status === 'delivered', 90_000);
      expect(done.json.webhook).toEqual({ status: 'delivered', attempts: 4, last_error: null });
      await settle(1000);
      expect(r.received.map((x) => x.status)).toEqual([500, 500, 500, 200]);
      const secret = (await http(k.baseUrl)('/v1/webhooks/secret')).json.secret as string;
      const accepted = r.received.filter((x) => x.status === 200);
      expect(accepted).toHaveLength(1);
      const { webhook: _w, ...task } = (await poll()).json;
      expect(verify(secret, accepted[0])).toEqual(task);
      expect(new Set(r.received.map((x) => x.headers['webhook-id']))).toEqual(new Set([`msg_${id}_succeeded`]));
      worker.kill('SIGTERM');
    } finally {
      await r.close();
      await k.stop();
    }
  }, 150_000);
});
