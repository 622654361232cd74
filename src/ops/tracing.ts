// OpenTelemetry tracing: an HTTP span per request in the API, spans around Temporal client calls
// (propagated to the worker in workflow headers) and around activities. Off unless
// OTEL_TRACES_EXPORTER names an exporter; tests hand in an in-memory exporter instead. The SDK
// (tracing-sdk.ts) is loaded only when tracing is on: ~3 MiB per process that would otherwise
// sit idle in each API process and the worker (BENCHMARKS.md, memory).
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { Config } from '../config/env.js';
import type { Tracing } from './tracing-types.js';

export type { Tracing, WorkerTracing } from './tracing-types.js';

/**
 * A tracer for one process part (`kiln-api`, `kiln-worker`), or null when tracing is off.
 * `exporter` overrides the configured one (tests); spans are then exported one by one.
 */
export async function setupTracing(
  ops: Config['ops'],
  component: string,
  exporter?: SpanExporter,
): Promise<Tracing | null> {
  if (!exporter && ops.tracesExporter === 'none') return null;
  const sdk = await import('./tracing-sdk.js');
  return sdk.setupTracing(ops, component, exporter);
}

export function clientInterceptors(tracing: Tracing | null) {
  return tracing ? { workflow: tracing.clientInterceptors() } : undefined;
}

/**
 * Worker parts for tracing: activity spans on every worker; on the workflow worker also workflow
 * spans (exported through a sink), unless it runs a prebuilt bundle (tests), which cannot take
 * the workflow interceptors after the fact.
 */
export function workerTracing(tracing: Tracing | null, opts: { workflows: boolean; prebuiltBundle: boolean }) {
  return tracing ? tracing.worker(opts) : { activity: [], workflowModules: [] };
}
