// Starts the Temporal workers of one process. Used by src/worker/main.ts and by the tests.
import { Client } from '@temporalio/client';
import { NativeConnection, Runtime, Worker, type WorkflowBundleOption } from '@temporalio/worker';
import type { AnyTaskRecord } from '../shared/records.js';
import { RECONCILE_DEFAULTS, reconcileTask, startReconciler, type ReconcileDeps } from './reconcile.js';
import { cancelOrigin } from '../../activities/cancel-origin.js';
import type { Logger } from 'pino';
import { createActivities } from '../../activities/image/index.js';
import { referenceFetcher } from '../../activities/providers/references.js';
import { imageProviders, videoProviders } from './providers.js';
import { createVideoActivities } from '../../activities/video/index.js';
import { readModelSinks } from '../../activities/read-model.js';
import { CancelNotices, cancelNoticeSinks } from '../../activities/cancel-notices.js';
import { HEARTBEAT_EVERY_MS } from '../../activities/upstream-call.js';
import { createWebhookActivities } from '../../activities/deliver-webhook.js';
import { type Config } from '../config/env.js';
import { modelTaskQueue, modelsOfKind, type AnyChannel } from '../config/models.js';
import { configuredKeys } from '../shared/credentials.js';
import { workerSlots } from '../config/channels.js';
import { imageRunsJobs } from '../config/providers.js';
import { watchQueue } from '../shared/upstream-job.js';
import { RedisChannelState } from '../channels/redis-state.js';
import { createQuota, createStore } from '../usage/settlement.js';
import { connectRedis } from '../infra/redis.js';
import { sweepReservations } from '../usage/sweep.js';
import { createBlobs } from '../blobs/stores.js';
import { dataConverter } from '../temporal/client.js';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import { setupTracing, workerTracing } from '../ops/tracing.js';
import { startBeacon } from '../ops/worker-beacon.js';
import { taskTelemetry } from '../ops/worker-telemetry.js';
import { bundleInChild, WORKFLOWS_PATH } from './workflow-bundle.js';

export { WORKFLOWS_PATH };

/** The SDK's default: the read-model writes' share of the workflow worker's local activities. */
const LOCAL_ACTIVITY_SLOTS = 100;

export interface WorkerOptions {
  /** A prebuilt bundle (tests build it once); by default the workflows are bundled at start. */
  workflowBundle?: WorkflowBundleOption;
  env?: NodeJS.ProcessEnv;
  /** How long a stopping worker lets in-flight upstream calls finish; default: the longest model timeout. */
  shutdownGraceMs?: number;
  /** Tests: export spans here (tracing on whatever OTEL_TRACES_EXPORTER says). */
  spanExporter?: SpanExporter;
}

