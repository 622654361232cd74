// The request series must expose exactly what prom-client's own counter and histogram would for
// the same requests: the exposition text, alone and before a registry's other metrics, and the sum
// across processes (of the snapshots the supervisor collects, as prom-client sums its own).
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  mergeSnapshots,
  RequestSeries,
  seriesText,
  withRegistryText,
  type SeriesSnapshot,
} from '../../../src/ops/request-series.js';

const COUNTER = { name: 'kiln_http_requests_total', help: 'HTTP requests' };
const HISTOGRAM = {
  name: 'kiln_http_request_duration_seconds',
  help: 'HTTP request latency',
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
};

/** Requests: method, route, status, seconds. Edges: exactly on a bound, above every bound, 0. */
const REQUESTS: [string, string, number, number][] = [
  ['GET', '/v1/tasks/:id', 200, 0.0004],
  ['GET', '/v1/tasks/:id', 200, 0.005],
  ['GET', '/v1/tasks/:id', 200, 0.0050001],
  ['GET', '/v1/tasks/:id', 404, 0.002],
  ['POST', '/v1/tasks', 202, 0.3],
  ['POST', '/v1/tasks', 202, 12],
  ['GET', '/v1/tasks/:id', 200, 0],
  ['GET', '(unmatched)', 404, 10],
  ['GET', '/v1/tasks', 200, 1],
];

function viaPromClient(requests = REQUESTS, registry = new Registry()): Registry {
  const labelNames = ['method', 'route', 'status'] as const;
  const counter = new Counter({ ...COUNTER, labelNames, registers: [registry] });
  const histogram = new Histogram({ ...HISTOGRAM, labelNames, registers: [registry] });
  for (const [method, route, status, seconds] of requests) {
    const labels = { method, route, status: String(status) };
    counter.labels(labels).inc();
    histogram.labels(labels).observe(seconds);
  }
  return registry;
}

function viaSeries(requests = REQUESTS): RequestSeries {
  const series = new RequestSeries({ counter: COUNTER, histogram: HISTOGRAM });
  for (const [method, route, status, seconds] of requests) series.entry(method, route, status).record(seconds);
  return series;
}

/** The exposition of the series alone, as ApiMetrics writes it before an empty registry's text. */
const textOf = async (series: RequestSeries) =>
  withRegistryText(seriesText(series.snapshot()), await new Registry().metrics());

/** A gauge registered after the request metrics, as ApiMetrics registers its others. */
const withGauge = (registry: Registry) => {
  new Gauge({ name: 'kiln_queue_depth', help: 'Unfinished tasks', registers: [registry] }).set(3);
  return registry;
};

describe('request series', () => {
  it('exposes the same text as prom-client for the same requests', async () => {
    const expected = await viaPromClient().metrics();
    expect(expected).toContain('kiln_http_request_duration_seconds_bucket{le="0.005",method="GET"');
    expect(await textOf(viaSeries())).toBe(expected);
    // Before a registry's other metrics: one exposition, as if they were all prom-client's.
    const registry = withGauge(new Registry());
    expect(withRegistryText(seriesText(viaSeries().snapshot()), await registry.metrics())).toBe(
      await withGauge(viaPromClient()).metrics(),
    );
  });

  it('escapes label values as prom-client does', async () => {
    const odd: typeof REQUESTS = [['GET', 'a"b\\c\nd', 200, 0.001]];
    expect(await textOf(viaSeries(odd))).toBe(await viaPromClient(odd).metrics());
  });

  it('keeps one series per method, route and status however often it is asked for', () => {
    const series = viaSeries([]);
    const a = series.entry('GET', '/v1/tasks/:id', 200);
    expect(series.entry('GET', '/v1/tasks/:id', 200)).toBe(a);
    expect(series.entry('GET', '/v1/tasks/:id', 201)).not.toBe(a);
  });

  it('sums across processes as prom-client sums its own', async () => {
    const first = REQUESTS.slice(0, 5);
    const second = REQUESTS.slice(3);
    const expected = await AggregatorRegistry.aggregate([
      await viaPromClient(first).getMetricsAsJSON(),
      await viaPromClient(second).getMetricsAsJSON(),
    ]).metrics();
    expect(expected).toMatch(/kiln_http_requests_total\{method="GET",route="\/v1\/tasks\/:id",status="404"\} 2/);
    // As the supervisor receives the snapshots: through IPC, serialized.
    const wire = (s: RequestSeries) => JSON.parse(JSON.stringify(s.snapshot())) as SeriesSnapshot;
    const summed = mergeSnapshots([wire(viaSeries(first)), wire(viaSeries(second))]);
    expect(withRegistryText(seriesText(summed!), '')).toBe(expected);
    expect(mergeSnapshots([])).toBeUndefined();
  });

  it('lists nothing before the first request and after a reset', async () => {
    const empty = await viaPromClient([]).metrics();
    expect(await textOf(viaSeries([]))).toBe(empty);
    const series = viaSeries();
    series.reset();
    expect(await textOf(series)).toBe(empty);
  });
});
