// Starts the Temporal workers of one process. Used by src/worker.ts and by the tests.
import { fileURLToPath } from 'node:url';
import { NativeConnection, Worker, type WorkflowBundleOption } from '@temporalio/worker';
import type { Logger } from 'pino';
import { createActivities } from '../activities/index.js';
import { GeminiImageProvider } from '../activities/providers/gemini.js';
import { LocalImageProvider } from '../activities/providers/local.js';
import { modelTaskQueue, modelsOfKind, type Config } from './config.js';
import { connectRedis, createStore } from './runtime.js';
import { FsBlobStore } from './services/blobs.js';
import { dataConverter } from './temporal/client.js';

export const WORKFLOWS_PATH = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

export interface WorkerOptions {
  /** A prebuilt bundle (tests build it once); by default the workflows are bundled at start. */
  workflowBundle?: WorkflowBundleOption;
  env?: NodeJS.ProcessEnv;
  /** How long a stopping worker lets in-flight upstream calls finish; default: the longest model timeout. */
  shutdownGraceMs?: number;
}

export async function startWorkers(config: Config, log: Logger, opts: WorkerOptions = {}) {
  const env = opts.env ?? process.env;
  const connection = await NativeConnection.connect({ address: config.temporal.address });
  const redis = connectRedis(config);
  redis.on('error', (err) => log.warn({ err: err.message }, 'redis error'));
  const store = createStore(config, redis);
  const blobs = new FsBlobStore(config.blobDir, config.publicBaseUrl);
  const imageModels = modelsOfKind(config.models, 'image');
  const configuredKey = (modelId: string) => {
    const m = config.models.find((x) => x.id === modelId);
    return m && typeof m.credential === 'object' ? env[m.credential.env] : undefined;
  };
  const activities = createActivities({
    store,
    models: imageModels,
    providers: { local: new LocalImageProvider(blobs), gemini: new GeminiImageProvider(blobs, configuredKey) },
  });
  const common = { connection, namespace: config.temporal.namespace, dataConverter: dataConverter(config) };
  const workers = [
    await Worker.create({
      ...common,
      taskQueue: config.temporal.taskQueue,
      ...(opts.workflowBundle ? { workflowBundle: opts.workflowBundle } : { workflowsPath: WORKFLOWS_PATH }),
      activities: { recordTransition: activities.recordTransition, mayHaveReachedUpstream: activities.mayHaveReachedUpstream },
    }),
    ...(await Promise.all(imageModels.map((m) => Worker.create({
      ...common,
      taskQueue: modelTaskQueue(config.temporal.taskQueue, m.id),
      activities: { generateImage: activities.generateImage },
      maxConcurrentActivityTaskExecutions: m.concurrency,
      // A deploy should not cut off upstream calls (for a non-idempotent model that means uncertain).
      shutdownGraceTime: opts.shutdownGraceMs ?? m.timeoutMs + 5000,
      ...(m.ratePerSecond ? { maxTaskQueueActivitiesPerSecond: m.ratePerSecond } : {}),
    })))),
  ];
  const done = Promise.all(workers.map((w) => w.run())).finally(async () => {
    redis.disconnect();
    await connection.close().catch(() => undefined);
  });
  return {
    done,
    async shutdown() {
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
      await done;
    },
  };
}
