// The client SDK and the `kiln` CLI on the task features against a running Kiln (real Temporal,
// Redis and workers; local providers): cancel, webhooks (a real HTTPS receiver on 127.0.0.2,
// deliveries verified with the client's own verifyWebhook), the signing secret, timing fields.
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  Kiln as KilnClient,
  NotFoundError,
  verifyWebhook,
  WebhookVerificationError,
  type ImageTask,
} from '../../../src/client/index.js';
import { eventually, KEY_A, KEY_B, startKiln, type Kiln } from '../../support/kiln.js';
import { startReceiver, WEBHOOK_MODELS, webhookEnv, type Receiver } from '../webhooks/webhook-receiver.js';

const POLL = { firstCheckMs: 200, intervalMs: 200 };

let kiln: Kiln;
let receiver: Receiver;

beforeAll(async () => {
  [kiln, receiver] = await Promise.all([
    startKiln({
      env: { POLL_AFTER_SECONDS: '1', ...webhookEnv() },
      models: [
        ...WEBHOOK_MODELS,
        { id: 'img-slow', provider: 'local', latencyMs: 30_000, idempotent: true },
        { id: 'video-slow', kind: 'video', provider: 'local', latencyMs: 30_000, pollIntervalMs: 200, seconds: ['4'] },
      ],
    }),
    startReceiver(),
  ]);
});
afterAll(async () => {
  await Promise.all([kiln?.stop(), receiver?.close()]);
});

const client = (apiKey = KEY_A) => new KilnClient({ baseURL: kiln.baseUrl, apiKey, polling: POLL });

interface Run {
  code: number;
  stdout: string;
  stderr: string;
  json: any;
}

function cli(args: string[]): Promise<Run> {
  const env = { ...process.env, KILN_BASE_URL: kiln.baseUrl, KILN_API_KEY: KEY_A, KILN_POLL_INTERVAL: '0.2' };
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/kiln.js', ...args], { env, timeout: 45_000 }, (err, stdout, stderr) => {
      let json: any = null;
      try {
        json = JSON.parse(stdout);
      } catch {
        /* text output */
      }
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr, json });
    });
  });
}

/** Polls until the task's upstream call is under way (started_at set). */
const running = (get: () => Promise<{ status: string; started_at?: number | null }>) =>
  eventually(get, (t) => t.started_at != null, 15_000);

describe('cancel through the client', () => {
  it('a slow image task ends failed / canceled; a second cancel answers it unchanged', async () => {
    const c = client();
    const sub = await c.tasks.create({ model: 'img-slow', prompt: 'a very slow lighthouse' });
    await running(() => c.tasks.get(sub.id));
    const t0 = Date.now();
    const answer = await c.tasks.cancel(sub.id);
    expect(answer.id).toBe(sub.id);
    const done = answer.status === 'failed' ? answer : await c.tasks.wait(sub.id, { firstDelayMs: 0 });
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(done.status).toBe('failed');
    expect(done.error?.code).toBe('canceled');
    expect(done.started_at).toBeGreaterThanOrEqual(done.created_at!);
    expect(done.attempts).toBeGreaterThanOrEqual(1);
    const again = await c.tasks.cancel(sub.id);
    expect(again).toMatchObject({ id: sub.id, status: 'failed', error: done.error, finished_at: done.finished_at });
  });

  it("a slow video ends failed / canceled; another owner's id and an unknown id are NotFoundError", async () => {
    const c = client();
    const v = await c.videos.create({ model: 'video-slow', prompt: 'a slow river' });
    await running(() => c.videos.retrieve(v.id));
    await expect(client(KEY_B).videos.cancel(v.id)).rejects.toBeInstanceOf(NotFoundError);
    const answer = await c.videos.cancel(v.id);
    const done = answer.status === 'failed' ? answer : await c.videos.wait(v.id, { firstDelayMs: 0 });
    expect(done).toMatchObject({ id: v.id, status: 'failed', error: { code: 'canceled' } });
    await expect(c.tasks.cancel('task_00000000000000000000000000000000')).rejects.toBeInstanceOf(NotFoundError);
  });
});

