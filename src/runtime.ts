// Wiring shared by server.ts, worker.ts and the tests: builds the parts from a Config.
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { buildApp } from './app.js';
import { IssuedKeyAuth, KeyStore, PassthroughAuth, type Authenticator } from './infra/auth.js';
import { ChatService } from './chat/service.js';
import { createBlobs } from './infra/blob-store.js';
import { DirectService } from './image/direct.js';
import { createSafeFetch } from './infra/safe-fetch.js';
import { TaskStore } from './infra/store.js';
import { TaskService } from './image/service.js';
import { VideoService } from './video/service.js';
import { connectTemporal } from './temporal/client.js';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import { Connection } from '@temporalio/client';
import { ApiMetrics } from './ops/metrics.js';
import { checkReadiness } from './ops/readiness.js';
import { setupTracing } from './ops/tracing.js';
import { AesGcmCodec } from './temporal/codec.js';

/**
 * Workers (`failFast: false`) queue commands while Redis restarts: activities wait a little, then
 * retry through Temporal. The API fails fast instead, so a poll falls back to Temporal at once
 * rather than waiting out reconnects.
 */
export function connectRedis(config: Pick<Config, 'redisUrl'>, failFast = false): Redis {
  // Auto-pipelining sends the commands of concurrent requests in one write: fewer syscalls per poll.
  return new Redis(config.redisUrl, {
    maxRetriesPerRequest: 2,
    enableOfflineQueue: !failFast,
    lazyConnect: failFast,
    enableAutoPipelining: failFast,
  });
}

async function ready(redis: Redis, url: string): Promise<void> {
  try {
    await redis.connect();
  } catch (err) {
    redis.disconnect();
    throw new Error(`cannot reach Redis at ${url} (${(err as Error).message}); set REDIS_URL`);
  }
}

export function createStore(config: Config, redis: Redis): TaskStore {
  return new TaskStore(redis, config.redisPrefix, config.retentionSeconds);
}

export async function createApi(config: Config, log: Logger, opts: { spanExporter?: SpanExporter } = {}) {
  const redis = connectRedis(config, true);
  redis.on('error', (err) => log.warn({ err: err.message }, 'redis error'));
  await ready(redis, config.redisUrl);
  const tracing = setupTracing(config.ops, 'kiln-api', opts.spanExporter);
  const { client, connection } = await connectTemporal(config, tracing);
  // Readiness probes get their own connection without the client's retry interceptor: while
  // Temporal is down, retried probe calls would outlive their deadline and pile up.
  const probe = Connection.lazy({ address: config.temporal.address, interceptors: [] });
  const store = createStore(config, redis);
  const auth: Authenticator =
    config.authMode === 'keys'
      ? new IssuedKeyAuth(new KeyStore(redis, config.redisPrefix))
      : new PassthroughAuth(config.ownerKey);
  const { blobs, files } = createBlobs(config);
  const tasks = new TaskService(config, store, client);
  const fetchImage = createSafeFetch({
    maxBytes: 32 * 1024 * 1024,
    maxRedirects: 3,
    acceptType: (t) => t.startsWith('image/'),
    allow: config.referenceFetchAllow,
  });
  const direct = new DirectService(tasks, client, blobs, fetchImage);
  const app = buildApp({
    auth,
    models: config.models,
    tasks,
    blobs: files,
    direct,
    pollAfterSeconds: config.pollAfterSeconds,
    chat: new ChatService(config.models, config.upstreamKeys),
    videos: new VideoService(config, store, client),
    log,
    ops: {
      metrics: new ApiMetrics({ queueDepth: () => store.unfinishedCount() }),
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
    /** SIGTERM: /readyz turns unready and responses ask keep-alive clients to reconnect elsewhere. */
    drain() {
      stopping = true;
    },
    async close() {
      await tracing?.shutdown();
      await connection.close().catch(() => undefined);
      await probe.close().catch(() => undefined);
      redis.disconnect();
    },
  };
}
