// Finished tasks' public views, kept in the API process so a repeat poll of a finished task needs no
// Redis round trip. Exact by construction: a terminal record is never rewritten (the transition
// script refuses a second terminal write), so its stored view is final — except while a webhook
// delivery is pending, whose progress shows in the view; such views are not kept — or until the
// task is deleted (videos: DELETE /v1/videos/{id}), which every API process hears of on the
// deletion feed (src/tasks/deletion-feed.ts); views of a kind that can be deleted are kept only while
// that feed is live, and dropped when it breaks. Unfinished tasks always come from Redis. An entry lapses when its record would leave Redis (finish time plus
// retention), bounded by bytes, least recently used first.
import { LRUCache } from 'lru-cache';
import { TERMINAL_STATUSES, type TaskStatus } from '../../shared/task.js';
import type { AnyTaskRecord } from '../../shared/records.js';
import type { StoredView } from './stored-view.js';

interface Entry {
  owner: string;
  kind: AnyTaskRecord['kind'];
  status: TaskStatus;
  view: string;
}

type Kind = AnyTaskRecord['kind'];

export class FinishedViews {
  private readonly lru: LRUCache<string, Entry>;
  /** Kinds whose tasks can be deleted, while no deletion feed tells this process of deletions. */
  private readonly held = new Set<Kind>(['video']);

  constructor(
    maxBytes: number,
    private readonly retentionMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.lru = new LRUCache<string, Entry>({
      maxSize: maxBytes,
      // Two bytes per UTF-16 unit, plus the key and the entry's own overhead.
      sizeCalculation: (e, id) => 2 * (e.view.length + id.length + e.owner.length) + 64,
      ttlAutopurge: false,
      // An entry must lapse no later than its record: read the clock on every check.
      ttlResolution: 0,
      perf: { now: this.now },
    });
  }

  get size(): number {
    return this.lru.size;
  }

  /** Forgets every entry: what another API process, which never read these tasks, has. */
  clear(): void {
    this.lru.clear();
  }

  /** The stored view as Redis would answer it, or undefined when Redis must be asked. */
  get(id: string, owner: string, kind: Kind): StoredView | undefined {
    const e = this.lru.get(id);
    if (!e) return undefined;
    // The record exists but is not this caller's (or not this kind): Redis would say the same.
    if (e.owner !== owner || e.kind !== kind) return 'foreign';
    return { status: e.status, view: e.view };
  }

  /** Drops a deleted task's view. */
  forget(id: string): void {
    this.lru.delete(id);
  }

  /** The deletion feed is live: views of `kind` may be kept (a deletion will reach them). */
  allow(kind: Kind): void {
    this.held.delete(kind);
  }

  /** The deletion feed broke (messages may be lost): drop `kind`'s views and keep none until it is live again. */
  hold(kind: Kind): void {
    this.held.add(kind);
    for (const [id, e] of this.lru.entries()) if (e.kind === kind) this.lru.delete(id);
  }

  /** Keeps `stored` if it is a finished task's final view. */
  remember(id: string, stored: StoredView, owner: string, kind: Kind): void {
    if (typeof stored === 'string' || !TERMINAL_STATUSES.includes(stored.status)) return;
    if (this.held.has(kind)) return;
    const view = JSON.parse(stored.view) as {
      finished_at?: number | null;
      completed_at?: number | null;
      webhook?: { status?: string };
    };
    if (view.webhook?.status === 'pending') return;
    const finishedAt = view.finished_at ?? view.completed_at;
    if (typeof finishedAt !== 'number') return;
    // The record's expiry is set when its terminal transition is written, at or after finished_at.
    const ttl = finishedAt * 1000 + this.retentionMs - this.now();
    if (ttl <= 0) return;
    this.lru.set(id, { owner, kind, status: stored.status, view: stored.view }, { ttl });
  }
}
