// The two Redis shapes the store tests run against: one redis-server (the suite's), and a real Redis
// Cluster of 3 primaries and 3 replicas started for the test file. Each gives two connections, as
// two processes would have.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Cluster, Redis } from 'ioredis';
import { inject } from 'vitest';
import { freePorts } from '../../scripts/production/proc.js';
import { startRedisCluster } from '../../scripts/production/redis-cluster.js';
import type { RedisClient } from '../../src/tasks/store/task-store.js';

export interface Backend {
  /** Two separate connections, as two processes would have. */
  clients: [RedisClient, RedisClient];
  stop(): Promise<void>;
}

export const singleNode = async (): Promise<Backend> => {
  const url = inject('redisUrl');
  const clients: [RedisClient, RedisClient] = [new Redis(url), new Redis(url)];
  return { clients, stop: async () => clients.forEach((c) => c.disconnect()) };
};

/** `name`: part of the cluster's directory name, to tell test files' clusters apart. */
export const redisCluster = async (name: string): Promise<Backend> => {
  const ports = await freePorts(12);
  const cluster = await startRedisCluster({
    dir: join(inject('tmpRoot'), `redis-cluster-${name}-${randomBytes(3).toString('hex')}`),
    ports: ports.slice(0, 6),
    busPorts: ports.slice(6),
    fresh: true,
  });
  const seeds = cluster.nodeList.split(',').map((n) => ({ host: n.split(':')[0], port: Number(n.split(':')[1]) }));
  const clients: [RedisClient, RedisClient] = [new Cluster(seeds), new Cluster(seeds)];
  return {
    clients,
    stop: async () => {
      clients.forEach((c) => c.disconnect());
      await cluster.stop();
    },
  };
};

/** The backends a store test runs on, for `describe.each`. */
export const BACKENDS = (name: string): [string, () => Promise<Backend>][] => [
  ['a single redis-server', singleNode],
  ['a Redis Cluster', () => redisCluster(name)],
];
