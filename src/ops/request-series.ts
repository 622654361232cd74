// The HTTP request counter and latency histogram, counted into one record per series. A bound
// prom-client histogram re-hashes its label object on every `observe`, and the counter beside it
// does the same: together about 3 µs of a ~100 µs poll (BENCHMARKS.md). Here a request costs one
// map lookup and a few additions; the labelled values are built only when Prometheus scrapes.
// Both are registered on a prom-client registry as ordinary metrics: the exposition text, and the
// sum across API processes, are prom-client's own.
import type { Metric, MetricValue, MetricValueWithName, Registry } from 'prom-client';

export type RequestLabels = { method: string; route: string; status: string };

/** One method, route and status: its request count, latency sum and bucket counts. */
export class RequestSeriesEntry {
  count = 0;
  sum = 0;
  /** Requests in each bucket alone (not cumulative); the last one is above every bound. */
  readonly buckets: Float64Array;
  constructor(
    readonly labels: Readonly<RequestLabels>,
    private readonly bounds: readonly number[],
  ) {
    this.buckets = new Float64Array(bounds.length + 1);
  }

  record(seconds: number): void {
    this.count += 1;
    this.sum += seconds;
    const { bounds } = this;
    let i = 0;
    while (i < bounds.length && seconds > bounds[i]) i++;
    this.buckets[i] += 1;
  }
}

export interface RequestSeriesOptions {
  counter: { name: string; help: string };
  histogram: { name: string; help: string; buckets: readonly number[] };
  registers: Registry[];
}

/** The metric object prom-client's registry asks for its values (its `Metric` interface). */
interface Collected {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  aggregator: 'sum';
  get(): Promise<{ name: string; help: string; type: string; aggregator: 'sum'; values: unknown[] }>;
  reset(): void;
}

type Bucket = MetricValueWithName<string> & { exemplar?: null };

export class RequestSeries {
  private readonly entries: RequestSeriesEntry[] = [];
  private readonly byKey = new Map<string, RequestSeriesEntry>();
  private readonly bounds: readonly number[];

  constructor(opts: RequestSeriesOptions) {
    this.bounds = Object.freeze([...opts.histogram.buckets].sort((a, b) => a - b));
    const reset = () => {
      for (const e of this.entries) {
        e.count = 0;
        e.sum = 0;
        e.buckets.fill(0);
      }
    };
    const metric = (
      { name, help }: { name: string; help: string },
      type: Collected['type'],
      values: () => unknown[],
    ): Collected => ({
      name,
      help,
      type,
      aggregator: 'sum',
      get: async () => ({ name, help, type, aggregator: 'sum', values: values() }),
      reset,
    });
    const counter = metric(opts.counter, 'counter', () => this.counterValues());
    const histogram = metric(opts.histogram, 'histogram', () => this.histogramValues(opts.histogram.name));
    for (const r of opts.registers) {
      // prom-client's own metrics are the only declared members of `Metric`; any object with a
      // name and `get` is what its registry reads (registry.js).
      r.registerMetric(counter as unknown as Metric);
      r.registerMetric(histogram as unknown as Metric);
    }
  }

  /** The series of one method, route (template) and status. */
  entry(method: string, route: string, status: number): RequestSeriesEntry {
    const key = `${method} ${route} ${status}`;
    let e = this.byKey.get(key);
    if (!e) {
      e = new RequestSeriesEntry(Object.freeze({ method, route, status: String(status) }), this.bounds);
      this.byKey.set(key, e);
      this.entries.push(e);
    }
    return e;
  }

  private counterValues(): MetricValue<string>[] {
    return this.entries.filter((e) => e.count > 0).map((e) => ({ labels: { ...e.labels }, value: e.count }));
  }

  /**
   * As prom-client's histogram lists them: per series, cumulative buckets (with no exemplar),
   * `+Inf`, sum, count.
   */
  private histogramValues(name: string): Bucket[] {
    const values: Bucket[] = [];
    for (const e of this.entries) {
      if (e.count === 0) continue;
      let acc = 0;
      this.bounds.forEach((le, i) => {
        acc += e.buckets[i];
        values.push({ labels: { le, ...e.labels }, value: acc, metricName: `${name}_bucket`, exemplar: null });
      });
      values.push(
        { labels: { le: '+Inf', ...e.labels }, value: e.count, metricName: `${name}_bucket`, exemplar: null },
        { labels: { ...e.labels }, value: e.sum, metricName: `${name}_sum` },
        { labels: { ...e.labels }, value: e.count, metricName: `${name}_count` },
      );
    }
    return values;
  }
}
