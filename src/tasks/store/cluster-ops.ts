// Redis Cluster plumbing of the read model: commands grouped into one pipeline per node, and writes
// confirmed by a replica before they count.
import type { Cluster } from 'ioredis';
import { groupByNode, keySlot } from './cluster-slots.js';

/** How long a transition step waits for a replica to confirm it (see `replicated`). */
const REPLICA_WAIT_MS = 200;

export type PipelineReply = [Error | null, unknown][];

/**
 * Cluster mode: one write on `key`'s node, followed by WAIT for a replica of that node (when it
 * has one), in one pipeline. Replication is asynchronous: a primary killed right after answering
 * could lose a write its replica, promoted, never saw. With WAIT the answer comes after the
 * replica has the write, or the call fails when the primary dies first (and the caller runs the
 * transition again on the promoted replica). A replica that lags more than REPLICA_WAIT_MS does
 * not block writes: the write stands on the primary alone, as on a single Redis.
 */
export async function replicated(
  cluster: Cluster,
  key: string,
  add: (p: ReturnType<Cluster['pipeline']>) => unknown,
): Promise<unknown> {
  const p = cluster.pipeline();
  add(p);
  if ((cluster.slots[keySlot(key)]?.length ?? 1) > 1) p.call('WAIT', 1, REPLICA_WAIT_MS);
  const res = ((await p.exec()) ?? []) as PipelineReply;
  for (const [err] of res) if (err) throw err;
  return res[0][1];
}

/**
 * Cluster mode: one command per key, sent as one pipeline per node (keys grouped by the node
 * serving their slot), all nodes at once; replies in key order. With `settle`, a node that fails
 * gives its keys an error reply instead of failing the whole call.
 */
export async function perNode(
  cluster: Cluster,
  keys: string[],
  add: (p: ReturnType<Cluster['pipeline']>, key: string, i: number) => unknown,
  settle = false,
): Promise<PipelineReply> {
  const out: PipelineReply = new Array(keys.length);
  const groups = groupByNode(cluster.slots, keys);
  const batches = groups ? [...groups.values()] : keys.map((_, i) => [i]);
  await Promise.all(
    batches.map(async (idx) => {
      const p = cluster.pipeline();
      for (const i of idx) add(p, keys[i], i);
      let res: PipelineReply;
      try {
        res = ((await p.exec()) ?? []) as PipelineReply;
      } catch (err) {
        if (!settle) throw err;
        res = idx.map(() => [err as Error, null]);
      }
      idx.forEach((i, j) => (out[i] = res[j] ?? [new Error('no reply'), null]));
    }),
  );
  return out;
}
