// The channels' health for operators: GET /admin/v1/channels and the kiln_channel_* Prometheus
// series (src/channels/admin.ts, src/channels/metrics.ts), on a real Kiln whose image model routes
// over two channels: a fake Gemini that refuses (429, then 503) and cools down, and a local one that
// takes every task. Also: the operator token, Redis down, and several API processes reporting the
// deployment-wide series once, not once per process.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { freePort, startRedis, type Service } from '../../../scripts/services.js';
import { dualChannelModel, fail, startFakeGemini, type FakeGemini } from '../providers/gemini/fake-gemini.js';
import { http, imageSteps, KEY_A, startKiln, type Kiln } from '../../support/kiln.js';
import { spawnEntry } from '../../support/spawn-entry.js';

const TOKEN = 'channels-admin-operator-token-0123456789abcdef';
const PATH = '/admin/v1/channels';
const MODEL = 'img-dual';

let fake: FakeGemini;
let kiln: Kiln;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  fake = await startFakeGemini();
  // Both refusals: the first channel cools down after the second; a 429 without Retry-After does not
  // cool it by itself.
  fake.enqueue(fail(429, 'slow down')).setDefault(fail(503, 'overloaded right now'));
  kiln = await startKiln({
    env: { KILN_OPERATOR_TOKEN: TOKEN },
    models: [
      // The cool-down is long enough to stay open for the whole file, the spawned API's start included.
      dualChannelModel(fake, MODEL),
      { id: 'kiln-chat-1', kind: 'chat', provider: 'local' },
    ],
  });
  // One at a time, so that which task met which channel state is known.
  const steps = imageSteps(() => kiln.baseUrl);
  for (let i = 0; i < 3; i++) {
    const done = await steps.finish(await steps.submit(MODEL));
    expect(done.status, JSON.stringify(done)).toBe('succeeded');
  }
}, 120_000);

afterAll(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
  await kiln?.stop();
  await fake?.close();
});

const admin = (token: string | null = TOKEN) => http(kiln.baseUrl, token)(PATH);
/** The kiln_channel_* lines of a scrape (samples and HELP/TYPE). */
const channelLines = (text: string) => text.split('\n').filter((l) => /^(# (HELP|TYPE) )?kiln_channel_/.test(l));
const sample = (text: string, series: string) => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
};

describe('GET /admin/v1/channels', () => {
  it("lists every model's channels with their state, load, outcomes and last error", async () => {
    const r = await admin();
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get('cache-control')).toBe('no-store');
    expect(r.json.object).toBe('list');
    // The first refused twice and cools down: the third task went straight to the backup.
    expect(fake.requests).toHaveLength(2);
    const byKey = Object.fromEntries(r.json.data.map((e: any) => [`${e.model}/${e.channel}`, e]));
    expect(Object.keys(byKey)).toEqual([`${MODEL}/primary`, `${MODEL}/backup`, 'kiln-chat-1/default']);

    const now = Date.now() / 1000;
    const primary = byKey[`${MODEL}/primary`];
    expect(primary).toMatchObject({
      kind: 'image',
      provider: 'gemini',
      priority: 10,
      weight: 1,
      state: 'open',
      in_flight: 0,
      concurrency: 8,
      rate_per_second: null,
      success_rate: 0,
      calls_5m: { succeeded: 0, refused: 2, not_sent: 0, failed: 0, ambiguous: 0, canceled: 0 },
      last_error: { code: 'upstream_error' },
    });
    expect(primary.cooling_until).toBeGreaterThan(now + 200);
    expect(primary.last_error.message).toContain('overloaded right now');
    expect(primary.last_error.at).toBeGreaterThan(now - 120);
    expect(primary.last_error.at).toBeLessThanOrEqual(now + 1);
    expect(primary.p50_ms).toBeGreaterThanOrEqual(0);
    expect(primary.p95_ms).toBeGreaterThanOrEqual(primary.p50_ms);

    const backup = byKey[`${MODEL}/backup`];
    expect(backup).toMatchObject({
      provider: 'local',
      priority: 0,
      state: 'closed',
      cooling_until: null,
      in_flight: 0,
      concurrency: 4,
      success_rate: 1,
      calls_5m: { succeeded: 3, refused: 0 },
      last_error: null,
    });
    expect(backup.p50_ms).toBeGreaterThanOrEqual(15);

    // A chat channel has no concurrency setting; a model without channels is its `default` one.
    expect(byKey['kiln-chat-1/default']).toMatchObject({ kind: 'chat', concurrency: null, state: 'closed' });
    for (const e of r.json.data)
      expect(Object.keys(e).sort()).toEqual(
        [
          'model',
          'kind',
          'channel',
          'provider',
          'priority',
          'weight',
          'state',
          'cooling_until',
          'in_flight',
          'concurrency',
          'rate_per_second',
          'success_rate',
          'p50_ms',
          'p95_ms',
          'calls_5m',
          'last_error',
        ].sort(),
      );
  });

  it('needs the operator token: no token, a user key or a wrong token is refused', async () => {
    for (const token of [null, KEY_A, `${TOKEN}x`]) {
      const r = await admin(token);
      expect(r.status, String(token)).toBe(401);
      expect(r.json.error.code).toBe('missing_api_key');
      expect(r.text).not.toContain('primary');
    }
  });

  it('is documented under the admin tag, with its schema', async () => {
    const doc = (await http(kiln.baseUrl, null)('/openapi.json')).json;
    const op = doc.paths[PATH].get;
    expect(op.tags).toEqual(['admin']);
    expect(op.security).toEqual([{ operatorToken: [] }]);
    expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['200', '401', '404', '503']));
    const entry = doc.components.schemas.ChannelHealth;
    expect(entry.properties.state.enum).toEqual(['closed', 'open', 'half_open']);
    expect(entry.properties.cooling_until.description).toMatch(/Epoch seconds/);
  });
});