export async function startWorkers(config: Config, log: Logger, opts: WorkerOptions = {}) {
  const env = opts.env ?? process.env;
  const connection = await NativeConnection.connect({ address: config.temporal.address });
  // The worker's own reads of Temporal (who canceled a task; the reconciler's look at closed
  // workflows) share the workers' connection.
  const client = new Client({ connection, namespace: config.temporal.namespace, dataConverter: dataConverter(config) });
  const origin = cancelOrigin(client);
  const redis = connectRedis(config);
  redis.on('error', (err) => log.warn({ err: err.message }, 'redis error'));
  const store = createStore(config, redis);
  // Its own connection: a subscribed connection sends no other commands.
  const cancels = new CancelNotices(connectRedis(config), store.cancelChannel, (err) =>
    log.warn({ err: err.message }, 'cancel notices unavailable: attempts heartbeat often'),
  );
  const { blobs } = createBlobs(config);
  const imageModels = modelsOfKind(config.models, 'image');
  const keys = configuredKeys(
    config.models.flatMap((m): AnyChannel[] => m.channels),
    env,
  );
  // Channel capacity, rate and health are the deployment's: every worker shares them in Redis.
  const channels = new RedisChannelState(redis, config.redisPrefix);
  const providerDeps = { blobs, keys, env, fetchReference: referenceFetcher(config.referenceFetchAllow) };
  const videoModels = modelsOfKind(config.models, 'video');
  const named = <M extends { channels: { provider: string }[] }>(ms: M[]) =>
    ms.flatMap((m) => m.channels.map((c) => c.provider as M['channels'][number]['provider']));
  const [imageRegistry, videoRegistry] = await Promise.all([
    imageProviders(providerDeps, named(imageModels)),
    videoProviders(providerDeps, named(videoModels)),
  ]);
  // Aborted when shutdown begins: job watches hand their jobs back to be watched by another worker.
  const stopping = new AbortController();
  const activities = createActivities({
    store,
    channels,
    origin,
    models: imageModels,
    providers: available(imageModels, imageRegistry),
    keys,
    cancels,
    stopping: stopping.signal,
  });
  // The local providers draw their pictures with jimp's core (loaded on first use): load it now
  // when a local model is configured, so no first task pays for it inside its upstream budget.
  if (config.models.some((m) => m.provider === 'local')) await import('../../activities/providers/local/render-png.js');
  const video = createVideoActivities({
    store,
    channels,
    origin,
    models: videoModels,
    providers: available(videoModels, videoRegistry),
    keys,
    cancels,
    stopping: stopping.signal,
  });
  const webhooks = createWebhookActivities({
    store,
    ownerKey: config.ownerKey,
    redisPrefix: config.redisPrefix,
    retry: {
      initialMs: config.webhooks.retryInitialMs,
      maxMs: config.webhooks.retryMaxMs,
      maxAgeMs: config.webhooks.maxAgeMs,
    },
    allow: config.webhooks.allow,
    ...(config.webhooks.ca ? { ca: config.webhooks.ca } : {}),
  });
  const common = { connection, namespace: config.temporal.namespace, dataConverter: dataConverter(config) };
  // Inline models call their upstream as local activities of the workflow worker (activities/inline-slots.ts
  // bounds each model): room for all of their calls beside the read-model writes, and a deploy lets
  // their calls finish as the model queues' workers do.
  const inline = imageModels.filter((m) => m.inline);
  const inlineCalls = inline.reduce((n, m) => n + workerSlots(m), 0);
  const inlineGraceMs = callsGraceMs(inline);
  const tracing = await setupTracing(config.ops, 'kiln-worker', opts.spanExporter);
  const wfTracing = workerTracing(tracing, { workflows: true, prebuiltBundle: !!opts.workflowBundle });
  // Bundled in a child process: webpack would otherwise stay in this one's memory for good. Read
  // from its file, which goes once the workers are made: handed in as text, it would be kept twice.
  const bundled = opts.workflowBundle ? undefined : await bundleInChild(wfTracing.workflowModules);
  const workflowBundle = opts.workflowBundle ?? { codePath: bundled!.codePath };
  const telemetry = taskTelemetry(log);
  const interceptors = (t: ReturnType<typeof workerTracing>) => ({
    interceptors: { activity: [telemetry, ...t.activity] },
  });
  const imageUpstream = {
    generateImage: activities.generateImage,
    createImageJob: activities.createImageJob,
    checkImageJob: activities.checkImageJob,
    fetchImageJob: activities.fetchImageJob,
    cancelImageJob: activities.cancelImageJob,
  };
  const videoUpstream = {
    createVideo: video.createVideo,
    checkVideo: video.checkVideo,
    fetchVideo: video.fetchVideo,
    cancelVideo: video.cancelVideo,
  };
  // TEMPORAL_UPSTREAM_QUEUE=workflow: new tasks' upstream calls come on the workflow's queue (eager
  // activity execution), in one slot pool with room for every model's channels; the model queues
  // keep their workers below for tasks started before a switch.
  const allModels = [...imageModels, ...videoModels];
  const upstreamHere = config.temporal.upstreamQueue === 'workflow';
  // Models whose tasks run upstream jobs: their watches have a queue of their own (below).
  const jobModels = allModels.filter((m) => m.kind === 'video' || imageRunsJobs(m.provider));
  const upstreamSlots = upstreamHere
    ? {
        // Webhook attempts keep the SDK default's room (100) beside every model's calls.
        maxConcurrentActivityTaskExecutions: 100 + allModels.reduce((n, m) => n + workerSlots(m), 0),
        maxHeartbeatThrottleInterval: HEARTBEAT_EVERY_MS,
      }
    : {};
  const { maxCachedWorkflows, workflowTaskSlots, workflowTaskPollers } = config.worker;
  const upstreamGraceMs = upstreamHere ? callsGraceMs(allModels) : 0;
  const workflowGraceMs = Math.max(inlineGraceMs, upstreamGraceMs);
  const workers = [
    await Worker.create({
      ...common,
      taskQueue: config.temporal.taskQueue,
      workflowBundle,
      // WORKER_*: the sticky cache and workflow task slots and polls; unset, the SDK's defaults.
      ...(maxCachedWorkflows !== undefined ? { maxCachedWorkflows } : {}),
      ...(workflowTaskSlots !== undefined ? { maxConcurrentWorkflowTaskExecutions: workflowTaskSlots } : {}),
      ...(workflowTaskPollers !== undefined ? { maxConcurrentWorkflowTaskPolls: workflowTaskPollers } : {}),
      ...interceptors(wfTracing),
      // The read model's `queued` write (no history event), and the tracing exporter if any.
      sinks: {
        ...readModelSinks(store, (err) => log.warn({ err: (err as Error).message }, 'queued write failed')),
        ...cancelNoticeSinks(redis, store.cancelChannel, (err) =>
          log.warn({ err: (err as Error).message }, 'cancel notice not sent'),
        ),
        ...(wfTracing.sinks ?? {}),
      },
      maxConcurrentLocalActivityExecutions: LOCAL_ACTIVITY_SLOTS + inlineCalls,
      ...(workflowGraceMs ? { shutdownGraceTime: opts.shutdownGraceMs ?? workflowGraceMs } : {}),
      ...upstreamSlots,
      activities: {
        ...(upstreamHere ? { ...imageUpstream, ...videoUpstream } : {}),
        // Registered here for inline models (whose config the API may have newer than this worker's).
        generateImage: activities.generateImage,
        recordTransition: activities.recordTransition,
        recordOutcome: activities.recordOutcome,
        mayHaveReachedUpstream: activities.mayHaveReachedUpstream,
        recordVideoTransition: video.recordVideoTransition,
        videoMayHaveReachedUpstream: video.videoMayHaveReachedUpstream,
        upstreamReach: activities.upstreamReach,
        videoUpstreamReach: video.videoUpstreamReach,
        // Webhook attempts run beside the workflows: they never wait for an upstream slot.
        deliverWebhook: webhooks.deliverWebhook,
      },
    }).finally(() => bundled?.remove()),
    // One activity queue per model (image or video); its channels' capacity and rate are kept in Redis.
    ...(await Promise.all(
      [
        // Both paths, so a models file changed between API and worker cannot strand a task:
        // one call (generateImage), or a job (workflows/image-job.ts) for providers that answer later.
        ...imageModels.map((m) => ({ m, upstream: imageUpstream })),
        ...videoModels.map((m) => ({ m, upstream: videoUpstream })),
      ].map(({ m, upstream }) =>
        Worker.create({
          ...common,
          taskQueue: modelTaskQueue(config.temporal.taskQueue, m.id),
          ...interceptors(workerTracing(tracing, { workflows: false, prebuiltBundle: true })),
          activities: upstream,
          // Room for every channel's whole share: the channels' leases in Redis hold the deployment's limits.
          maxConcurrentActivityTaskExecutions: workerSlots(m),
          // A cancel reaches a running call with its next heartbeat: the default throttle would hold it for seconds.
          maxHeartbeatThrottleInterval: HEARTBEAT_EVERY_MS,
          // A deploy should not cut off upstream calls (for a non-idempotent model that means uncertain).
          shutdownGraceTime: opts.shutdownGraceMs ?? Math.max(...m.channels.map((c) => c.timeoutMs)) + 5000,
        }),
      ),
    )),
    // Job watches (activities/job-watch.ts) hold a slot while their job runs: on a queue of their own,
    // so they never take the room of an upstream call; a watch hands its job back when shutdown begins.
    ...(jobModels.length
      ? [
          await Worker.create({
            ...common,
            taskQueue: watchQueue(config.temporal.taskQueue),
            ...interceptors(workerTracing(tracing, { workflows: false, prebuiltBundle: true })),
            activities: { watchImageJob: activities.watchImageJob, watchVideo: video.watchVideo },
            maxConcurrentActivityTaskExecutions: config.worker.jobWatches,
            maxHeartbeatThrottleInterval: HEARTBEAT_EVERY_MS,
            // A check in flight when shutdown begins: the longest one, then the watch hands back.
            shutdownGraceTime:
              opts.shutdownGraceMs ?? Math.max(...jobModels.flatMap((m) => m.channels.map((c) => c.timeoutMs))) + 5000,
          }),
        ]
      : []),
  ];
  // Readiness sees this process's workers through the beacon; it goes first on shutdown.
  const beacon = startBeacon(redis, config.redisPrefix, config.temporal.taskQueue);
  const reconcileDeps: ReconcileDeps = { temporal: client, store, config, log, reconciled: reconciledCounter() };
  const quota = createQuota(config, redis);
  reconcileDeps.sweep = () =>
    sweepReservations({ quota, store, temporal: client, log, reconcile: (id) => reconcileTask(reconcileDeps, id) });
  const reconciler = config.ops.reconcileEveryMs
    ? startReconciler(reconcileDeps, { ...RECONCILE_DEFAULTS, everyMs: config.ops.reconcileEveryMs })
    : null;
  const done = Promise.all(workers.map((w) => w.run())).finally(async () => {
    await reconciler?.stop();
    await beacon.stop();
    await tracing?.shutdown();
    cancels.close();
    redis.disconnect();
    await connection.close().catch(() => undefined);
  });
  return {
    done,
    /** A client over the workers' own connection (eager workflow start needs exactly that). */
    client,
    async shutdown() {
      await reconciler?.stop();
      await beacon.stop();
      for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
      // After the polls stop, so that no handed-back watch comes straight back to this worker.
      stopping.abort();
      await done;
    },
  };
}

