// What tracing.ts hands out, apart from the SDK that makes it (tracing-sdk.ts).
import type { Tracer } from '@opentelemetry/api';
import type { Resource } from '@opentelemetry/resources';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { WorkflowClientInterceptor } from '@temporalio/client';
import type { makeWorkflowExporter } from '@temporalio/interceptors-opentelemetry-v2';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';

/** A worker's tracing parts (tracing-sdk.ts, workerTracing). */
export interface WorkerTracing {
  activity: ActivityInterceptorsFactory[];
  /** Workflow interceptor modules for the bundle. */
  workflowModules: string[];
  sinks?: { exporter: ReturnType<typeof makeWorkflowExporter> };
}

export interface Tracing {
  tracer: Tracer;
  resource: Resource;
  processor: SpanProcessor;
  shutdown(): Promise<void>;
  clientInterceptors(): WorkflowClientInterceptor[];
  /** `workflows`: a workflow worker; `prebuiltBundle`: one that cannot take workflow interceptors (tests). */
  worker(opts: { workflows: boolean; prebuiltBundle: boolean }): WorkerTracing;
}
