// The read model for a connection: the client's type decides which store keeps it.
import { Cluster } from 'ioredis';
import type { TaskStoreOptions } from './base.js';
import { ClusterTaskStore } from './cluster.js';
import { SingleNodeTaskStore } from './single-node.js';
import type { RedisClient, TaskStore } from './task-store.js';

export type { TaskStoreOptions };

export function createTaskStore(redis: RedisClient, opts: TaskStoreOptions): TaskStore {
  return redis instanceof Cluster ? new ClusterTaskStore(redis, opts) : new SingleNodeTaskStore(redis, opts);
}
