// Unit tier: an in-memory stand-in for the Redis read model (src/tasks/store). It keeps the
// rules callers rely on (transitions only move forward, one reservation per task, the dispatch
// mark, the poll limiter) and records every write so tests can assert the sequence of states. It
// implements the store's interface, so the two cannot drift apart; its keys are the real store's
// names, with no Redis behind them. Integration tests use the real store on a real redis-server.
import type { FinishedViews } from '../../src/tasks/store/finished-views.js';
import { TaskKeys } from '../../src/tasks/store/keys.js';
import {
  dispatchChannel,
  indexMember,
  type Page,
  type ReadOutcome,
  type RedisClient,
  type StoredView,
  type TaskStore,
} from '../../src/tasks/store/task-store.js';
import { STATUS_RANK, TERMINAL_STATUSES } from '../../src/shared/task.js';
import type { ImageTaskRecord } from '../../src/shared/image-task.js';
import type { AnyTaskRecord } from '../../src/shared/records.js';
import { storedViews } from '../../src/shared/views.js';

const LIST_WINDOW_SECONDS = 3 * 86400;

export class MemoryStore extends TaskKeys implements TaskStore {
  readonly records = new Map<string, AnyTaskRecord>();
  /** Every accepted transition, in order: `${id} ${status}`. */
  readonly writes: string[] = [];
  readonly dispatched = new Map<string, string>();
  readonly unfinished = new Set<string>();
  private readonly limiter = new Map<string, number>();
  private readonly missing = new Set<string>();
  readonly fingerprints = new Map<string, string>();
  /** An API process's cache of finished views (src/tasks/poll.ts reads through it), when a test sets one. */
  finished?: FinishedViews;
  /** Calls of `read`: a poll answered from memory makes none. */
  reads = 0;
  /** Set to make every call fail as an unreachable Redis would. */
  down: Error | null = null;

  constructor() {
    super('');
  }

  /** Code that writes Redis beside the read model (webhook delivery) has no place in the unit tier. */
  get redis(): RedisClient {
    throw new Error('MemoryStore has no Redis: test this in the integration tier');
  }

  private check() {
    if (this.down) throw this.down;
  }

  /** The statuses one task went through, in order. */
  statuses(id: string): string[] {
    return this.writes.filter((w) => w.startsWith(`${id} `)).map((w) => w.slice(id.length + 1));
  }

  withExpiry<R extends AnyTaskRecord>(record: R): R {
    return record;
  }

  transition(record: AnyTaskRecord): Promise<boolean> {
    return this.write(record, false);
  }

  restore(record: AnyTaskRecord): Promise<boolean> {
    return this.write(record, true);
  }

  async requeue(id: string): Promise<boolean> {
    this.check();
    const prev = this.records.get(id);
    if (prev?.status !== 'running') return false;
    this.records.set(id, { ...structuredClone(prev), status: 'queued' });
    this.writes.push(`${id} queued`);
    return true;
  }

  private async write(record: AnyTaskRecord, strict: boolean): Promise<boolean> {
    this.check();
    if (this.tombstones.has(record.id)) return false;
    const prev = this.records.get(record.id);
    const terminal = TERMINAL_STATUSES.includes(record.status);
    // As the store's script: never backwards; a repeated unfinished state (progress) goes through
    // unless the write is strict (a record rebuilt from Temporal).
    const cur = prev ? STATUS_RANK[prev.status] : undefined;
    const rank = STATUS_RANK[record.status];
    if (cur !== undefined && (cur > rank || (cur === rank && (terminal || strict)))) return false;
    this.records.set(record.id, structuredClone(record));
    if (terminal) this.unfinished.delete(record.id);
    if (prev?.status !== record.status) this.writes.push(`${record.id} ${record.status}`);
    return true;
  }

  /** As the Redis store: the record of any kind (typed as an image task's, as TaskStore.get is). */
  async get(id: string) {
    this.check();
    const r = this.records.get(id);
    return r ? (structuredClone(r) as ImageTaskRecord) : null;
  }

  async reserve(id: string, max: number): Promise<boolean> {
    this.check();
    if (this.unfinished.size >= max) return false;
    this.unfinished.add(id);
    return true;
  }

  async release(id: string): Promise<void> {
    this.check();
    this.unfinished.delete(id);
  }

  async unfinishedIds(): Promise<{ id: string; since: number }[]> {
    return [...this.unfinished].map((id) => ({ id, since: 0 }));
  }

  async lease(): Promise<boolean> {
    return true;
  }

  async unfinishedCount(): Promise<number> {
    this.check();
    return this.unfinished.size;
  }

