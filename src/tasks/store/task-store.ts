// The Redis read model: task records, the owner index, the unfinished-task gauge and poll limiters.
// Reads on the poll path are a single round trip (one pipeline or one script) on a single Redis, and
// one round trip per node on a Redis Cluster.
//
// Single node: the scripts below may touch several keys (a task, its owner's index, the gauge).
// Redis Cluster (an ioredis `Cluster`): every script, transaction and pipeline stays within one slot
// or one node. A transition is split into idempotent steps that converge (the record on
// `task:{id}`, then the owner index and list item on `owner:{owner}:…`, then the gauge shard), and
// a caller that sees an error runs the whole transition again; the gauge is sharded so no single
// key is hot. In both modes a list reads list items kept in the owner's slot rather than the task
// keys: one HMGET for a page.
import { Cluster, Redis } from 'ioredis';
import { ENTRY_HEAD, entryLive, joinItems, liveItems } from './list-items.js';
import { STATUS_RANK, TERMINAL_STATUSES, type TaskStatus } from '../../shared/task.js';
import type { ImageTaskRecord } from '../../shared/image-task.js';
import type { AnyTaskRecord } from '../../shared/records.js';
import { listItem, storedViews } from '../../shared/views.js';
import { keySlot } from './slots.js';
import type { FinishedViews } from '../finished-views.js';
import { perNode, replicated } from './cluster-ops.js';
import {
  TRANSITION,
  READ,
  RESERVE,
  LIST,
  RECORD,
  OWNER_STEP,
  LIST_ITEMS,
  RESERVE_SHARD,
  PAGE,
  PAGE_ITEMS,
} from './scripts.js';

/** The read model's connection: one Redis, or a Redis Cluster (REDIS_CLUSTER_NODES). */
export type RedisClient = Redis | Cluster;

const LIST_WINDOW_SECONDS = 3 * 86400;
/**
 * How long an id unknown to Redis and Temporal stays known-missing. Ids are random and a client
 * learns one only from a submit response, sent after the workflow exists and its record is written,
 * so a miss does not turn into a task later; the TTL only bounds memory.
 */
const MISSING_TTL_MS = 10 * 60_000;
/** An unfinished-task reservation older than this is dropped: no task runs that long. */
const STALE_RESERVATION_SECONDS = 86400;
/** Cluster mode: the unfinished gauge is this many sorted sets, each in its own slot; a task's shard follows its id. */
export const UNFINISHED_SHARDS = 16;

/** A record's public view as stored (JSON text), or why there is none. */
export type StoredView = { status: TaskStatus; view: string } | 'foreign' | 'absent';
export type ReadOutcome = { limited: true; retryAfterMs: number } | { limited: false; views: StoredView[] };

/** A cursor page of an owner index: the stored items (JSON text) with their ids, or an unknown cursor. */
export type Page = { ids: string[]; items: string[]; hasMore: boolean } | 'unknown_cursor';

export function indexMember(createdAt: number, id: string): string {
  return `${String(createdAt).padStart(10, '0')}:${id}`;
}

export class TaskStore {
  /** Set when the connection is a Redis Cluster: the multi-slot scripts are not used then. */
  private readonly cluster: Cluster | null;

  constructor(
    readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly retentionSeconds: number,
    /** API processes: finished tasks' views kept in memory (src/tasks/poll.ts reads through it). */
    readonly finished?: FinishedViews,
  ) {
    this.cluster = redis instanceof Cluster ? redis : null;
    redis.defineCommand('kilnRead', { lua: READ });
    if (this.cluster) {
      redis.defineCommand('kilnRecord', { numberOfKeys: 1, lua: RECORD });
      redis.defineCommand('kilnOwnerStep', { numberOfKeys: 2, lua: OWNER_STEP });
      redis.defineCommand('kilnListItems', { numberOfKeys: 2, lua: LIST_ITEMS });
      redis.defineCommand('kilnReserveShard', { numberOfKeys: 1, lua: RESERVE_SHARD });
      redis.defineCommand('kilnPageItems', { numberOfKeys: 2, lua: PAGE_ITEMS });
    } else {
      redis.defineCommand('kilnTransition', { numberOfKeys: 4, lua: TRANSITION });
      redis.defineCommand('kilnReserve', { numberOfKeys: 1, lua: RESERVE });
      redis.defineCommand('kilnList', { numberOfKeys: 2, lua: LIST });
      redis.defineCommand('kilnPage', { numberOfKeys: 2, lua: PAGE });
    }
  }

