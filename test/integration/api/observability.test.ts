// Request ids, structured logs, Prometheus metrics and OpenTelemetry spans of the API.
import { Writable } from 'node:stream';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/env.js';
import { createApi } from '../../../src/api/runtime.js';
import { startWorkers } from '../../../src/worker/start.js';
import {
  startKiln,
  http,
  submitBody,
  waitForStatus,
  eventually,
  KEY_A,
  silent,
  type Kiln,
} from '../../support/kiln.js';

const lines: any[] = [];
const sink = new Writable({
  write(chunk, _enc, cb) {
    for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l));
    cb();
  },
});
let kiln: Kiln;

beforeAll(async () => {
  kiln = await startKiln({
    models: [{ id: 'kiln-image-1', provider: 'local', latencyMs: 100, idempotent: true }],
    env: { RATE_LIMIT_TASK_MS: '60000' },
    log: pino({ level: 'info' }, sink),
  });
});
afterAll(async () => {
  await kiln?.stop();
});

describe('request ids and logs', () => {
  it('echoes a sane X-Request-Id, replaces an insane one, and generates one when absent', async () => {
    const api = http(kiln.baseUrl);
    expect(
      (await api('/v1/models', { headers: { 'x-request-id': 'abc-123.def:4' } })).headers.get('x-request-id'),
    ).toBe('abc-123.def:4');
    const long = 'a'.repeat(129);
    const generated = [
      (await api('/v1/models', { headers: { 'x-request-id': 'has space' } })).headers.get('x-request-id'),
      (await api('/v1/models', { headers: { 'x-request-id': long } })).headers.get('x-request-id'),
      (await api('/v1/models')).headers.get('x-request-id'),
      // Errors carry it too.
      (await api('/v1/nowhere')).headers.get('x-request-id'),
    ];
    for (const id of generated) expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(generated).size).toBe(4);
    // 128 characters is still accepted.
    expect((await api('/v1/models', { headers: { 'x-request-id': long.slice(1) } })).headers.get('x-request-id')).toBe(
      long.slice(1),
    );
  });

  it('logs one JSON line per request with request id, route, task id and owner hash, and never the key', async () => {
    const api = http(kiln.baseUrl);
    const sub = await api('/v1beta/models/kiln-image-1:generateContent', {
      method: 'POST',
      json: submitBody('log me'),
      headers: { 'x-request-id': 'req-submit-1' },
    });
    expect(sub.status).toBe(202);
    await api(`/v1/tasks/${sub.json.id}`, { headers: { 'x-request-id': 'req-poll-1' } });
    const submitLine = lines.find((l) => l.reqId === 'req-submit-1');
    const pollLine = lines.find((l) => l.reqId === 'req-poll-1');
    const owner = kiln.api.store.ownerKey('x') && (await kiln.api.store.get(sub.json.id))!.owner;
    expect(submitLine).toMatchObject({
      msg: 'request',
      method: 'POST',
      route: '/v1beta/models/:modelAction',
      status: 202,
      taskId: sub.json.id,
      owner,
    });
    expect(pollLine).toMatchObject({ route: '/v1/tasks/:id', status: 200, taskId: sub.json.id, owner });
    expect(typeof submitLine.ms).toBe('number');
    const all = JSON.stringify(lines);
    expect(all).not.toContain(KEY_A);
    expect(all).not.toContain('log me');
  });
});