/** kiln_tasks_reconciled on the worker's Prometheus endpoint, beside the SDK's metrics. */
function reconciledCounter() {
  let counter: ReturnType<Runtime['metricMeter']['createCounter']> | undefined;
  return (record: AnyTaskRecord, how: string) => {
    counter ??= Runtime.instance().metricMeter.createCounter(
      'kiln_tasks_reconciled',
      'tasks',
      'Tasks whose workflow closed outside Kiln (terminated, timed out, canceled, failed, gone), ended by reconciliation',
    );
    counter.add(1, { kind: record.kind, how, outcome: record.status });
  };
}

/** The registry, once every channel of `models` names a provider it has: a worker fails fast otherwise. */
/** How long a stopping worker lets these models' in-flight upstream calls finish: the longest call, and 5 s. */
function callsGraceMs(models: readonly { channels: { timeoutMs: number }[] }[]): number {
  return Math.max(0, ...models.flatMap((m) => m.channels.map((c) => c.timeoutMs + 5000)));
}

function available<P>(
  models: readonly { id: string; channels: { provider: string }[] }[],
  registry: Partial<Record<string, P>>,
) {
  for (const m of models)
    for (const c of m.channels)
      if (!registry[c.provider]) throw new Error(`model ${m.id}: provider ${c.provider} is not built into this worker`);
  return registry;
}