  private get scripts(): Scripts {
    return this.redis as unknown as Scripts;
  }

  // Hash tags keep a task's keys (record, poll limiter, missing mark) in one slot.
  taskKey(id: string) {
    return `${this.prefix}task:{${id}}`;
  }
  // Each kind has its own owner index, so image lists never show video tasks.
  ownerKey(owner: string, kind: AnyTaskRecord['kind'] = 'image') {
    return `${this.prefix}owner:{${owner}}:${kind === 'image' ? 'tasks' : 'videos'}`;
  }
  /** The list items of an owner index, in the owner's slot (store-scripts.ts, OWNER_ITEMS). */
  ownerItemsKey(owner: string, kind: AnyTaskRecord['kind'] = 'image') {
    return `${this.ownerKey(owner, kind)}:items`;
  }
  /** Pub/sub channel of status changes, "<id> <status>" (src/tasks/waits.ts listens). */
  get waitChannel() {
    return `${this.prefix}status`;
  }
  private get unfinishedKey() {
    return `${this.prefix}unfinished`;
  }
  /** Cluster mode: the gauge shard a task's reservation lives in. */
  private unfinishedShard(id: string) {
    return this.unfinishedShardKey(keySlot(id) % UNFINISHED_SHARDS);
  }
  private unfinishedShardKey(n: number) {
    return `${this.prefix}unfinished:{u${n}}`;
  }
  private get unfinishedShards() {
    return Array.from({ length: UNFINISHED_SHARDS }, (_, n) => this.unfinishedShardKey(n));
  }

  /**
   * Writes a transition if it moves the task forward, with the owner index entry and list item.
   * True when this write moved the record. Cluster mode: the owner index, list item and gauge are
   * written after the record, from the record as stored; if one of them fails this throws, and
   * running the transition again completes them.
   */
  async transition(record: AnyTaskRecord): Promise<boolean> {
    const now = Math.floor(Date.now() / 1000);
    const terminal = TERMINAL_STATUSES.includes(record.status);
    const { view, item } = storedViews(record);
    const member = indexMember(record.created_at, record.id);
    const trimBound = `(${indexMember(now - LIST_WINDOW_SECONDS, '')}`;
    if (!this.cluster) {
      const r = await this.scripts.kilnTransition(
        this.taskKey(record.id),
        this.ownerKey(record.owner, record.kind),
        this.unfinishedKey,
        this.ownerItemsKey(record.owner, record.kind),
        JSON.stringify(record),
        record.status,
        STATUS_RANK[record.status],
        this.retentionSeconds,
        member,
        trimBound,
        record.id,
        terminal ? '1' : '0',
        view,
        item,
        record.owner,
        record.kind,
        this.waitChannel,
      );
      return r === 1;
    }
    const taskKey = this.taskKey(record.id);
    const [applied, status, storedItem, expiresAtMs] = (await replicated(this.cluster!, taskKey, (p) =>
      (p as unknown as Scripts).kilnRecord(
        taskKey,
        JSON.stringify(record),
        record.status,
        STATUS_RANK[record.status],
        this.retentionSeconds,
        terminal ? '1' : '0',
        view,
        item,
        record.owner,
        record.kind,
        this.waitChannel,
        record.id,
      ),
    )) as [number, TaskStatus, string, number];
    const ownerKey = this.ownerKey(record.owner, record.kind);
    const shard = this.unfinishedShard(record.id);
    await Promise.all([
      replicated(this.cluster!, ownerKey, (p) =>
        (p as unknown as Scripts).kilnOwnerStep(
          ownerKey,
          this.ownerItemsKey(record.owner, record.kind),
          member,
          trimBound,
          this.retentionSeconds,
          record.id,
          STATUS_RANK[status],
          String(expiresAtMs).padStart(13, '0'),
          storedItem,
        ),
      ),
      TERMINAL_STATUSES.includes(status) ? replicated(this.cluster!, shard, (p) => p.zrem(shard, record.id)) : null,
    ]);
    return applied === 1;
  }

  async get(id: string): Promise<ImageTaskRecord | null> {
    const j = await this.redis.hget(this.taskKey(id), 'j');
    return j ? (JSON.parse(j) as ImageTaskRecord) : null;
  }

