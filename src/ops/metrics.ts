// Prometheus metrics of the API process. One registry per app, so several apps in one process
// (the tests) do not collide. Tasks finished by outcome are counted by the worker (see
// src/ops/worker-telemetry.ts): it is the one place that sees each task end exactly once.
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import { clusterMetrics, shareMetrics } from './api-cluster.js';
import { withMoreText } from './exposition.js';
import { RequestSeries, seriesText, withRegistryText } from './request-series.js';

export interface ApiMetricsSources {
  /** Unfinished tasks (the queue gauge in Redis); may throw when Redis is down. */
  queueDepth(): Promise<number>;
  /**
   * Exposition text of deployment-wide series read at scrape time (the channels' kiln_channel_*),
   * added by the process that answers the scrape, after the rest, also under the API supervisor:
   * every process would read the same values, so one read is the deployment's figure.
   */
  moreText?(): Promise<string>;
}

export class ApiMetrics {
  readonly registry = new Registry();
  /** Requests and their latency by method, route template and status. */
  readonly http: RequestSeries;
  readonly submitted: Counter<'model' | 'kind'>;
  readonly rateLimited: Counter<'route'>;
  readonly refused: Counter<'route' | 'code'>;

  private readonly moreText: (() => Promise<string>) | undefined;

  constructor(sources: ApiMetricsSources, opts: { defaultMetrics?: boolean } = {}) {
    this.moreText = sources.moreText;
    const registers = [this.registry];
    this.http = new RequestSeries({
      counter: { name: 'kiln_http_requests_total', help: 'HTTP requests by method, route template and status' },
      histogram: {
        name: 'kiln_http_request_duration_seconds',
        help: 'HTTP request latency by method, route template and status',
        buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      },
    });
    this.submitted = new Counter({
      name: 'kiln_tasks_submitted_total',
      help: 'Tasks accepted (202) by model and kind',
      labelNames: ['model', 'kind'],
      registers,
    });
    this.rateLimited = new Counter({
      name: 'kiln_rate_limited_total',
      help: 'Requests refused with rate_limited (429) by route',
      labelNames: ['route'],
      registers,
    });
    // By code, never by owner: owner ids stay out of metric labels (docs/usage.md).
    this.refused = new Counter({
      name: 'kiln_limit_refusals_total',
      help: 'Submits refused by an owner or key limit (429) by route and code',
      labelNames: ['route', 'code'],
      registers,
    });
    new Gauge({
      name: 'kiln_queue_depth',
      help: 'Unfinished tasks (accepted, queued or running) across the deployment, read from Redis at scrape time',
      registers,
      // Every API process reads the same Redis value: summing them would multiply it.
      aggregator: 'max',
      async collect() {
        // A scrape must not hang on a dead Redis: report nothing rather than a stale value.
        const depth = await Promise.race([
          sources.queueDepth(),
          new Promise<null>((r) => setTimeout(() => r(null), 500).unref()),
        ]).catch(() => null);
        if (depth === null) this.reset();
        else this.set(depth);
      },
    });
    if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: 'kiln_api_' });
    // With several API processes, the first sums this registry and series with the others'.
    shareMetrics(async () => ({ registry: await this.registry.getMetricsAsJSON(), snapshot: this.http.snapshot() }));
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /**
   * The exposition text: the request series, then the registry's metrics (with several API
   * processes, their sum: a scrape reaches any one of them), then `moreText`'s series.
   */
  async render(): Promise<string> {
    const [exposition, more] = await Promise.all([
      clusterMetrics().then((summed) => summed ?? this.processText()),
      this.moreText?.(),
    ]);
    return more === undefined ? exposition : withMoreText(exposition, more);
  }

  private async processText(): Promise<string> {
    const series = seriesText(this.http.snapshot());
    return withRegistryText(series, await this.registry.metrics());
  }
}
