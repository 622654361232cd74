// The kiln_channel_* series (src/channels/metrics.ts) are written as text from one read of the
// channels' snapshots: the same text prom-client's registry writes for a counter, a histogram and
// two gauges holding the same values, and after the rest of a scrape as prom-client separates metrics.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { channelSeriesText } from '../../../src/channels/metrics.js';
import type { ChannelReading } from '../../../src/channels/readings.js';
import { CALL_OUTCOMES, LATENCY_BUCKETS_MS, type CallOutcome } from '../../../src/channels/state.js';
import { ApiMetrics } from '../../../src/ops/metrics.js';

const STATES = ['closed', 'open', 'half_open'] as const;

interface Fake {
  model: string;
  channel: string;
  state: (typeof STATES)[number];
  inFlight: number;
  totals: Partial<Record<CallOutcome, number>>;
  /** Latencies in ms whose seconds are exact binary fractions, so both sums are exact. */
  latenciesMs: number[];
}

const FAKES: Fake[] = [
  { model: 'm-1', channel: 'primary', state: 'open', inFlight: 0, totals: { refused: 2 }, latenciesMs: [250, 500] },
  { model: 'm-1', channel: 'back"up\\', state: 'closed', inFlight: 2, totals: {}, latenciesMs: [] },
  {
    model: 'm-2',
    channel: 'only',
    state: 'half_open',
    inFlight: 1,
    totals: { succeeded: 3, refused: 1 },
    latenciesMs: [125, 120_000, 200_000, 1000],
  },
];

/** What the series read: the ids and these parts of a snapshot (the rest is the admin API's). */
const readings = (): ChannelReading[] =>
  FAKES.map(
    (f) =>
      ({
        model: { id: f.model },
        channel: { id: f.channel },
        snapshot: {
          state: f.state,
          inFlight: f.inFlight,
          totals: Object.fromEntries(CALL_OUTCOMES.map((o) => [o, f.totals[o] ?? 0])),
          latency: {
            buckets: LATENCY_BUCKETS_MS.map((le) => f.latenciesMs.filter((ms) => ms <= le).length),
            count: f.latenciesMs.length,
            sumMs: f.latenciesMs.reduce((a, b) => a + b, 0),
          },
        },
      }) as unknown as ChannelReading,
  );

/** The same values in prom-client's own metrics; `fill: false` leaves them without samples. */
function viaPromClient(fill = true): Registry {
  const registry = new Registry();
  const registers = [registry];
  const requests = new Counter({
    name: 'kiln_channel_requests_total',
    help: 'Upstream calls by model, channel and outcome, deployment-wide (read from Redis at scrape time)',
    labelNames: ['model', 'channel', 'outcome'],
    registers,
  });
  const latency = new Histogram({
    name: 'kiln_channel_request_duration_seconds',
    help: 'Upstream call latency by model and channel (canceled calls left out), deployment-wide',
    labelNames: ['model', 'channel'],
    buckets: LATENCY_BUCKETS_MS.map((ms) => ms / 1000),
    registers,
  });
  const state = new Gauge({
    name: 'kiln_channel_state',
    help: "A channel's health state: 1 for the current one (closed, open = cooling down, half_open = probing), else 0",
    labelNames: ['model', 'channel', 'state'],
    registers,
  });
  const inFlight = new Gauge({
    name: 'kiln_channel_in_flight',
    help: 'Upstream calls holding a lease on the channel now, deployment-wide',
    labelNames: ['model', 'channel'],
    registers,
  });
  if (!fill) return registry;
  for (const f of FAKES) {
    const labels = { model: f.model, channel: f.channel };
    for (const outcome of CALL_OUTCOMES) requests.inc({ ...labels, outcome }, f.totals[outcome] ?? 0);
    latency.zero(labels);
    for (const ms of f.latenciesMs) latency.observe(labels, ms / 1000);
    for (const s of STATES) state.set({ ...labels, state: s }, f.state === s ? 1 : 0);
    inFlight.set(labels, f.inFlight);
  }
  return registry;
}

afterEach(() => vi.useRealTimers());

describe('the kiln_channel_* series', () => {
  it('are the text prom-client writes for the same values', async () => {
    const expected = (await viaPromClient().metrics()).trimEnd();
    expect(expected).toContain('kiln_channel_request_duration_seconds_bucket{le="120",model="m-2",channel="only"} 3');
    expect(expected).toContain('kiln_channel_state{model="m-1",channel="back\\"up\\\\",state="closed"} 1');
    expect(await channelSeriesText(async () => readings())).toBe(expected);
  });

  it('have no samples, only HELP and TYPE, when the read fails or hangs', async () => {
    const empty = (await viaPromClient(false).metrics()).trimEnd();
    expect(await channelSeriesText(() => Promise.reject(new Error('Redis is down')))).toBe(empty);
    vi.useFakeTimers();
    const hung = channelSeriesText(() => new Promise<ChannelReading[]>(() => undefined));
    await vi.advanceTimersByTimeAsync(1000);
    expect(await hung).toBe(empty);
  });

  it('follow the rest of the scrape, as prom-client separates metrics', async () => {
    const metrics = new ApiMetrics(
      { queueDepth: async () => 0, moreText: () => channelSeriesText(async () => readings()) },
      { defaultMetrics: false },
    );
    const text = await metrics.render();
    const rest = new ApiMetrics({ queueDepth: async () => 0 }, { defaultMetrics: false });
    expect(text).toBe(`${await rest.render()}\n${(await viaPromClient().metrics()).trimEnd()}\n`);
  });
});