  /**
   * Claims a place among unfinished tasks; false when the queue is full. Cluster mode: the shards
   * are counted (one round trip per node), then the task's shard takes the reservation; submits
   * racing past the count can overshoot `max` by at most their number.
   */
  async reserve(id: string, max: number): Promise<boolean> {
    const now = Math.floor(Date.now() / 1000);
    const stale = now - STALE_RESERVATION_SECONDS;
    if (!this.cluster) {
      const r = await this.scripts.kilnReserve(this.unfinishedKey, id, now, stale, max);
      return r === 1;
    }
    if ((await this.countUnfinished(stale)) >= max) return false;
    await this.scripts.kilnReserveShard(this.unfinishedShard(id), id, now, stale);
    return true;
  }

  async release(id: string): Promise<void> {
    await this.redis.zrem(this.cluster ? this.unfinishedShard(id) : this.unfinishedKey, id);
  }

  async unfinishedCount(): Promise<number> {
    if (!this.cluster) return this.redis.zcard(this.unfinishedKey);
    return this.countUnfinished(Math.floor(Date.now() / 1000) - STALE_RESERVATION_SECONDS);
  }

  /** Cluster mode: live reservations over all shards. */
  private async countUnfinished(stale: number): Promise<number> {
    const res = await perNode(this.cluster!, this.unfinishedShards, (p, key) => p.zcount(key, `(${stale}`, '+inf'));
    let n = 0;
    for (const [err, v] of res) {
      if (err) throw err;
      n += Number(v);
    }
    return n;
  }

  /**
   * Public views of `ids` for `owner`, behind a poll limiter: one script on one Redis; on a
   * cluster one pipeline per node (a read script per id, the limiter on its own slot's node), all
   * nodes at once. The limiter lets one request per `intervalMs` through for `limiterKey`; 0
   * disables it. Cluster mode: ids on a node that does not answer come back absent.
   */
  async read(
    ids: string[],
    owner: string,
    kind: AnyTaskRecord['kind'],
    limiterKey: string | null,
    intervalMs: number,
  ): Promise<ReadOutcome> {
    const limited = limiterKey !== null && intervalMs > 0;
    const keys = ids.map((id) => this.taskKey(id));
    if (limited) keys.push(`${this.prefix}rl:${limiterKey}`);
    if (this.cluster && (keys.length > 2 || (keys.length === 2 && keySlot(keys[0]) !== keySlot(keys[1])))) {
      return this.readAcrossSlots(ids, keys, owner, kind, limited ? intervalMs : 0);
    }
    const reply = (await this.scripts.kilnRead(keys.length, ...keys, owner, kind, limited ? intervalMs : 0)) as (
      string | number | null
    )[];
    if (reply[0] !== 0) return { limited: true, retryAfterMs: Number(reply[0]) };
    const views: StoredView[] = new Array(ids.length);
    for (let i = 0; i < ids.length; i++) views[i] = storedView(reply[1 + 2 * i], reply[2 + 2 * i], owner, kind);
    return { limited: false, views };
  }

  /** Cluster mode: `keys` are the task keys, then the limiter key when `intervalMs` > 0. */
  private async readAcrossSlots(
    ids: string[],
    keys: string[],
    owner: string,
    kind: AnyTaskRecord['kind'],
    intervalMs: number,
  ): Promise<ReadOutcome> {
    const res = await perNode(
      this.cluster!,
      keys,
      (p, key, i) => (p as unknown as Scripts).kilnRead(1, key, owner, kind, i < ids.length ? 0 : intervalMs),
      true,
    );
    if (intervalMs > 0) {
      const [err, reply] = res[ids.length];
      // A limiter whose node does not answer lets the read through, as with Redis down.
      if (!err && (reply as number[])[0] !== 0) return { limited: true, retryAfterMs: Number((reply as number[])[0]) };
    }
    const views: StoredView[] = new Array(ids.length);
    for (let i = 0; i < ids.length; i++) {
      const [err, reply] = res[i];
      views[i] = err ? 'absent' : storedView((reply as unknown[])[1], (reply as unknown[])[2], owner, kind);
    }
    return { limited: false, views };
  }