describe('/metrics', () => {
  it('exposes request, latency, submission, queue depth and rate-limit series after a few requests', async () => {
    const api = http(kiln.baseUrl);
    const sub = await api('/v1beta/models/kiln-image-1:generateContent', {
      method: 'POST',
      json: submitBody('metrics'),
    });
    expect(sub.status).toBe(202);
    expect((await api(`/v1/tasks/${sub.json.id}`)).status).toBe(200);
    // RATE_LIMIT_TASK_MS is a minute here: the second poll is refused.
    expect((await api(`/v1/tasks/${sub.json.id}`)).status).toBe(429);
    await api('/v1/tasks/task_00000000000000000000000000000000/content');
    const text = await (await fetch(`${kiln.baseUrl}/metrics`)).text();
    const value = (re: RegExp) => {
      const m = text.match(re);
      return m ? Number(m[1]) : NaN;
    };
    // One exposition line by metric name and exact label text (no regex escaping to get wrong).
    const sample = (name: string, labels: string) => {
      const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
      return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : NaN;
    };
    expect(
      value(/^kiln_http_requests_total\{method="POST",route="\/v1beta\/models\/:modelAction",status="202"\} (\d+)/m),
    ).toBeGreaterThanOrEqual(1);
    expect(value(/^kiln_http_requests_total\{method="GET",route="\/v1\/tasks\/:id",status="429"\} (\d+)/m)).toBe(1);
    expect(
      value(/^kiln_http_requests_total\{method="GET",route="\/v1\/tasks\/:id\/content",status="404"\} (\d+)/m),
    ).toBe(1);
    expect(
      sample('kiln_http_request_duration_seconds_bucket', 'le="+Inf",method="GET",route="/v1/tasks/:id",status="200"'),
    ).toBeGreaterThanOrEqual(1);
    expect(
      sample(
        'kiln_http_request_duration_seconds_count',
        'method="POST",route="/v1beta/models/:modelAction",status="202"',
      ),
    ).toBeGreaterThanOrEqual(1);
    expect(value(/^kiln_tasks_submitted_total\{model="kiln-image-1",kind="image"\} (\d+)/m)).toBeGreaterThanOrEqual(2);
    expect(value(/^kiln_rate_limited_total\{route="\/v1\/tasks\/:id"\} (\d+)/m)).toBe(1);
    expect(value(/^kiln_queue_depth (\d+)/m)).toBeGreaterThanOrEqual(0);
    expect(text).toMatch(/^kiln_api_process_cpu_seconds_total /m);
    // Task ids never become label values.
    expect(text).not.toContain('task_');
  });

  it('counts the queue depth from the unfinished-task gauge', async () => {
    const depth = await kiln.api.store.unfinishedCount();
    const text = await (await fetch(`${kiln.baseUrl}/metrics`)).text();
    expect(text).toMatch(new RegExp(`^kiln_queue_depth ${depth}$`, 'm'));
  });
});

describe('tracing', () => {
  it(
    'is off by default and, when enabled, records an HTTP span per ' +
      'request, the workflow start inside it, and activity spans',
    async () => {
      const exporter = new InMemorySpanExporter();
      const config = loadConfig({
        ...kiln.env,
        RATE_LIMIT_TASK_MS: '0',
        TEMPORAL_TASK_QUEUE: `${kiln.env.TEMPORAL_TASK_QUEUE}-otel`,
        OTEL_TRACES_EXPORTER: 'none',
      });
      expect(config.ops.tracesExporter).toBe('none');
      const api = await createApi(config, silent, { spanExporter: exporter });
      // No prebuilt bundle: the worker bundles the workflows with the tracing interceptors, so the
      // workflow's own spans (exported through a sink) are checked too. The bundling child runs
      // src/workflow-bundle.ts, which needs tsx's loader as under `npm run`.
      const nodeOptions = process.env.NODE_OPTIONS;
      process.env.NODE_OPTIONS = `${nodeOptions ?? ''} --import tsx`;
      const workers = await startWorkers(config, silent, {
        env: kiln.env,
        shutdownGraceMs: 0,
        spanExporter: exporter,
      }).finally(() => {
        if (nodeOptions === undefined) delete process.env.NODE_OPTIONS;
        else process.env.NODE_OPTIONS = nodeOptions;
      });
      const server = (await import('node:http')).createServer(api.app.callback());
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
      try {
        const call = http(base);
        const sub = await call('/v1beta/models/kiln-image-1:generateContent', {
          method: 'POST',
          json: submitBody('traced'),
        });
        expect(sub.status).toBe(202);
        await waitForStatus(() => call(`/v1/tasks/${sub.json.id}`), 'succeeded');
        // The workflow's span ends with its last workflow task, after the activity wrote `succeeded`.
        const spans = await eventually(
          async () => exporter.getFinishedSpans(),
          (all) => all.some((s) => s.name === 'RunWorkflow:imageTaskWorkflow'),
        );
        const httpSpan = spans.find((s) => s.name === 'POST /v1beta/models/:modelAction');
        expect(httpSpan).toBeDefined();
        expect(httpSpan!.attributes['http.response.status_code']).toBe(202);
        expect(httpSpan!.attributes['kiln.task_id']).toBe(sub.json.id);
        const start = spans.find((s) => s.name === 'StartWorkflow:imageTaskWorkflow');
        expect(start).toBeDefined();
        expect(start!.spanContext().traceId).toBe(httpSpan!.spanContext().traceId);
        expect(start!.parentSpanContext?.spanId).toBe(httpSpan!.spanContext().spanId);
        const run = spans.find((s) => s.name === 'RunWorkflow:imageTaskWorkflow');
        expect(run).toBeDefined();
        expect(run!.spanContext().traceId).toBe(httpSpan!.spanContext().traceId);
        const activity = spans.find((s) => s.name === 'RunActivity:generateImage');
        expect(activity).toBeDefined();
        expect(activity!.spanContext().traceId).toBe(httpSpan!.spanContext().traceId);
        expect(spans.some((s) => s.name === 'GET /v1/tasks/:id')).toBe(true);
      } finally {
        server.closeAllConnections();
        await new Promise((r) => server.close(r));
        await workers.shutdown();
        await api.close();
      }
    },
  );
});
