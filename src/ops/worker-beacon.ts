// A worker process announces itself in Redis while its workers run. Temporal's own poller list
// cannot answer "is a worker polling right now" quickly: a poller's last access time is the start
// of its current long poll (up to a minute old for an idle worker), and a stopped worker stays
// listed. The beacon is written every BEAT_MS and removed on shutdown, so /readyz sees a stopped
// worker at once and a killed one within STALE_MS. The beacon is one key (one slot on a Redis
// Cluster), so its transaction is allowed there.
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { RedisClient } from '../tasks/store/task-store.js';

export const BEAT_MS = 500;
export const STALE_MS = 2000;

export const beaconKey = (prefix: string, taskQueue: string) => `${prefix}workers:{${taskQueue}}`;

export function startBeacon(redis: RedisClient, prefix: string, taskQueue: string) {
  const key = beaconKey(prefix, taskQueue);
  const member = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  const beat = () => {
    const now = Date.now();
    // Errors are Redis being away: readiness reports that on its own.
    redis
      .multi()
      .zadd(key, now, member)
      .zremrangebyscore(key, '-inf', now - 10 * STALE_MS)
      .pexpire(key, 10 * STALE_MS)
      .exec()
      .catch(() => undefined);
  };
  beat();
  const timer = setInterval(beat, BEAT_MS);
  timer.unref();
  return {
    member,
    async stop() {
      clearInterval(timer);
      await redis.zrem(key, member).catch(() => undefined);
    },
  };
}

/** Worker processes whose beacon is fresh. */
export async function liveWorkers(redis: RedisClient, prefix: string, taskQueue: string): Promise<number> {
  return redis.zcount(beaconKey(prefix, taskQueue), Date.now() - STALE_MS, '+inf');
}