  /**
   * Newest first, between two lex bounds of the owner index: the stored list items, joined with
   * commas, as UTF-8 bytes. Bytes, never strings: a page's text would live on V8's heap, and its
   * collections cost the API more than the rest of the page (BENCHMARKS.md).
   */
  async list(owner: string, max: string, min: string, limit: number): Promise<Buffer> {
    if (this.cluster) {
      const entries = (await this.scripts.kilnListItemsBuffer(
        this.ownerKey(owner),
        this.ownerItemsKey(owner),
        max,
        min,
        limit,
      )) as Buffer[];
      return joinItems(liveItems(entries));
    }
    const reply = (await this.scripts.kilnListBuffer(
      this.ownerKey(owner),
      this.ownerItemsKey(owner),
      max,
      min,
      limit,
      `${this.prefix}task:`,
    )) as (number | Buffer)[];
    if (typeof reply[0] !== 'number') return joinItems(liveItems(reply as Buffer[]));
    // Pairs: a record written by a previous release is on the page.
    const items: Buffer[] = [];
    for (let i = 0; i < reply.length; i += 2) {
      const text = reply[i + 1] as Buffer;
      if (reply[i] === 1) {
        if (entryLive(text, Date.now())) items.push(text.subarray(ENTRY_HEAD));
      } else if (reply[i] === 2) items.push(text);
      else items.push(Buffer.from(JSON.stringify(listItem(JSON.parse(text.toString()) as ImageTaskRecord))));
    }
    return joinItems(items);
  }

  /**
   * A page of an owner index after the cursor id (exclusive), newest first unless `order` is asc,
   * within the list window: the stored items (the public views, for videos). One round trip.
   */
  async page(
    owner: string,
    kind: AnyTaskRecord['kind'],
    opts: { limit: number; after?: string; order: 'asc' | 'desc' },
  ): Promise<Page> {
    const min = `[${indexMember(Math.floor(Date.now() / 1000) - LIST_WINDOW_SECONDS, '')}`;
    const after = opts.after ?? '';
    const reply = (
      this.cluster
        ? await this.scripts.kilnPageItems(
            this.ownerKey(owner, kind),
            this.ownerItemsKey(owner, kind),
            min,
            opts.limit,
            after,
            opts.order,
          )
        : await this.scripts.kilnPage(
            this.ownerKey(owner, kind),
            this.ownerItemsKey(owner, kind),
            min,
            opts.limit,
            `${this.prefix}task:`,
            after,
            opts.order,
            owner,
            kind,
          )
    ) as (number | string)[];
    if (reply[0] === -1) return 'unknown_cursor';
    const now = Date.now();
    const ids: string[] = [];
    const items: string[] = [];
    const step = this.cluster ? 2 : 3;
    for (let i = 2; i < reply.length; i += step) {
      const payload = reply[i + step - 1] as string;
      // Single node, codes 2 and 3: a record written by a previous release, its stored view or the record.
      const code = this.cluster ? 1 : reply[i + 1];
      if (code === 1 && !entryLive(payload, now)) continue;
      ids.push(reply[i] as string);
      items.push(
        code === 1
          ? payload.slice(ENTRY_HEAD)
          : code === 2
            ? payload
            : storedViews(JSON.parse(payload) as AnyTaskRecord).item,
      );
    }
    return { ids, items, hasMore: reply[1] === 1 };
  }

  /** Marks that an upstream request for this task was (about to be) sent. */
  async markDispatched(id: string, attempt: number): Promise<void> {
    await this.redis.hset(this.taskKey(id), 'd', attempt);
  }

  async clearDispatched(id: string): Promise<void> {
    await this.redis.hdel(this.taskKey(id), 'd');
  }

  async wasDispatched(id: string): Promise<boolean> {
    return (await this.redis.hexists(this.taskKey(id), 'd')) === 1;
  }

  private missKey(owner: string, id: string) {
    return `${this.prefix}miss:{${id}}:${owner}`;
  }

  /** Ids that neither Redis nor Temporal knew for this owner within MISSING_TTL_MS. */
  async recentlyMissing(owner: string, ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const keys = ids.map((id) => this.missKey(owner, id));
    if (!this.cluster) {
      const hits = await this.redis.mget(keys);
      return new Set(ids.filter((_, i) => hits[i] !== null));
    }
    const res = await perNode(this.cluster!, keys, (p, key) => p.get(key), true);
    return new Set(ids.filter((_, i) => !res[i][0] && res[i][1] !== null));
  }

