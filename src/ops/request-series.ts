// The HTTP request counter and latency histogram, counted into one record per series. A bound
// prom-client histogram re-hashes its label object on every `observe`, and the counter beside it
// does the same: a visible share of a poll's CPU. Here a request costs one map lookup and a few
// additions. The series are Kiln's own, not prom-client metrics: they write their own Prometheus
// text at scrape time (the same text prom-client's counter and histogram write,
// test/unit/ops/request-series.test.ts), which goes before the registry's, and several API
// processes send their snapshots to the supervisor to be summed (src/ops/api-cluster.ts).
import { escape, labelValue, number } from './exposition.js';

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
}

/** The series of one process as plain JSON: what an API process sends its supervisor. */
export interface SeriesSnapshot {
  counter: { name: string; help: string };
  histogram: { name: string; help: string };
  /** The histogram's bucket bounds, ascending. */
  bounds: number[];
  /** Series with at least one request; `buckets` as in RequestSeriesEntry. */
  entries: { labels: RequestLabels; count: number; sum: number; buckets: number[] }[];
}

export class RequestSeries {
  private readonly entries: RequestSeriesEntry[] = [];
  private readonly byKey = new Map<string, RequestSeriesEntry>();
  private readonly bounds: readonly number[];

  constructor(private readonly opts: RequestSeriesOptions) {
    this.bounds = Object.freeze([...opts.histogram.buckets].sort((a, b) => a - b));
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

  reset(): void {
    for (const e of this.entries) {
      e.count = 0;
      e.sum = 0;
      e.buckets.fill(0);
    }
  }

  snapshot(): SeriesSnapshot {
    const { counter, histogram } = this.opts;
    return {
      counter: { name: counter.name, help: counter.help },
      histogram: { name: histogram.name, help: histogram.help },
      bounds: [...this.bounds],
      entries: this.entries
        .filter((e) => e.count > 0)
        .map((e) => ({ labels: { ...e.labels }, count: e.count, sum: e.sum, buckets: Array.from(e.buckets) })),
    };
  }
}

/**
 * The series of several processes summed, as prom-client's `sum` aggregator sums its metrics: per
 * method, route and status, in the order they first appear, each value added to 0 in turn.
 */
export function mergeSnapshots(snapshots: readonly SeriesSnapshot[]): SeriesSnapshot | undefined {
  if (snapshots.length === 0) return undefined;
  const byKey = new Map<string, SeriesSnapshot['entries'][number]>();
  for (const s of snapshots) {
    for (const e of s.entries) {
      const key = `${e.labels.method} ${e.labels.route} ${e.labels.status}`;
      const into = byKey.get(key);
      if (!into) {
        byKey.set(key, { labels: e.labels, count: e.count, sum: e.sum, buckets: [...e.buckets] });
        continue;
      }
      into.count += e.count;
      into.sum += e.sum;
      e.buckets.forEach((b, i) => (into.buckets[i] += b));
    }
  }
  return { ...snapshots[0], entries: [...byKey.values()] };
}

/**
 * The Prometheus text (format 0.0.4) of the counter and the histogram, as prom-client's registry
 * writes a metric: HELP and TYPE lines, then per series its counter line; per series its
 * cumulative buckets (`le` first), `+Inf`, sum and count. No trailing newline.
 */
export function seriesText({ counter, histogram, bounds, entries }: SeriesSnapshot): string {
  const c = [`# HELP ${escape(counter.name)} ${escape(counter.help)}`, `# TYPE ${escape(counter.name)} counter`];
  const name = escape(histogram.name);
  const h = [`# HELP ${name} ${escape(histogram.help)}`, `# TYPE ${name} histogram`];
  for (const { labels, count, sum, buckets } of entries) {
    const l = `method="${labelValue(labels.method)}",route="${labelValue(labels.route)}",status="${labelValue(labels.status)}"`;
    c.push(`${escape(counter.name)}{${l}} ${count}`);
    let acc = 0;
    bounds.forEach((le, i) => {
      acc += buckets[i];
      h.push(`${name}_bucket{le="${le}",${l}} ${acc}`);
    });
    h.push(
      `${name}_bucket{le="+Inf",${l}} ${count}`,
      `${name}_sum{${l}} ${number(sum)}`,
      `${name}_count{${l}} ${count}`,
    );
  }
  return `${c.join('\n')}\n\n${h.join('\n')}`;
}

/** The series' text before a prom-client registry's `metrics()` text, as one exposition. */
export function withRegistryText(series: string, registry: string): string {
  return registry.trim() === '' ? `${series}\n` : `${series}\n\n${registry}`;
}