describe('the kiln_channel_* series', () => {
  it('report totals, latency, state and calls in flight from Redis, with no owner label', async () => {
    const text = await (await fetch(`${kiln.baseUrl}/metrics`)).text();
    const p = `model="${MODEL}",channel="primary"`;
    const b = `model="${MODEL}",channel="backup"`;
    expect(sample(text, `kiln_channel_requests_total{${p},outcome="refused"}`)).toBe(2);
    expect(sample(text, `kiln_channel_requests_total{${p},outcome="succeeded"}`)).toBe(0);
    expect(sample(text, `kiln_channel_requests_total{${b},outcome="succeeded"}`)).toBe(3);
    expect(sample(text, `kiln_channel_state{${p},state="open"}`)).toBe(1);
    expect(sample(text, `kiln_channel_state{${p},state="closed"}`)).toBe(0);
    expect(sample(text, `kiln_channel_state{${b},state="closed"}`)).toBe(1);
    expect(sample(text, `kiln_channel_state{${b},state="half_open"}`)).toBe(0);
    expect(sample(text, `kiln_channel_in_flight{${b}}`)).toBe(0);
    // Buckets in seconds, cumulative: every call (20 ms + overhead) is at or under 120 s.
    expect(sample(text, `kiln_channel_request_duration_seconds_bucket{le="120",${b}}`)).toBe(3);
    expect(sample(text, `kiln_channel_request_duration_seconds_bucket{le="+Inf",${b}}`)).toBe(3);
    expect(sample(text, `kiln_channel_request_duration_seconds_count{${p}}`)).toBe(2);
    expect(sample(text, `kiln_channel_request_duration_seconds_sum{${b}}`)).toBeGreaterThan(0.04);
    expect(sample(text, `kiln_channel_request_duration_seconds_sum{${b}}`)).toBeLessThan(10);
    const lines = channelLines(text);
    expect(lines).toContain('# TYPE kiln_channel_requests_total counter');
    expect(lines).toContain('# TYPE kiln_channel_request_duration_seconds histogram');
    expect(lines).toContain('# TYPE kiln_channel_state gauge');
    expect(lines).toContain('# TYPE kiln_channel_in_flight gauge');
    expect(lines.join('\n')).not.toMatch(/owner/);
    expect(
      lines.filter((l) => l.startsWith('kiln_channel_')).every((l) => /\{model="[^"]+",channel=|\{le=/.test(l)),
    ).toBe(true);
  });

  it('are reported once, not once per process, by an API of several processes', async () => {
    const single = channelLines(await (await fetch(`${kiln.baseUrl}/metrics`)).text());
    const port = await freePort();
    const s = spawnEntry(
      'src/api/main.ts',
      { ...kiln.env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info', API_PROCESSES: '2' },
      'kiln api listening',
      cleanups,
    );
    await s.ready;
    await vi.waitFor(
      () => expect(new Set(s.lines.filter((l) => l.msg === 'kiln api listening').map((l) => l.pid)).size).toBe(2),
      { timeout: 20_000, interval: 100 },
    );
    // A fresh connection each time, so the scrapes reach both processes; each asks the supervisor.
    for (let i = 0; i < 4; i++) {
      const res = await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { connection: 'close' } });
      expect(channelLines(await res.text())).toEqual(single);
    }
    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
  }, 60_000);
});

describe('with Redis down', () => {
  let redis: Service;
  let down: Kiln;
  beforeAll(async () => {
    redis = await startRedis({ dir: join(inject('tmpRoot'), `redis-channels-${randomBytes(3).toString('hex')}`) });
    down = await startKiln({ redisUrl: redis.url, workers: false, env: { KILN_OPERATOR_TOKEN: TOKEN } });
    await redis.stop();
  }, 60_000);
  afterAll(async () => {
    await down?.stop();
  });

  it('the admin call answers 503 service_unavailable and /metrics leaves the channel series out', async () => {
    const started = Date.now();
    const r = await http(down.baseUrl, TOKEN)(PATH);
    expect(r.status, r.text).toBe(503);
    expect(r.json.error.code).toBe('service_unavailable');
    expect(r.json.error.message).toMatch(/channels' state \(Redis\) is unavailable/);
    expect(r.headers.get('retry-after')).toBe('1');
    const m = await fetch(`${down.baseUrl}/metrics`);
    expect(m.status).toBe(200);
    expect(channelLines(await m.text()).filter((l) => !l.startsWith('#'))).toEqual([]);
    // Each read is bounded (2 s for the admin call, 1 s for /metrics); the bound catches one left
    // waiting on Redis, not their speed.
    expect(Date.now() - started).toBeLessThan(15_000);
  });
});
