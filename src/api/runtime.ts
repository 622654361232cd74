// Wiring shared by server.ts, worker.ts and the tests: builds the parts from a Config.
import type { Logger } from 'pino';
import { readChannels } from '../channels/readings.js';
import { channelSeriesText } from '../channels/metrics.js';
import { RedisChannelState } from '../channels/redis-state.js';
import type { Config } from '../config/env.js';
import { buildApp } from './app.js';
import { consoleOptions } from './console.js';
import { PassthroughAuth, type Authenticator } from '../infra/callers.js';
import { IssuedKeyAuth } from '../keys/key-auth.js';
import { KeyStore } from '../keys/store.js';
import { ChatService, chatProviders } from '../chat/service.js';
import { createBlobs } from '../blobs/stores.js';
import { DirectService } from '../image/direct.js';
import { GeminiBatches } from '../gemini-batch/service.js';
import { OpenAIImagesService } from '../openai-images/service.js';
import { createSafeFetch } from '../infra/safe-fetch.js';
import { connectRedis, ready } from '../infra/redis.js';
import { kernelDeps } from './kernel.js';
import { createQuota, createStore } from '../usage/settlement.js';
import { followDeletions } from '../tasks/deletion-feed.js';
import { IMAGE_FALLBACK, ImageTaskService } from '../image/service.js';
import { VIDEO_FALLBACK, VideoTaskService } from '../video/service.js';
import { ReadModelRebuild } from '../tasks/rebuild/rebuild.js';
import { WebhookSecrets } from '../webhooks/service.js';
import { connectTemporal } from '../temporal/client.js';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import { Connection } from '@temporalio/client';
import { ApiMetrics } from '../ops/metrics.js';
import { waitGauge, WaitRegistry } from '../tasks/waits.js';
import { checkReadiness } from '../ops/readiness.js';
import { setupTracing } from '../ops/tracing.js';
import { AesGcmCodec } from '../temporal/codec.js';
import { ConfigError } from '../config/models.js';

export async function createApi(config: Config, log: Logger, opts: { spanExporter?: SpanExporter } = {}) {
  // Eager start hands the first workflow task to a worker sharing the client's connection: the API has none.
  if (config.temporal.eagerStart)
    throw new ConfigError('TEMPORAL_EAGER_START=1 needs a workflow worker in the same process; the API runs none');
  const redis = connectRedis(config, true);
  redis.on('error', (err) => log.warn({ err: err.message }, 'redis error'));
  await ready(redis, config);
  const tracing = await setupTracing(config.ops, 'kiln-api', opts.spanExporter);
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
  const kernel = kernelDeps(config, quota, waits);
  const tasks = new ImageTaskService(config, store, client, kernel);
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
    videos: new VideoTaskService(config, store, client, kernel),
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
          // Deployment-wide values, read once by the process answering the scrape, never summed.
          // Totals and histograms only: an empty window spares Redis sending the outcome log.
          moreText: () => channelSeriesText(() => readChannels(channels, config.models, 0)),
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
