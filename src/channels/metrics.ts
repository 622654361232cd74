// The channels' Prometheus series, read from Redis at scrape time (src/channels/redis-state.ts):
// calls by outcome, the latency histogram, the health state and the calls in flight, per model and
// channel. Workers record every call there, so these are the deployment's numbers, not this
// process's: the API reports them, the workers' own endpoint does not.
//
// With several API processes, the supervisor builds a scrape from every process's registry
// (src/ops/api-cluster.ts) and by default sums each series. Each process read the same Redis, so a
// sum would multiply these by the number of processes; each series is therefore declared with
// prom-client's `first` aggregator: the supervisor keeps one process's copy. A process whose read
// failed reports no samples, and `first` then takes another's. Every process reads on each scrape
// (one round trip per channel): cheaper than routing the read to one chosen process.
import type { Aggregator, Metric, Registry } from 'prom-client';
import { CALL_OUTCOMES, LATENCY_BUCKETS_MS, type ChannelHealthState } from './state.js';
import { within, type ChannelReading } from './readings.js';

const STATES: readonly ChannelHealthState[] = ['closed', 'open', 'half_open'];
/** A scrape must not hang on a dead Redis: past this the channel series are left out of it. */
const READ_TIMEOUT_MS = 1000;
const AGGREGATOR: Aggregator = 'first';

type Labels = Record<string, string | number>;
interface Sample {
  metricName?: string;
  labels: Labels;
  value: number;
}

const base = (r: ChannelReading): Labels => ({ model: r.model.id, channel: r.channel.id });

/**
 * Registers the four series on `registry`; `read` gives every channel's snapshot. Values are the
 * snapshot's, so nothing accumulates in this process and a restart loses nothing.
 */
export function registerChannelSeries(registry: Registry, read: () => Promise<ChannelReading[]>): void {
  // prom-client asks each metric of a scrape in the same tick: the four share one read of Redis.
  let pending: Promise<ChannelReading[] | null> | undefined;
  const readings = () => (pending ??= within(read(), READ_TIMEOUT_MS).finally(() => (pending = undefined)));

  const series = (name: string, help: string, type: string, samples: (r: ChannelReading) => Sample[]) => {
    const metric = {
      name,
      help,
      type,
      aggregator: AGGREGATOR,
      async get() {
        const all = await readings();
        return { name, help, type, aggregator: AGGREGATOR, values: all ? all.flatMap(samples) : [] };
      },
      // Nothing to reset: every value is read afresh.
      reset() {},
    };
    // prom-client's registry takes any object with this shape; its types only name its own classes.
    registry.registerMetric(metric as unknown as Metric);
  };

  series(
    'kiln_channel_requests_total',
    'Upstream calls by model, channel and outcome, deployment-wide (read from Redis at scrape time)',
    'counter',
    (r) => CALL_OUTCOMES.map((outcome) => ({ labels: { ...base(r), outcome }, value: r.snapshot.totals[outcome] })),
  );

  const histogram = 'kiln_channel_request_duration_seconds';
  series(
    histogram,
    'Upstream call latency by model and channel (canceled calls left out), deployment-wide',
    'histogram',
    (r) => {
      const { buckets, count, sumMs } = r.snapshot.latency;
      const labels = base(r);
      return [
        ...LATENCY_BUCKETS_MS.map((le, i) => ({
          metricName: `${histogram}_bucket`,
          labels: { le: le / 1000, ...labels },
          value: buckets[i] ?? 0,
        })),
        { metricName: `${histogram}_bucket`, labels: { le: '+Inf', ...labels }, value: count },
        { metricName: `${histogram}_sum`, labels, value: sumMs / 1000 },
        { metricName: `${histogram}_count`, labels, value: count },
      ];
    },
  );

  series(
    'kiln_channel_state',
    "A channel's health state: 1 for the current one (closed, open = cooling down, half_open = probing), else 0",
    'gauge',
    (r) => STATES.map((state) => ({ labels: { ...base(r), state }, value: r.snapshot.state === state ? 1 : 0 })),
  );

  series(
    'kiln_channel_in_flight',
    'Upstream calls holding a lease on the channel now, deployment-wide',
    'gauge',
    (r) => [{ labels: base(r), value: r.snapshot.inFlight }],
  );
}
