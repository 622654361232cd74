// Settlement rides on the read model's terminal writes. Every terminal write of a task (the
// workflow's activities, the reconciler, a record rebuilt from Temporal) goes through
// `TaskStore.transition` or `restore`; this wraps both so that, once the write is in, the task's
// reservation is settled by the terminal record Redis holds. The settle script takes a task's
// reservation at most once, and a write that throws is run again by its caller (an activity that
// Temporal retries on another worker when this one dies), so a crash can neither skip nor double
// a settlement. The sweep (sweep.ts) is the net under both.
import type { AnyTaskRecord } from '../shared/records.js';
import { TERMINAL_STATUSES } from '../shared/task.js';
import type { Config } from '../config/env.js';
import type { RedisClient } from '../infra/redis.js';
import { createTaskStore } from '../tasks/store/create.js';
import { FinishedViews } from '../tasks/store/finished-views.js';
import type { TaskStore } from '../tasks/store/task-store.js';
import { QuotaStore, type LedgerStatus, type SettleOutcome } from './store.js';

/** How the ledger counts a terminal record: a failed task whose code is `canceled` is canceled. */
export function ledgerStatus(r: AnyTaskRecord): LedgerStatus {
  if (r.status === 'failed') return r.error?.code === 'canceled' ? 'canceled' : 'failed';
  return r.status as LedgerStatus;
}

/** Time spent on the upstream: from the first call to the end (whole seconds, as records keep them). */
export function upstreamMs(r: AnyTaskRecord): number {
  const end = 'finished_at' in r ? r.finished_at : 'completed_at' in r ? r.completed_at : null;
  return r.started_at != null && end != null ? Math.max(0, end - r.started_at) * 1000 : 0;
}

type SettleStore = Pick<TaskStore, 'get' | 'wasDispatched'>;

/** Settles `id` by the terminal record the read model holds (none yet: nothing to do). */
export async function settleTask(store: SettleStore, quota: QuotaStore, record: AnyTaskRecord): Promise<SettleOutcome> {
  const status = ledgerStatus(record);
  // A dispatch mark says the call was sent: only a failure's charge depends on it.
  const sent = status === 'failed' || status === 'canceled' ? await store.wasDispatched(record.id) : false;
  return quota.settle(record.owner, record.id, status, sent, upstreamMs(record));
}

/** `store`, whose terminal writes also settle the task's reservation. */
export function settling<S extends TaskStore>(store: S, quota: QuotaStore): S {
  const wrap = (write: (r: AnyTaskRecord) => Promise<boolean>) => async (record: AnyTaskRecord) => {
    const applied = await write(record);
    if (TERMINAL_STATUSES.includes(record.status)) {
      // The first terminal write wins: a later one settles by the record that won.
      const held = applied ? record : ((await store.get(record.id)) as AnyTaskRecord | null);
      if (held && TERMINAL_STATUSES.includes(held.status)) await settleTask(store, quota, held);
    }
    return applied;
  };
  store.transition = wrap(store.transition.bind(store));
  store.restore = wrap(store.restore.bind(store));
  return store;
}

/** `readCache`: an API process's store, which keeps finished tasks' views (FINISHED_VIEWS_CACHE_MB). */
export function createStore(config: Config, redis: RedisClient, readCache = false): TaskStore {
  const finished =
    readCache && config.finishedViewsBytes > 0
      ? new FinishedViews(config.finishedViewsBytes, config.retentionSeconds * 1000)
      : undefined;
  const store = createTaskStore(redis, {
    prefix: config.redisPrefix,
    retentionSeconds: config.retentionSeconds,
    finished,
  });
  // Every terminal write settles the task's quota reservation.
  return settling(store, createQuota(config, redis));
}

/** Quota reservations, limits and the usage ledger. */
export function createQuota(config: Pick<Config, 'redisPrefix' | 'limits'>, redis: RedisClient): QuotaStore {
  return new QuotaStore(redis, config.redisPrefix, config.limits);
}
