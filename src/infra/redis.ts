// The Redis connection every process makes from its Config (one node, or a Cluster).
import { Cluster, Redis } from 'ioredis';
import type { Config } from '../config/env.js';

/** The read model's connection: one Redis, or a Redis Cluster (REDIS_CLUSTER_NODES). */
export type RedisClient = Redis | Cluster;

/** A Lua script as ioredis adds it to a client: the key count first unless it was defined with one. */
export type ScriptCommand = (...args: (string | number)[]) => Promise<unknown>;

/**
 * Defines the scripts on the client and returns it typed with them. ioredis runs a defined script by
 * its SHA (EVALSHA) and sends the text again only after a NOSCRIPT (a restarted or flushed Redis);
 * a plain EVAL sent the whole script on every call and Redis hashed it each time.
 */
export function defineScripts<N extends string>(
  redis: RedisClient,
  scripts: Record<N, { lua: string; numberOfKeys?: number }>,
): Record<N, ScriptCommand> {
  for (const [name, script] of Object.entries<{ lua: string; numberOfKeys?: number }>(scripts)) {
    redis.defineCommand(name, script);
  }
  return redis as unknown as Record<N, ScriptCommand>;
}

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
      // While slots move (a failover), ioredis refuses auto-pipelined batches whose keys it grouped
      // by the slot table from before the move ("All keys in the pipeline should belong to the same
      // slots allocation group"); a cluster read is one pipeline per node anyway.
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
    : `Redis at ${config.redisUrl.replace(/\/\/[^@/]*@/, '//')}`; // without a password in the URL
}

export async function ready(redis: RedisClient, config: Config): Promise<void> {
  try {
    await redis.connect();
  } catch (err) {
    redis.disconnect();
    const setting = config.redisClusterNodes ? 'REDIS_CLUSTER_NODES' : 'REDIS_URL';
    throw new Error(`cannot reach ${redisWhere(config)} (${(err as Error).message}); set ${setting}`);
  }
}