  async rememberMissing(owner: string, ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    const keys = ids.map((id) => this.missKey(owner, id));
    if (this.cluster) {
      await perNode(this.cluster!, keys, (p, key) => p.set(key, '1', 'PX', MISSING_TTL_MS));
      return;
    }
    const p = this.redis.pipeline();
    for (const key of keys) p.set(key, '1', 'PX', MISSING_TTL_MS);
    await p.exec();
  }

  // Idempotent submits (Idempotency-Key): the task id is derived from the owner and the key. These
  // help the Temporal workflow id (the arbiter) answer; they never decide alone.

  /**
   * Claims a place among unfinished tasks for a keyed submit: 'added' (this call holds it),
   * 'held' (the id holds one already: a concurrent or earlier submit of the same key; it is
   * neither counted twice nor refused) or 'full'.
   */
  async reserveOnce(id: string, max: number): Promise<'added' | 'held' | 'full'> {
    const now = Math.floor(Date.now() / 1000);
    const stale = now - STALE_RESERVATION_SECONDS;
    // KEYS: gauge (cluster: the id's shard). ARGV: id, now, stale bound, max, cluster: 1 when full.
    const script = `redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 2 end
if ARGV[5] == '1' or (ARGV[5] == '' and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4])) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1`;
    const full = this.cluster ? ((await this.countUnfinished(stale)) >= max ? '1' : '0') : '';
    const key = this.cluster ? this.unfinishedShard(id) : this.unfinishedKey;
    const r = await this.redis.eval(script, 1, key, id, now, stale, max, full);
    return r === 1 ? 'added' : r === 2 ? 'held' : 'full';
  }

  /**
   * Stores a keyed submit's request fingerprint next to its record (field `f` of the task hash), so
   * it lives as long as the record; a hash without a TTL yet (no record written) gets the retention.
   */
  async rememberFingerprint(id: string, fingerprint: string): Promise<void> {
    await this.redis.eval(
      `redis.call('HSET', KEYS[1], 'f', ARGV[1])
if redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
return 1`,
      1,
      this.taskKey(id),
      fingerprint,
      this.retentionSeconds,
    );
  }

  /** A keyed submit's fingerprint, owner and record, each null when absent. */
  async fingerprintOf(
    id: string,
  ): Promise<{ fingerprint: string | null; owner: string | null; record: AnyTaskRecord | null }> {
    const [f, o, j] = await this.redis.hmget(this.taskKey(id), 'f', 'o', 'j');
    return { fingerprint: f, owner: o, record: j ? (JSON.parse(j) as AnyTaskRecord) : null };
  }
}

/** One id's part of a READ reply: status and view, 1 (another owner's or kind), 3 and the record, or 0. */
function storedView(code: unknown, payload: unknown, owner: string, kind: AnyTaskRecord['kind']): StoredView {
  if (typeof code === 'string') return { status: code as TaskStatus, view: payload as string };
  if (code === 3) return legacyView(payload as string, owner, kind);
  return code === 1 ? 'foreign' : 'absent';
}

/** A record stored before views were: its view is made here, once per read, until it is rewritten or expires. */
function legacyView(json: string, owner: string, kind: AnyTaskRecord['kind']): StoredView {
  const record = JSON.parse(json) as AnyTaskRecord;
  if (record.owner !== owner || (record.kind ?? 'image') !== kind) return 'foreign';
  return { status: record.status, view: storedViews(record).view };
}

interface Scripts {
  kilnTransition(...args: (string | number)[]): Promise<number>;
  kilnReserve(...args: (string | number)[]): Promise<number>;
  kilnList(...args: (string | number)[]): Promise<unknown>;
  kilnListBuffer(...args: (string | number)[]): Promise<unknown>;
  kilnRead(...args: (string | number)[]): Promise<unknown>;
  kilnRecord(...args: (string | number)[]): Promise<unknown>;
  kilnOwnerStep(...args: (string | number)[]): Promise<number>;
  kilnListItemsBuffer(...args: (string | number)[]): Promise<unknown>;
  kilnReserveShard(...args: (string | number)[]): Promise<number>;
  kilnPage(...args: (string | number)[]): Promise<unknown>;
  kilnPageItems(...args: (string | number)[]): Promise<unknown>;
}