  /** As the store's read script: the limiter first, then each id's stored view for this owner and kind. */
  async read(...[ids, owner, kind, limiterKey, intervalMs]: Parameters<TaskStore['read']>): Promise<ReadOutcome> {
    this.reads++;
    this.check();
    if (limiterKey !== null && intervalMs > 0) {
      const now = Date.now();
      const until = this.limiter.get(limiterKey);
      if (until !== undefined && until > now) return { limited: true, retryAfterMs: until - now };
      this.limiter.set(limiterKey, now + intervalMs);
    }
    return {
      limited: false,
      views: ids.map((id): StoredView => {
        const r = this.records.get(id);
        if (!r) return 'absent';
        if (r.owner !== owner || r.kind !== kind) return 'foreign';
        return { status: r.status, view: storedViews(r).view };
      }),
    };
  }

  /** Newest first: the stored list items of the owner's image tasks, joined with commas. */
  async list(owner: string, _max: string, _min: string, limit: number): Promise<Buffer> {
    this.check();
    const items = [...this.records.values()]
      .filter((r) => r.owner === owner && r.kind === 'image')
      .sort((a, b) => b.created_at - a.created_at || b.id.localeCompare(a.id))
      .slice(0, limit)
      .map((r) => storedViews(r).item);
    return Buffer.from(items.join(','));
  }

  /** As the store's page script: the owner's tasks of `kind` in the list window, after the cursor. */
  async page(...[owner, kind, opts]: Parameters<TaskStore['page']>): Promise<Page> {
    this.check();
    const cursor = opts.after === undefined ? undefined : this.records.get(opts.after);
    if (opts.after !== undefined && (cursor?.owner !== owner || cursor.kind !== kind)) return 'unknown_cursor';
    // Index members compare as bytes, as Redis orders them: creation time, then id.
    const cmp = (a: AnyTaskRecord, b: AnyTaskRecord) => {
      const [x, y] = [indexMember(a.created_at, a.id), indexMember(b.created_at, b.id)];
      return (x < y ? -1 : x > y ? 1 : 0) * (opts.order === 'asc' ? 1 : -1);
    };
    const start = Math.floor(Date.now() / 1000) - LIST_WINDOW_SECONDS;
    const page = [...this.records.values()]
      .filter((r) => r.owner === owner && r.kind === kind && r.created_at >= start)
      .filter((r) => cursor === undefined || cmp(r, cursor) > 0)
      .sort(cmp)
      .slice(0, opts.limit + 1);
    const shown = page.slice(0, opts.limit);
    return {
      ids: shown.map((r) => r.id),
      items: shown.map((r) => storedViews(r).item),
      hasMore: page.length > shown.length,
    };
  }

  async markDispatched(id: string, attempt: number, channel = ''): Promise<void> {
    this.check();
    this.dispatched.set(id, channel ? `${attempt}:${channel}` : String(attempt));
  }
  async clearDispatched(id: string): Promise<void> {
    this.check();
    this.dispatched.delete(id);
  }
  async wasDispatched(id: string): Promise<boolean> {
    return (await this.dispatchedTo(id)) !== null;
  }
  async dispatchedTo(id: string): Promise<string | null> {
    this.check();
    return dispatchChannel(this.dispatched.get(id) ?? null);
  }

  async recentlyMissing(owner: string, ids: string[]): Promise<Set<string>> {
    this.check();
    return new Set(ids.filter((id) => this.missing.has(`${owner} ${id}`)));
  }

  async rememberMissing(owner: string, ids: string[]): Promise<void> {
    this.check();
    for (const id of ids) this.missing.add(`${owner} ${id}`);
  }

  async reserveOnce(id: string, max: number): Promise<'added' | 'held' | 'full'> {
    this.check();
    if (this.unfinished.has(id)) return 'held';
    if (this.unfinished.size >= max) return 'full';
    this.unfinished.add(id);
    return 'added';
  }

  async rememberFingerprint(id: string, fingerprint: string): Promise<void> {
    this.check();
    this.fingerprints.set(id, fingerprint);
  }

  async fingerprintOf(id: string) {
    this.check();
    const r = this.records.get(id);
    return {
      fingerprint: this.fingerprints.get(id) ?? null,
      owner: r?.owner ?? null,
      record: r ? structuredClone(r) : null,
      deleted: this.tombstones.has(id),
    };
  }

  /** Deleted tasks' ids and owners (the store's tombstones). */
  readonly tombstones = new Map<string, string>();

  async deleteTask(r: Pick<AnyTaskRecord, 'id' | 'owner' | 'kind'>) {
    this.check();
    const owner = this.tombstones.get(r.id);
    if (owner !== undefined) return owner === r.owner ? ('gone' as const) : ('absent' as const);
    const cur = this.records.get(r.id);
    if (!cur || cur.owner !== r.owner || cur.kind !== r.kind) return 'absent' as const;
    if (!TERMINAL_STATUSES.includes(cur.status)) return 'unfinished' as const;
    this.records.delete(r.id);
    this.tombstones.set(r.id, r.owner);
    return 'deleted' as const;
  }

  async deletedAmong(ids: string[]) {
    this.check();
    return new Set(ids.filter((id) => this.tombstones.has(id)));
  }
}