describe('kiln cancel', () => {
  it('cancels an image task and a video by their ids; exit 0, the canceled objects in --json', async () => {
    const c = client();
    const sub = await c.tasks.create({ model: 'img-slow', prompt: 'slow again' });
    const v = await c.videos.create({ model: 'video-slow', prompt: 'slow water' });
    await running(() => c.tasks.get(sub.id));
    await running(() => c.videos.retrieve(v.id));
    const r = await cli(['cancel', sub.id, v.id, '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.json.map((x: { id: string }) => x.id)).toEqual([sub.id, v.id]);
    const task = await c.tasks.wait(sub.id, { firstDelayMs: 0 });
    const video = await c.videos.wait(v.id, { firstDelayMs: 0 });
    expect(task.error?.code).toBe('canceled');
    expect(video.error?.code).toBe('canceled');

    const text = await cli(['cancel', sub.id]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(`${sub.id} canceled:`);
    const unknown = await cli(['cancel', 'video_00000000000000000000000000000000']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('not_found');
  });
});

describe('webhooks through the client and the CLI', () => {
  it('reads and rotates the signing secret (client and kiln webhooks secret)', async () => {
    const c = client();
    const first = await c.webhooks.secret();
    expect(first).toMatchObject({ object: 'webhook.secret', secret: expect.stringMatching(/^whsec_/) });
    expect(await c.webhooks.secret()).toEqual(first);
    const rotated = await c.webhooks.rotateSecret();
    expect(rotated.secret).not.toBe(first.secret);
    expect(rotated.generation).toBeGreaterThan(first.generation);
    expect(await c.webhooks.secret()).toEqual(rotated);
    // Another owner's secret is its own.
    expect((await client(KEY_B).webhooks.secret()).secret).not.toBe(rotated.secret);

    const shown = await cli(['webhooks', 'secret']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout.trim()).toBe(rotated.secret);
    const again = await cli(['webhooks', 'secret', '--rotate', '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.json.generation).toBe(rotated.generation + 1);
    expect((await c.webhooks.secret()).secret).toBe(again.json.secret);
  });

  it('a task created with a webhook shows `webhook` on retrieve; verifyWebhook accepts its delivery', async () => {
    const c = client();
    const url = receiver.url('/client');
    const task: ImageTask = await c.tasks.createAndWait({ model: 'kiln-image-1', prompt: 'hooked' }, { webhook: url });
    expect(task.status).toBe('succeeded');
    expect(task.webhook).toBeDefined();
    const delivered = await eventually(
      () => c.tasks.get(task.id),
      (t) => t.webhook?.status === 'delivered',
    );
    expect(delivered.webhook).toEqual({ status: 'delivered', attempts: 1, last_error: null });
    const got = receiver.received.filter((r) => r.path === '/client' && JSON.parse(r.body).id === task.id);
    expect(got).toHaveLength(1);
    const { secret } = await c.webhooks.secret();
    const body = await verifyWebhook<ImageTask>(got[0].body, got[0].headers, secret);
    expect(body).toMatchObject({ id: task.id, status: 'succeeded' });
    await expect(
      verifyWebhook(got[0].body, got[0].headers, (await client(KEY_B).webhooks.secret()).secret),
    ).rejects.toBeInstanceOf(WebhookVerificationError);

    // The CLI shows where the time went and how the webhook fared.
    const shown = await cli(['tasks', 'get', task.id]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/queued \d+\.\d s, upstream \d+\.\d s \(1 attempt on default\)/);
    expect(shown.stdout).toContain('webhook delivered (1 attempt)');
  });

  it('kiln image --webhook and kiln video --webhook --webhook-events all; a private URL is refused', async () => {
    const img = await cli([
      'image',
      'cli hook',
      '-m',
      'kiln-image-1',
      '--no-wait',
      '--webhook',
      receiver.url('/cli'),
      '--json',
    ]);
    expect(img.code, img.stderr).toBe(0);
    const vid = await cli([
      'video',
      'cli hook',
      '-m',
      'kiln-video-1',
      '--no-wait',
      '--webhook',
      receiver.url('/cli-video'),
      '--webhook-events',
      'all',
      '--json',
    ]);
    expect(vid.code, vid.stderr).toBe(0);
    const c = client();
    expect((await c.tasks.get(img.json.id)).webhook).toBeDefined();
    // `all` delivers queued, in_progress / running and the final state: more than one delivery.
    await eventually(
      async () => receiver.received.filter((r) => r.path === '/cli-video').length,
      (n) => n >= 2,
      15_000,
    );
    await eventually(
      async () => receiver.received.filter((r) => r.path === '/cli').length,
      (n) => n === 1,
      15_000,
    );
    const refused = await cli(['image', 'x', '-m', 'kiln-image-1', '--webhook', 'https://127.0.0.1/h', '--json']);
    expect(refused.code).toBe(1);
    expect(refused.json.error.code).toBe('invalid_webhook_url');
    const badEvents = await cli(['image', 'x', '--webhook', receiver.url(), '--webhook-events', 'some']);
    expect(badEvents.code).toBe(2);
  });
});
