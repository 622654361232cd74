// Wiring shared by server.ts, worker.ts and the tests: builds the parts from a Config.
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { buildApp } from './app.js';
import { IssuedKeyAuth, KeyStore, PassthroughAuth, type Authenticator } from './services/auth.js';
import { FsBlobStore } from './services/blobs.js';
import { TaskStore } from './services/store.js';
import { TaskService } from './services/tasks.js';
import { connectTemporal } from './temporal/client.js';

export function connectRedis(config: Pick<Config, 'redisUrl'>): Redis {
  // Commands wait (offline queue) while Redis restarts, but never forever: a poll gets an error
  // it can answer with instead of hanging.
  return new Redis(config.redisUrl, { maxRetriesPerRequest: 2, enableAutoPipelining: false, lazyConnect: false });
}

export function createStore(config: Config, redis: Redis): TaskStore {
  return new TaskStore(redis, config.redisPrefix, config.retentionSeconds);
}

export async function createApi(config: Config, log: Logger) {
  const redis = connectRedis(config);
  redis.on('error', (err) => log.warn({ err: err.message }, 'redis error'));
  const { client, connection } = await connectTemporal(config);
  const store = createStore(config, redis);
  const auth: Authenticator = config.authMode === 'keys'
    ? new IssuedKeyAuth(new KeyStore(redis, config.redisPrefix))
    : new PassthroughAuth(config.ownerKey);
  const blobs = new FsBlobStore(config.blobDir, config.publicBaseUrl);
  const tasks = new TaskService(config, store, client);
  const app = buildApp({ auth, models: config.models, tasks, blobs, pollAfterSeconds: config.pollAfterSeconds, log });
  return {
    app, store, redis, client,
    async close() {
      await connection.close().catch(() => undefined);
      redis.disconnect();
    },
  };
}
