// The request series must expose exactly what prom-client's own counter and histogram would for
// the same requests: the exposition text, its JSON (what the cluster supervisor collects) and the
// sum across processes.
import { AggregatorRegistry, Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { RequestSeries } from '../../src/ops/request-series.js';

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

function viaPromClient(requests = REQUESTS): Registry {
  const registry = new Registry();
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

function viaSeries(requests = REQUESTS): { registry: Registry; series: RequestSeries } {
  const registry = new Registry();
  const series = new RequestSeries({ counter: COUNTER, histogram: HISTOGRAM, registers: [registry] });
  for (const [method, route, status, seconds] of requests) series.entry(method, route, status).record(seconds);
  return { registry, series };
}

describe('request series', () => {
  it('exposes the same text and JSON as prom-client for the same requests', async () => {
    const expected = await viaPromClient().metrics();
    expect(expected).toContain('kiln_http_request_duration_seconds_bucket{le="0.005",method="GET"');
    expect(await viaSeries().registry.metrics()).toBe(expected);
    // As the supervisor receives it: through IPC, serialized.
    const wire = async (r: Registry) => JSON.parse(JSON.stringify(await r.getMetricsAsJSON())) as unknown;
    expect(await wire(viaSeries().registry)).toEqual(await wire(viaPromClient()));
  });

  it('keeps one series per method, route and status however often it is asked for', () => {
    const { series } = viaSeries([]);
    const a = series.entry('GET', '/v1/tasks/:id', 200);
    expect(series.entry('GET', '/v1/tasks/:id', 200)).toBe(a);
    expect(series.entry('GET', '/v1/tasks/:id', 201)).not.toBe(a);
  });

  it('sums across processes as prom-client sums its own', async () => {
    const first = REQUESTS.slice(0, 5);
    const second = REQUESTS.slice(3);
    const summed = async (make: (r: typeof REQUESTS) => Registry) =>
      AggregatorRegistry.aggregate([
        await make(first).getMetricsAsJSON(),
        await make(second).getMetricsAsJSON(),
      ]).metrics();
    const expected = await summed(viaPromClient);
    expect(expected).toMatch(/kiln_http_requests_total\{method="GET",route="\/v1\/tasks\/:id",status="404"\} 2/);
    expect(await summed((r) => viaSeries(r).registry)).toBe(expected);
  });

  it('lists nothing before the first request and after a reset', async () => {
    const empty = await viaPromClient([]).metrics();
    expect(await viaSeries([]).registry.metrics()).toBe(empty);
    const { registry } = viaSeries();
    registry.resetMetrics();
    expect(await registry.metrics()).toBe(empty);
  });
});
