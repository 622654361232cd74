// The read model's one write that is not a transition: a task's webhook delivery state. It changes
// the record and its stored poll view together (a compare-and-set on the record's JSON, so a
// transition written in between is never undone), and never the task's status.
import type { TaskStatus } from '../../shared/task.js';
import type { AnyTaskRecord } from '../../shared/records.js';
import { storedViews } from '../../shared/views.js';
import type { WebhookState } from '../../shared/webhook-types.js';
import { COMPARE_AND_SET } from './replies.js';
import type { TaskStore } from './task-store.js';

// KEYS: task hash. ARGV: the record JSON read, the new record JSON, its view. Writes only when the
// record is still the one read; the TTL stays the record's.
const SET_IF_UNCHANGED = `
if redis.call('HGET', KEYS[1], 'j') ~= ARGV[1] then return ${COMPARE_AND_SET.changed} end
redis.call('HSET', KEYS[1], 'j', ARGV[2], 'v', ARGV[3])
return ${COMPARE_AND_SET.written}`;

const ROUNDS = 5;

/**
 * Writes `state` as the task's `webhook` while the record still shows `status` (the event that was
 * delivered): once the task has moved on, the state belongs to a later event's delivery. True when
 * written.
 */
export async function recordWebhookState(
  store: Pick<TaskStore, 'redis' | 'taskKey'>,
  id: string,
  status: TaskStatus,
  state: WebhookState,
  /** Leaves the stored state when this says it is newer (a rebuild's read of Temporal may be older). */
  keep: (stored: WebhookState | undefined) => boolean = () => false,
): Promise<boolean> {
  const key = store.taskKey(id);
  for (let round = 0; round < ROUNDS; round++) {
    const json = await store.redis.hget(key, 'j');
    if (!json) return false;
    const record = JSON.parse(json) as AnyTaskRecord;
    if (record.status !== status || keep(record.webhook)) return false;
    const next = { ...record, webhook: state } as AnyTaskRecord;
    const written = await store.redis.eval(
      SET_IF_UNCHANGED,
      1,
      key,
      json,
      JSON.stringify(next),
      storedViews(next).view,
    );
    if (written === COMPARE_AND_SET.written) return true;
  }
  return false;
}

/**
 * Whether a stored delivery state is at least as far as `state`: more attempts, or as many and
 * settled (an attempt's outcome is written after it ran, so a settled state ends its delivery).
 */
export function webhookStateKept(state: WebhookState): (stored: WebhookState | undefined) => boolean {
  return (stored) =>
    stored !== undefined &&
    (stored.attempts > state.attempts ||
      (stored.attempts === state.attempts && (stored.status !== 'pending' || state.status === 'pending')));
}
