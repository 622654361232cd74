// Wiring shared by server.ts, worker.ts and the tests: builds the parts from a Config.
import { Cluster, Redis } from 'ioredis';
import type { Logger } from 'pino';
import { readChannels } from './channels/readings.js';
import { RedisChannelState } from './channels/redis-state.js';
import type { Config } from './config.js';
import { buildApp } from './app.js';
import { consoleOptions } from './http/console.js';
import { PassthroughAuth, type Authenticator } from './infra/auth.js';
import { IssuedKeyAuth } from './keys/auth.js';
import { KeyStore } from './keys/store.js';
import { ChatService, chatProviders } from './chat/service.js';
import { createBlobs } from './infra/blob-store.js';
import { DirectService } from './image/direct.js';
import { GeminiBatches } from './gemini-batch/service.js';
import { OpenAIImagesService } from './openai-images/service.js';
import { createSafeFetch } from './infra/safe-fetch.js';
import type { RedisClient, TaskStore } from './tasks/store/task-store.js';
import { createTaskStore } from './tasks/store/create.js';
import { settling } from './usage/settlement.js';
import { followDeletions } from './tasks/deletions.js';
import { QuotaStore } from './usage/store.js';
import { FinishedViews } from './tasks/finished-views.js';
import { IMAGE_FALLBACK, ImageTaskService } from './image/service.js';
import { VIDEO_FALLBACK, VideoTaskService } from './video/service.js';
import { ReadModelRebuild } from './tasks/rebuild/rebuild.js';
import { WebhookSecrets } from './webhooks/service.js';
import { connectTemporal } from './temporal/client.js';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import { Connection } from '@temporalio/client';
import { ApiMetrics } from './ops/metrics.js';
import { waitGauge, WaitRegistry } from './tasks/waits.js';
import { checkReadiness } from './ops/readiness.js';
import { setupTracing } from './ops/tracing.js';
import { AesGcmCodec } from './temporal/codec.js';

/**
 * Workers (`failFast: false`) queue commands while Redis restarts: activities wait a little, then
 * retry through Temporal. The API fails fast instead, so a poll falls back to Temporal at once
 * rather than waiting out reconnects. With REDIS_CLUSTER_NODES set this is a Redis Cluster client
 * with the same choices; it re-reads the slot table every few seconds (and on MOVED), so a failover
 * is picked up even by a process that has nothing to send to the failed primary.
 */
export function connectRedis(config: Pick<Config, 'redisUrl' | 'redisClusterNodes'>, failFast = false): RedisClient {
  // Auto-pipelining sends the commands of concurrent requests in one write: fewer syscalls per poll.
  const options = {
    enableOfflineQueue: !failFast,
    lazyConnect: failFast,
    enableAutoPipelining: failFast,
  };
  if (config.redisClusterNodes) {
    return new Cluster(config.redisClusterNodes, {
      ...options,
      // While slots move (a failover), ioredis refused auto-pipelined batches whose keys it had
      // grouped by the old slot table ("All keys in the pipeline should belong to the same slots
      // allocation group"); a cluster read is one pipeline per node anyway.
      enableAutoPipelining: false,
      slotsRefreshInterval: 2000,
      redisOptions: { maxRetriesPerRequest: 2 },
    });
  }
  return new Redis(config.redisUrl, { ...options, maxRetriesPerRequest: 2 });
}

/** Where Redis is, as the setting that names it. */
function redisWhere(config: Pick<Config, 'redisUrl' | 'redisClusterNodes'>): string {
  return config.redisClusterNodes
    ? `the Redis Cluster at ${config.redisClusterNodes.map((n) => `${n.host}:${n.port}`).join(',')}`
    : `Redis at ${config.redisUrl}`;
}

async function ready(redis: RedisClient, config: Config): Promise<void> {
  try {
    await redis.connect();
  } catch (err) {
    redis.disconnect();
    const setting = config.redisClusterNodes ? 'REDIS_CLUSTER_NODES' : 'REDIS_URL';
    throw new Error(`cannot reach ${redisWhere(config)} (${(err as Error).message}); set ${setting}`);
  }
}

/** `readCache`: an API process's store, which keeps finished tasks' views (FINISHED_VIEWS_CACHE_MB). */
export function createStore(config: Config, redis: RedisClient, readCache = false): TaskStore {
  const finished =
    readCache && config.finishedViewsBytes > 0
      ? new FinishedViews(config.finishedViewsBytes, config.retentionSeconds * 1000)
      : undefined;
  const store = createTaskStore(redis, {
    prefix: config.redisPrefix,
    retentionSeconds: config.retentionSeconds,
    finished,
  });
  // Every terminal write settles the task's quota reservation (src/usage/settlement.ts).
  return settling(store, createQuota(config, redis));
}

/** Quota reservations, limits and the usage ledger (src/usage/). */
export function createQuota(config: Pick<Config, 'redisPrefix' | 'limits'>, redis: RedisClient): QuotaStore {
  return new QuotaStore(redis, config.redisPrefix, config.limits);
}

