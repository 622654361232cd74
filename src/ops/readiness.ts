// Readiness: Redis answers, Temporal answers, and a worker is polling Kiln's task queue. Every
// check runs in parallel under a short deadline, so /readyz answers within about a second whatever
// is down. On a Redis Cluster, Redis is ready when every slot has a primary that answers; the
// detail names the primaries (and their slots) that do not.
import type { Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { Cluster } from 'ioredis';
import type { RedisClient } from '../tasks/store/task-store.js';
import { liveWorkers } from './worker-beacon.js';

const { temporal } = proto;

export const CHECK_TIMEOUT_MS = 1000;
/** A Redis Cluster node's share of the check's deadline. */
const NODE_TIMEOUT_MS = 600;
/** Temporal lists a poller with the start of its current long poll: an idle worker looks this old. */
const POLLER_WINDOW_MS = 90_000;

export interface ReadinessDeps {
  redis: RedisClient;
  connection: Connection;
  namespace: string;
  taskQueue: string;
  redisPrefix: string;
}

export interface CheckResult {
  ok: boolean;
  ms: number;
  detail?: string;
}

function bounded<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    }),
  ]);
}

async function timed(fn: () => Promise<string | void>): Promise<CheckResult> {
  const t0 = performance.now();
  try {
    const detail = await bounded(fn(), CHECK_TIMEOUT_MS);
    return { ok: true, ms: Math.round(performance.now() - t0), ...(detail ? { detail } : {}) };
  } catch (err) {
    return { ok: false, ms: Math.round(performance.now() - t0), detail: (err as Error).message };
  }
}

const NO_BEACON = 'no running worker process (its beacon stopped)';

export async function checkReadiness(d: ReadinessDeps) {
  const deadline = () => Date.now() + CHECK_TIMEOUT_MS;
  const [redis, temporalCheck, worker] = await Promise.all([
    timed(async () => {
      if (d.redis instanceof Cluster) return clusterCheck(d.redis);
      await d.redis.ping();
    }),
    timed(async () => {
      await d.connection.withDeadline(deadline(), () => d.connection.workflowService.getSystemInfo({}));
    }),
    timed(async () => {
      const [beacons, described] = await Promise.all([
        liveWorkers(d.redis, d.redisPrefix, d.taskQueue),
        d.connection.withDeadline(deadline(), () =>
          d.connection.workflowService.describeTaskQueue({
            namespace: d.namespace,
            taskQueue: { name: d.taskQueue, kind: temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
            taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
          }),
        ),
      ]);
      const now = Date.now();
      const polling = (described.pollers ?? []).filter(
        (p) =>
          p.lastAccessTime &&
          now - (Number(p.lastAccessTime.seconds ?? 0) * 1000 + Math.floor((p.lastAccessTime.nanos ?? 0) / 1e6)) <
            POLLER_WINDOW_MS,
      );
      if (polling.length === 0) throw new Error(`no worker polls task queue ${d.taskQueue}`);
      if (beacons === 0) throw new Error(NO_BEACON);
      return `${beacons} worker process(es); ${polling.length} poller(s)`;
    }),
  ]);
  // The beacons live in Redis: while Redis does not answer, their absence says nothing of the workers.
  if (!redis.ok && !worker.ok && worker.detail === NO_BEACON) {
    worker.detail = `worker processes unconfirmed: their beacons are in Redis, which does not answer (${redis.detail})`;
  }
  return { ready: redis.ok && temporalCheck.ok && worker.ok, checks: { redis, temporal: temporalCheck, worker } };
}

/** Slot ranges ("0-5460,10923") of the slots whose primary is `node` in a cluster client's table. */
function slotRanges(slots: readonly (readonly string[] | undefined)[], node: string | undefined): string {
  const out: string[] = [];
  for (let s = 0; s < 16384; s++) {
    if (slots[s]?.[0] !== node) continue;
    let e = s;
    while (e + 1 < 16384 && slots[e + 1]?.[0] === node) e++;
    out.push(s === e ? String(s) : `${s}-${e}`);
    s = e;
  }
  return out.join(',');
}

/**
 * Every slot has a primary in the client's slot table, each of those primaries answers PING, and
 * the cluster says cluster_state:ok. Throws naming what is down.
 */
async function clusterCheck(cluster: Cluster): Promise<string> {
  const primaries = new Set<string>();
  let uncovered = false;
  for (let s = 0; s < 16384; s++) {
    const p = cluster.slots[s]?.[0];
    if (p) primaries.add(p);
    else uncovered = true;
  }
  if (primaries.size === 0) throw new Error('no Redis Cluster primary known (slot table empty)');
  const connected = new Map(cluster.nodes('master').map((n) => [`${n.options.host}:${n.options.port}`, n]));
  const down: string[] = [];
  if (uncovered) down.push(`slots ${slotRanges(cluster.slots, undefined)} have no primary`);
  const answers = await Promise.all(
    [...primaries].map(async (key) => {
      const node = connected.get(key);
      try {
        if (!node) throw new Error('not connected');
        // Under the check's own deadline, so the answer names the node that did not answer.
        await bounded(node.ping(), NODE_TIMEOUT_MS);
        return node;
      } catch (err) {
        down.push(
          `primary ${key} (slots ${slotRanges(cluster.slots, key)}) does not answer: ${(err as Error).message}`,
        );
        return null;
      }
    }),
  );
  if (down.length > 0) throw new Error(down.join('; '));
  const info = String(await bounded(answers[0]!.cluster('INFO'), NODE_TIMEOUT_MS));
  const state = /cluster_state:(\w+)/.exec(info)?.[1];
  if (state !== 'ok') throw new Error(`cluster_state:${state ?? 'unknown'} (as ${[...primaries][0]} sees it)`);
  return `${primaries.size} primaries serve all 16384 slots`;
}
