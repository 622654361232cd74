// The poll path shared by image and video tasks: one Redis round trip behind the poll limiter (on a
// Redis Cluster: one per node, in parallel).
import { KilnError } from '../shared/errors.js';
import type { TaskStatus } from '../shared/task.js';
import type { AnyTaskRecord } from '../shared/records.js';
import type { StoredView, TaskStore } from './store/task-store.js';

/** A task's public view as stored (JSON text) with its status: a read answers with the text as is. */
export interface ViewText {
  status: TaskStatus;
  json: string;
}

/** Limiter key of single-task polls: one per owner and task, whatever the kind; in the task's slot. */
export const taskLimiterKey = (owner: string, id: string) => `task:{${id}}:${owner}`;

/**
 * Stored views of `ids` for `owner`, or rate_limited when `limiterKey` was polled within
 * `intervalMs`. With Redis unreachable every id comes back absent (the caller's Temporal path
 * answers), unthrottled. Finished tasks' views come from the store's in-process cache when it has
 * one (exact: they never change); the poll limiter is still Redis's.
 */
/**
 * One task's view from the in-process cache of finished tasks, with no I/O, exactly as `pollViews`
 * would answer it; undefined when Redis must be asked (not cached, another owner's, or a poll limit
 * that only Redis keeps).
 */
export function finishedView(
  store: TaskStore,
  id: string,
  owner: string,
  kind: AnyTaskRecord['kind'],
  intervalMs: number,
): ViewText | undefined {
  if (intervalMs > 0) return undefined;
  const v = store.finished?.get(id, owner, kind);
  return typeof v === 'object' ? { status: v.status, json: v.view } : undefined;
}

export async function pollViews(
  store: TaskStore,
  ids: string[],
  owner: string,
  kind: AnyTaskRecord['kind'],
  limiterKey: string | null,
  intervalMs: number,
): Promise<StoredView[]> {
  const read = async (wanted: string[]): Promise<StoredView[]> => {
    if (wanted.length === 0 && limiterKey === null) return [];
    const polled = await store
      .read(wanted, owner, kind, limiterKey, intervalMs)
      .catch(() => ({ limited: false as const, views: wanted.map((): StoredView => 'absent') }));
    if (polled.limited) {
      throw new KilnError(
        'rate_limited',
        'Polling too fast: wait for Retry-After before asking again.',
        Math.ceil(polled.retryAfterMs / 1000),
      );
    }
    return polled.views;
  };
  const cache = store.finished;
  if (!cache) return read(ids);
  // Finished tasks from memory; the rest (and the limiter, which always asks Redis) in one read.
  const views: (StoredView | undefined)[] = ids.map((id) => cache.get(id, owner, kind));
  const missing = ids.filter((_, i) => views[i] === undefined);
  if (missing.length === 0 && (limiterKey === null || intervalMs <= 0)) return views as StoredView[];
  const fresh = await read(missing);
  for (let i = 0, j = 0; i < ids.length; i++) {
    if (views[i] !== undefined) continue;
    views[i] = fresh[j++];
    cache.remember(ids[i], views[i]!, owner, kind);
  }
  return views as StoredView[];
}
