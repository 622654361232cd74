// The read-model rebuild on a Redis Cluster of its own (3 primaries, 3 replicas), flushed on every
// primary: the same scenario as on a single Redis (test/support/rebuild.ts).
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Cluster } from 'ioredis';
import { inject } from 'vitest';
import { freePorts } from '../../../scripts/production/proc.js';
import { startRedisCluster } from '../../../scripts/production/redis-cluster.js';
import { describeRebuild } from '../../support/rebuild.js';

describeRebuild('on a Redis Cluster', async () => {
  const ports = await freePorts(12);
  const cluster = await startRedisCluster({
    dir: join(inject('tmpRoot'), `redis-cluster-rebuild-${randomBytes(3).toString('hex')}`),
    ports: ports.slice(0, 6),
    busPorts: ports.slice(6),
    fresh: true,
  });
  const client = new Cluster(
    cluster.nodeList.split(',').map((n) => ({ host: n.split(':')[0], port: Number(n.split(':')[1]) })),
  );
  return {
    env: { REDIS_CLUSTER_NODES: cluster.nodeList },
    flush: async () => {
      await Promise.all(client.nodes('master').map((n) => n.flushall()));
    },
    stop: async () => {
      client.disconnect();
      await cluster.stop();
    },
  };
});
