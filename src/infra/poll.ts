// The poll path shared by image and video tasks: one Redis round trip behind the poll limiter.
import { KilnError } from '../shared/errors.js';
import type { TaskStore } from './store.js';

/** Limiter key of single-task polls: one per owner and task, whatever the kind. */
export const taskLimiterKey = (owner: string, id: string) => `task:{${id}}:${owner}`;

/**
 * Raw records for ids (null where Redis has none), or rate_limited when `limiterKey` was polled
 * within `intervalMs`. With Redis unreachable every id comes back null (the caller's Temporal path
 * answers), unthrottled.
 */
export async function pollRecords(store: TaskStore, ids: string[], limiterKey: string | null, intervalMs: number): Promise<(string | null)[]> {
  const polled = await store.poll(ids, limiterKey, intervalMs)
    .catch(() => ({ limited: false as const, json: ids.map(() => null) }));
  if (polled.limited) {
    throw new KilnError('rate_limited', 'Polling too fast: wait for Retry-After before asking again.', Math.ceil(polled.retryAfterMs / 1000));
  }
  return polled.json;
}
