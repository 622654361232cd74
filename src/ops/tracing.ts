// OpenTelemetry tracing: an HTTP span per request in the API, spans around Temporal client calls
// (propagated to the worker in workflow headers) and around activities. Off unless
// OTEL_TRACES_EXPORTER names an exporter; tests hand in an in-memory exporter instead.
import { createRequire } from 'node:module';
import { context, propagation, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import type { OTLPTraceExporter as OTLPTraceExporterType } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes, type Resource } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import {
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
  OpenTelemetryWorkflowClientInterceptor,
  makeWorkflowExporter,
} from '@temporalio/interceptors-opentelemetry-v2';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { Config } from '../config/env.js';

export interface Tracing {
  tracer: Tracer;
  resource: Resource;
  processor: SpanProcessor;
  shutdown(): Promise<void>;
}

let globalsInstalled = false;

/** Loaded only when tracing exports over OTLP: the exporter and its protobuf code weigh megabytes per process. */
function otlpExporter(): SpanExporter {
  const { OTLPTraceExporter } = createRequire(import.meta.url)('@opentelemetry/exporter-trace-otlp-http') as {
    OTLPTraceExporter: typeof OTLPTraceExporterType;
  };
  return new OTLPTraceExporter();
}

/**
 * A tracer for one process part (`kiln-api`, `kiln-worker`), or null when tracing is off.
 * `exporter` overrides the configured one (tests); spans are then exported one by one.
 */
export function setupTracing(ops: Config['ops'], component: string, exporter?: SpanExporter): Tracing | null {
  if (!exporter && ops.tracesExporter === 'none') return null;
  if (!globalsInstalled) {
    // The context manager carries the HTTP span into the Temporal client interceptor; the W3C
    // propagator writes it into workflow headers, where the worker picks it up.
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    globalsInstalled = true;
  }
  const resource = resourceFromAttributes({ 'service.name': ops.serviceName ?? component });
  const processor = exporter
    ? new SimpleSpanProcessor(exporter)
    : // OTLPTraceExporter reads OTEL_EXPORTER_OTLP_ENDPOINT / _HEADERS from the environment itself.
      new BatchSpanProcessor(ops.tracesExporter === 'console' ? new ConsoleSpanExporter() : otlpExporter());
  const provider = new BasicTracerProvider({ resource, spanProcessors: [processor] });
  return {
    tracer: provider.getTracer('kiln'),
    resource,
    processor,
    async shutdown() {
      await provider.shutdown().catch(() => undefined);
    },
  };
}

export function clientInterceptors(tracing: Tracing | null) {
  return tracing ? { workflow: [new OpenTelemetryWorkflowClientInterceptor({ tracer: tracing.tracer })] } : undefined;
}

/**
 * Worker parts for tracing: activity spans on every worker; on the workflow worker also workflow
 * spans (exported through a sink), unless it runs a prebuilt bundle (tests), which cannot take
 * the workflow interceptors after the fact.
 */
export function workerTracing(tracing: Tracing | null, opts: { workflows: boolean; prebuiltBundle: boolean }) {
  if (!tracing) return { activity: [] as ActivityInterceptorsFactory[], workflowModules: [] as string[] };
  const activity: ActivityInterceptorsFactory[] = [
    (ctx) => ({
      inbound: new OpenTelemetryActivityInboundInterceptor(ctx, { tracer: tracing.tracer }),
      outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
    }),
  ];
  if (!opts.workflows || opts.prebuiltBundle) return { activity, workflowModules: [] as string[] };
  return {
    activity,
    workflowModules: [
      createRequire(import.meta.url).resolve('@temporalio/interceptors-opentelemetry-v2/lib/workflow-interceptors'),
    ],
    sinks: { exporter: makeWorkflowExporter(tracing.processor, tracing.resource) },
  };
}
