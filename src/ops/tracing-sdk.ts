// The OpenTelemetry SDK's side of tracing.ts, imported by it only when tracing is on.
import { createRequire } from 'node:module';
import { context, propagation } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import type { OTLPTraceExporter as OTLPTraceExporterType } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import {
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
  OpenTelemetryWorkflowClientInterceptor,
  makeWorkflowExporter,
} from '@temporalio/interceptors-opentelemetry-v2';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { Config } from '../config/env.js';
import type { Tracing, WorkerTracing } from './tracing-types.js';

let globalsInstalled = false;

/** Loaded only when tracing exports over OTLP: the exporter and its protobuf code weigh megabytes per process. */
function otlpExporter(): SpanExporter {
  const { OTLPTraceExporter } = createRequire(import.meta.url)('@opentelemetry/exporter-trace-otlp-http') as {
    OTLPTraceExporter: typeof OTLPTraceExporterType;
  };
  return new OTLPTraceExporter();
}

/** tracing.ts's setupTracing once it knows tracing is on. */
export function setupTracing(ops: Config['ops'], component: string, exporter?: SpanExporter): Tracing {
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
  const tracer = provider.getTracer('kiln');
  const tracing: Tracing = {
    tracer,
    resource,
    processor,
    async shutdown() {
      await provider.shutdown().catch(() => undefined);
    },
    clientInterceptors: () => [new OpenTelemetryWorkflowClientInterceptor({ tracer })],
    worker: (opts) => workerTracing(tracing, opts),
  };
  return tracing;
}

function workerTracing(tracing: Tracing, opts: { workflows: boolean; prebuiltBundle: boolean }): WorkerTracing {
  const activity: ActivityInterceptorsFactory[] = [
    (ctx) => ({
      inbound: new OpenTelemetryActivityInboundInterceptor(ctx, { tracer: tracing.tracer }),
      outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
    }),
  ];
  if (!opts.workflows || opts.prebuiltBundle) return { activity, workflowModules: [] };
  return {
    activity,
    workflowModules: [
      createRequire(import.meta.url).resolve('@temporalio/interceptors-opentelemetry-v2/lib/workflow-interceptors'),
    ],
    sinks: { exporter: makeWorkflowExporter(tracing.processor, tracing.resource) },
  };
}
