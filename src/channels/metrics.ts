// The channels' Prometheus series, read from Redis at scrape time (src/channels/redis-state.ts):
// calls by outcome, the latency histogram, the health state and the calls in flight, per model and
// channel. Workers record every call there, so these are the deployment's numbers, not this
// process's: the API reports them, the workers' own endpoint does not.
//
// They are written as text, not as prom-client metrics, because the histogram's buckets, sum and
// count come whole from each snapshot, and prom-client's public Histogram only takes observations
// one at a time. The other three could be a Counter and Gauges filled by `collect()`, but then a
// scrape would read Redis twice (prom-client's three, the histogram's text), and under the API
// supervisor those three would come from every process, each with the same values, to be kept once
// by the `first` aggregator. Written here, all four come from one read by the process that answers
// the scrape, which appends them after the rest (src/ops/metrics.ts), with or without a supervisor:
// deployment-wide values, read once, never summed over API processes.
import { metricText, type Sample } from '../ops/exposition.js';
import { CALL_OUTCOMES, LATENCY_BUCKETS_MS, type ChannelHealthState } from './state.js';
import { within, type ChannelReading } from './readings.js';

const STATES: readonly ChannelHealthState[] = ['closed', 'open', 'half_open'];
/** A scrape must not hang on a dead Redis: past this the channel series have no samples in it. */
const READ_TIMEOUT_MS = 1000;
const HISTOGRAM = 'kiln_channel_request_duration_seconds';

const base = (r: ChannelReading) => ({ model: r.model.id, channel: r.channel.id });

/**
 * The four series' exposition text (no trailing newline) from one call of `read`, every channel's
 * snapshot. Values are the snapshot's, so nothing accumulates in this process and a restart loses
 * nothing. A read that fails or times out leaves the series without samples (HELP and TYPE only).
 */
export async function channelSeriesText(read: () => Promise<ChannelReading[]>): Promise<string> {
  const all = (await within(read(), READ_TIMEOUT_MS)) ?? [];
  const samples = (of: (r: ChannelReading) => Sample[]) => all.flatMap(of);
  return [
    metricText(
      'kiln_channel_requests_total',
      'Upstream calls by model, channel and outcome, deployment-wide (read from Redis at scrape time)',
      'counter',
      samples((r) =>
        CALL_OUTCOMES.map((outcome) => ({ labels: { ...base(r), outcome }, value: r.snapshot.totals[outcome] })),
      ),
    ),
    metricText(
      HISTOGRAM,
      'Upstream call latency by model and channel (canceled calls left out), deployment-wide',
      'histogram',
      samples((r) => {
        const { buckets, count, sumMs } = r.snapshot.latency;
        const labels = base(r);
        return [
          ...LATENCY_BUCKETS_MS.map((le, i) => ({
            name: `${HISTOGRAM}_bucket`,
            labels: { le: le / 1000, ...labels },
            value: buckets[i] ?? 0,
          })),
          { name: `${HISTOGRAM}_bucket`, labels: { le: '+Inf', ...labels }, value: count },
          { name: `${HISTOGRAM}_sum`, labels, value: sumMs / 1000 },
          { name: `${HISTOGRAM}_count`, labels, value: count },
        ];
      }),
    ),
    metricText(
      'kiln_channel_state',
      "A channel's health state: 1 for the current one (closed, open = cooling down, half_open = probing), else 0",
      'gauge',
      samples((r) =>
        STATES.map((state) => ({ labels: { ...base(r), state }, value: r.snapshot.state === state ? 1 : 0 })),
      ),
    ),
    metricText(
      'kiln_channel_in_flight',
      'Upstream calls holding a lease on the channel now, deployment-wide',
      'gauge',
      samples((r) => [{ labels: base(r), value: r.snapshot.inFlight }]),
    ),
  ].join('\n\n');
}