export async function createApi(config: Config, log: Logger, opts: { spanExporter?: SpanExporter } = {}) {
  const redis = connectRedis(config, true);
  redis.on('error', (err) => log.warn({ err: err.message }, 'redis error'));
  await ready(redis, config);
  const tracing = setupTracing(config.ops, 'kiln-api', opts.spanExporter);
  const { client, connection } = await connectTemporal(config, tracing);
  // Readiness probes get their own connection without the client's retry interceptor: while
  // Temporal is down, retried probe calls would outlive their deadline and pile up.
  const probe = Connection.lazy({ address: config.temporal.address, interceptors: [] });
  const store = createStore(config, redis, true);
  const keys = config.authMode === 'keys' ? new KeyStore(redis, config.redisPrefix) : undefined;
  const auth: Authenticator = keys ? new IssuedKeyAuth(keys) : new PassthroughAuth(config.ownerKey);
  const { blobs, files } = createBlobs(config);
  // Long-polls: one subscriber connection for the whole process.
  const subscriber = connectRedis(config, true);
  const waits = new WaitRegistry(subscriber, store.waitChannel, log);
  await waits.start();
  // On the same connection: a video deleted through any process leaves every process's memory.
  followDeletions(subscriber, store.deletionChannel, store.finished, log);
  // One quota for the submits, the usage routes and the admin calls.
  const quota = createQuota(config, redis);
  const tasks = new ImageTaskService(config, store, client, waits, quota);
  const fetchImage = createSafeFetch({
    maxBytes: 32 * 1024 * 1024,
    maxRedirects: 3,
    acceptType: (t) => t.startsWith('image/'),
    allow: config.referenceFetchAllow,
  });
  const direct = new DirectService(tasks, client, blobs, fetchImage);
  const geminiBatches = new GeminiBatches({ config, tasks, store, temporal: client, blobs, fetchImage });
  const openaiImages = new OpenAIImagesService({
    tasks,
    temporal: client,
    blobs,
    fetchImage,
    models: config.models,
    redis,
    prefix: config.redisPrefix,
    retentionSeconds: config.retentionSeconds,
  });
  // Channel capacity, rate and health, shared with the workers (chat calls and the admin view use them here).
  const channels = new RedisChannelState(redis, config.redisPrefix);
  const rebuild = new ReadModelRebuild({
    temporal: client,
    taskQueue: config.temporal.taskQueue,
    kinds: [IMAGE_FALLBACK, VIDEO_FALLBACK],
    models: config.models,
    store,
    prefix: config.redisPrefix,
    retentionSeconds: config.retentionSeconds,
    log,
  });
  const app = buildApp({
    auth,
    models: config.models,
    tasks,
    blobs: files,
    direct,
    openaiImages,
    pollAfterSeconds: config.pollAfterSeconds,
    chat: new ChatService(config.models, config.upstreamKeys, chatProviders(), channels),
    videos: new VideoTaskService(config, store, client, waits, quota),
    geminiVideos: { blobs, files, publicBaseUrl: config.publicBaseUrl },
    geminiBatches,
    webhooks: new WebhookSecrets(redis, config.redisPrefix, config.ownerKey),
    console: consoleOptions(config),
    quota,
    admin: { rebuild, channels, models: config.models, keys, quota, store, operatorToken: config.ops.operatorToken },
    log,
    ops: {
      metrics: waitGauge(
        new ApiMetrics({
          queueDepth: () => store.unfinishedCount(),
          // Totals and histograms only: an empty window spares Redis sending the outcome log.
          channels: () => readChannels(channels, config.models, 0),
        }),
        waits,
      ),
      readiness: () =>
        checkReadiness({
          redis,
          connection: probe,
          namespace: config.temporal.namespace,
          taskQueue: config.temporal.taskQueue,
          redisPrefix: config.redisPrefix,
        }),
      stopping: () => stopping,
      codec: {
        codec: new AesGcmCodec(config.payloadKey),
        operatorToken: config.ops.operatorToken,
        corsOrigins: config.ops.codecCorsOrigins,
      },
      ...(tracing ? { tracer: tracing.tracer } : {}),
    },
  });
  let stopping = false;
  return {
    app,
    store,
    redis,
    client,
    connection,
    waits,
    rebuild,
    /** SIGTERM: /readyz turns unready and responses ask keep-alive clients to reconnect elsewhere. */
    drain() {
      stopping = true;
      // Waiting requests answer now with the current state, so the server's close is not held up.
      waits.drain();
    },
    async close() {
      // A rebuild run here stops after its page and gives up its lock: another process resumes it.
      await rebuild.stop();
      await tracing?.shutdown();
      await connection.close().catch(() => undefined);
      await probe.close().catch(() => undefined);
      waits.close();
      redis.disconnect();
    },
  };
}
