// The openai-videos provider against its fake upstream (a real HTTP server): progress, the job
// watch, blob copies, timeouts, failure mapping and `uncertain`.
import { describe, expect, it } from 'vitest';
import { drop, fail, type FakeOpenAIVideos } from './fake-openai-videos.js';
import { KEY_A, eventually, waitForStatus, type Kiln } from '../../../support/kiln.js';
import { DONE, useVideoKiln, videoApi } from '../../video/video-kiln.js';

let fake: FakeOpenAIVideos;
let kiln: Kiln;
let calls: ReturnType<typeof videoApi>;

useVideoKiln((f) => ({ kiln, fake, calls } = f));

const api = (key: string | null = KEY_A) => calls.api(key);
const createOk = (body: Record<string, unknown>) => calls.createOk(body);
const finish = (id: string, timeoutMs?: number) => calls.finish(id, timeoutMs);

describe('openai-videos upstream', () => {
  it('creates, reports progress, copies the video into the blob store; one watch makes every check', async () => {
    fake.setScript([
      'queued',
      'in_progress:30',
      'in_progress:30',
      'in_progress:30',
      'in_progress:70',
      'in_progress:70',
      'in_progress:70',
      'in_progress:20',
      'completed',
    ]);
    const id = await createOk({
      model: 'v-oa',
      prompt: 'a fox',
      seconds: '8',
      size: '1280x720',
      image: 'https://img.example/fox.png',
    });
    const progress: number[] = [];
    const v = await waitForStatus(async () => {
      const r = await api()(`/v1/videos/${id}`);
      if (r.json.status === 'in_progress') progress.push(r.json.progress);
      return r;
    }, DONE);
    expect(v).toMatchObject({
      status: 'completed',
      progress: 100,
      seconds: '8',
      size: '1280x720',
      error: null,
      prompt: 'a fox',
    });
    expect(progress).toContain(30);
    expect(progress).toContain(70);
    expect(progress).toEqual([...progress].sort((a, b) => a - b));
    const [sent] = fake.creates().filter((r) => r.body.prompt === 'a fox');
    expect(sent.body).toEqual({
      model: 'sora-2',
      prompt: 'a fox',
      seconds: '8',
      size: '1280x720',
      input_reference: { image_url: 'https://img.example/fox.png' },
    });
    expect(sent.headers.authorization).toBe(`Bearer ${KEY_A}`);
    expect(sent.headers['idempotency-key']).toBeUndefined();
    expect(fake.requests.some((r) => r.path.endsWith('/content') && r.query.get('variant') === 'video')).toBe(true);
    const stored = Buffer.from(await (await fetch(v.video_url)).arrayBuffer());
    expect(stored.equals(fake.video)).toBe(true);
    expect(v.video_url.startsWith(`${kiln.baseUrl}/v1/files/`)).toBe(true);
    const redirect = await api()(`/v1/videos/${id}/content?variant=video`);
    expect([redirect.status, redirect.headers.get('location')]).toEqual([302, v.video_url]);
    // The fake's "video" is random bytes: no still can be made of it (503, never a hang or a 500).
    const still = await api()(`/v1/videos/${id}/content?variant=thumbnail`);
    expect([still.status, still.json?.error?.code]).toEqual([503, 'service_unavailable']);
    expect((await api()(`/v1/videos/${id}/content?variant=poster`)).status).toBe(400);

    const h = kiln.api.client.workflow.getHandle(id);
    const desc = await eventually(
      () => h.describe(),
      (d) => d.status.name === 'COMPLETED',
    );
    expect(desc.type).toBe('videoTaskWorkflow');
    expect(
      desc.typedSearchAttributes
        .getAll()
        .filter((p) => p.key.name.startsWith('Kiln'))
        .map((p) => [p.key.name, p.value])
        .sort(),
    ).toEqual([
      ['KilnModel', 'v-oa'],
      ['KilnOwner', expect.stringMatching(/^[a-f0-9]{64}$/)],
    ]);
    const { events } = await h.fetchHistory();
    const timers = (events ?? []).filter((e) => e.timerStartedEventAttributes).length;
    const watches = (events ?? []).filter(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'watchVideo',
    ).length;
    const checks = fake.requests.filter((r) => r.method === 'GET' && /^\/v1\/videos\/[^/]+$/.test(r.path)).length;
    // Nine checks, all made by one watch activity in the worker: no durable timer between them.
    expect(checks).toBe(9);
    expect([watches, timers]).toEqual([1, 0]);
  });

  it(
    'maps upstream failures: create 401/402/429/400, a ' + 'failed job, retries a 500 then gives upstream_error',
    async () => {
      const cases: [() => void, string, string][] = [
        [() => fake.enqueueCreate(fail(401, 'bad key')), 'auth_failed', 'bad key'],
        [() => fake.enqueueCreate(fail(402, 'no credit')), 'insufficient_balance', 'no credit'],
        [() => fake.enqueueCreate(fail(429, 'slow down')), 'upstream_rate_limited', 'slow down'],
        [() => fake.enqueueCreate(fail(400, 'bad prompt')), 'invalid_request', 'bad prompt'],
        [
          () => fake.setScript(['in_progress:10', 'failed:video_generation_failed:the render crashed']),
          'upstream_error',
          'the render crashed',
        ],
        [() => fake.setScript(['failed:moderation_blocked:not allowed']), 'invalid_request', 'not allowed'],
        // A create is not resent on a 5xx (the model is not idempotent), as for images.
        [() => fake.enqueueCreate(fail(500, 'boom')), 'upstream_error', 'upstream answered 500: boom'],
      ];
      for (const [arrange, code, message] of cases) {
        fake.reset();
        arrange();
        const v = await finish(await createOk({ model: 'v-oa', prompt: code }));
        expect([v.status, v.error?.code], message).toEqual(['failed', code]);
        expect(v.error.message).toContain(message);
        expect(v.completed_at).toBeGreaterThanOrEqual(v.created_at);
        expect(v.video_url).toBeUndefined();
        const content = await api()(`/v1/videos/${v.id}/content`);
        expect([content.status, content.json.error.code]).toEqual([409, 'task_failed']);
        expect(fake.creates()).toHaveLength(1);
      }
    },
  );

  it(
    'a status check answered 503 is retried and the task ' + 'completes; one that keeps failing ends upstream_error',
    async () => {
      fake.setScript(['completed']).enqueueCheck(fail(503, 'blip'), fail(429, 'busy'));
      const v = await finish(await createOk({ model: 'v-oa-idem', prompt: 'retry me' }));
      expect(v.status).toBe('completed');
      const job = fake.creates().find((r) => r.body.prompt === 'retry me')!.jobId!;
      expect(fake.requests.filter((r) => r.method === 'GET' && r.path === `/v1/videos/${job}`)).toHaveLength(3);

      fake.reset();
      fake.enqueueCheck(fail(503, 'down'), fail(503, 'still down'));
      const f = await finish(await createOk({ model: 'v-oa', prompt: 'give up' }));
      expect([f.status, f.error.code]).toEqual(['failed', 'upstream_error']);
      expect(f.error.message).toContain('still down');
    },
  );

  it('ends failed / upstream_timeout when the job outlasts the model overall timeout', async () => {
    fake.setScript(['in_progress:5']);
    const start = Date.now();
    const v = await finish(await createOk({ model: 'v-oa-slow', prompt: 'forever' }), 20_000);
    expect([v.status, v.error?.code]).toEqual(['failed', 'upstream_timeout']);
    expect(Date.now() - start).toBeGreaterThanOrEqual(2000);
    expect(Date.now() - start).toBeLessThan(10_000);
  });

  it(
    'a create whose answer is lost after sending ends uncertain (not ' +
      'resent); an idempotent model retries with the same Idempotency-Key',
    async () => {
      fake.enqueueCreate(drop());
      const u = await finish(await createOk({ model: 'v-oa', prompt: 'lost' }));
      // Kiln's uncertain, as OpenAI's four statuses show it: failed, code `uncertain`.
      expect(u.status).toBe('failed');
      expect(u.error.code).toBe('uncertain');
      expect(u.uncertain_reason).toMatch(/cannot be confirmed|not resent/);
      expect(fake.creates()).toHaveLength(1);

      fake.reset();
      fake.setScript(['completed']).enqueueCreate(drop());
      const id = await createOk({ model: 'v-oa-idem', prompt: 'again' });
      const ok = await finish(id);
      expect(ok.status).toBe('completed');
      const creates = fake.creates();
      expect(creates).toHaveLength(2);
      expect(creates.map((c) => c.headers['idempotency-key'])).toEqual([id, id]);
    },
  );
});
