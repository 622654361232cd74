// Worker process: the workflow worker plus one activity worker per model (its own task queue, so
// upstream concurrency and rate are per model). Shuts down gracefully on SIGTERM/SIGINT.
import { DefaultLogger, Runtime, type LogLevel } from '@temporalio/worker';
import { loadConfig } from '../config/env.js';
import { ConfigError } from '../config/models.js';
import { createLogger, exitAfterLogs } from '../ops/log.js';
import { startIdleGc } from '../ops/idle-gc.js';
import { startWorkers } from './start.js';

async function main() {
  const config = loadConfig();
  const log = createLogger(config.logLevel, 'kiln-worker', config.ops.logFormat);
  // The SDK's own messages go through pino too; its per-state chatter only at debug.
  const sdkLevel: LogLevel = config.logLevel === 'debug' || config.logLevel === 'trace' ? 'DEBUG' : 'WARN';
  Runtime.install({
    logger: new DefaultLogger(sdkLevel, ({ level, message, meta }) => {
      const fn = level === 'ERROR' ? log.error : level === 'WARN' ? log.warn : log.debug;
      fn.call(log, meta ?? {}, message);
    }),
    // The SDK's Prometheus exporter: its worker metrics plus Kiln's kiln_tasks_finished_total.
    ...(config.ops.workerMetricsAddress
      ? {
          telemetryOptions: {
            metrics: {
              prometheus: {
                bindAddress: config.ops.workerMetricsAddress,
                countersTotalSuffix: true,
                useSecondsForDurations: true,
              },
            },
          },
        }
      : {}),
  });
  const workers = await startWorkers(config, log);
  log.info(
    {
      taskQueue: config.temporal.taskQueue,
      models: config.models.map((m) => m.id),
      metrics: config.ops.workerMetricsAddress ?? null,
    },
    'kiln worker running',
  );
  // Sampled every 500 ms: a burst's garbage is gone about a second after the last task, not when
  // V8's memory reducer gets to it, up to ~30 s later (src/ops/idle-gc.ts).
  const idleGc = startIdleGc({ log, everyMs: 500 });
  const stop = (signal: string) => {
    idleGc.stop();
    log.info({ signal }, 'shutting down: letting running activities finish');
    void workers.shutdown().then(() => exitAfterLogs(log, 0));
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  await workers.done;
}

main().catch((err) => {
  console.error(err instanceof ConfigError ? err.message : err);
  process.exit(1);
});
