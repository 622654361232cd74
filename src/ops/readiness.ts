// Readiness: Redis answers, Temporal answers, and a worker is polling Kiln's task queue. Every
// check runs in parallel under a short deadline, so /readyz answers within about a second whatever
// is down.
import type { Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import type { Redis } from 'ioredis';
import { liveWorkers } from './worker-beacon.js';

const { temporal } = proto;

export const CHECK_TIMEOUT_MS = 1000;
/** Temporal lists a poller with the start of its current long poll: an idle worker looks this old. */
const POLLER_WINDOW_MS = 90_000;

export interface ReadinessDeps {
  redis: Redis;
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

export async function checkReadiness(d: ReadinessDeps) {
  const deadline = () => Date.now() + CHECK_TIMEOUT_MS;
  const [redis, temporalCheck, worker] = await Promise.all([
    timed(async () => {
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
      if (beacons === 0) throw new Error('no running worker process (its beacon stopped)');
      return `${beacons} worker process(es); ${polling.length} poller(s)`;
    }),
  ]);
  return { ready: redis.ok && temporalCheck.ok && worker.ok, checks: { redis, temporal: temporalCheck, worker } };
}
