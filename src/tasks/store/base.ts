// What the single-node and the Cluster store do alike. A task's own fields live in one hash, so
// reading or marking them is one command in either mode; the read script serves any keys that share
// a slot; a keyed submit's reservation is one script on the gauge key that holds the id. The
// subclasses say where that gauge key is and how the operations that span keys reach Redis.
import type { ChainableCommander } from 'ioredis';
import { STATUS_RANK, TERMINAL_STATUSES } from '../../shared/task.js';
import type { ImageTaskRecord } from '../../shared/image-task.js';
import type { AnyTaskRecord } from '../../shared/records.js';
import { storedViews } from '../../shared/views.js';
import type { FinishedViews } from './finished-views.js';
import { TaskKeys } from './keys.js';
import { firstExpiry, type ListFrame } from './list-items.js';
import { ListPages } from './list-pages.js';
import { LIST_UNCHANGED, listPage, RESERVATION, readOutcome } from './replies.js';
import { DELETE_TASK, READ, REMEMBER_FINGERPRINT, RESERVE_ONCE, UNLIST } from './scripts.js';
import { defineScripts } from '../../infra/redis.js';
import { dispatchChannel, indexMember, type Page, type ReadOutcome, type RedisClient } from './task-store.js';

export interface TaskStoreOptions {
  /** Put before every key, so deployments can share a Redis (REDIS_PREFIX). */
  prefix: string;
  /** How long a record stays after its last write. */
  retentionSeconds: number;
  /** API processes: finished tasks' views kept in memory. */
  finished?: FinishedViews;
}

type Kind = AnyTaskRecord['kind'];

const LIST_WINDOW_SECONDS = 3 * 86400;
/** An unfinished-task reservation older than this is dropped: no task runs that long. */
export const STALE_RESERVATION_SECONDS = 86400;
/**
 * How long an id unknown to Redis and Temporal stays known-missing. Ids are random and a client
 * learns one only from a submit response, sent after the workflow exists and its record is written,
 * so a miss does not turn into a task later; the TTL only bounds memory.
 */
export const MISSING_TTL_MS = 10 * 60_000;

type ScriptName =
  | 'kilnRead'
  | 'kilnReserveOnce'
  | 'kilnRememberFingerprint'
  | 'kilnTransition'
  | 'kilnReserve'
  | 'kilnList'
  | 'kilnPage'
  | 'kilnRecord'
  | 'kilnOwnerStep'
  | 'kilnListItems'
  | 'kilnReserveShard'
  | 'kilnPageItems';
/** The scripts as ioredis adds them to a client and its pipelines; a `…Buffer` one replies bytes. */
type Scripts = Record<ScriptName | `${ScriptName}Buffer`, (...args: (string | number)[]) => Promise<unknown>>;
export const scriptsOf = (client: RedisClient | ChainableCommander) => client as unknown as Scripts;

export const nowSeconds = () => Math.floor(Date.now() / 1000);

export type WriteMode = 'forward' | 'strict' | 'requeue';

/** TRANSITION's and RECORD's strict flag for each mode. */
export const WRITE_FLAG: Record<WriteMode, string> = { forward: '0', strict: '1', requeue: '2' };

export abstract class RedisTaskStore extends TaskKeys {
  readonly redis: RedisClient;
  readonly finished?: FinishedViews;
  protected readonly retentionSeconds: number;
  private readonly listPages = new ListPages();

  /** `scripts`: the commands this mode runs besides READ, by name, with their key counts. */
  constructor(redis: RedisClient, opts: TaskStoreOptions, scripts: Record<string, [number, string]>) {
    super(opts.prefix);
    this.redis = redis;
    this.retentionSeconds = opts.retentionSeconds;
    this.finished = opts.finished;
    defineScripts(redis, {
      kilnRead: { lua: READ },
      kilnReserveOnce: { numberOfKeys: 1, lua: RESERVE_ONCE },
      kilnRememberFingerprint: { numberOfKeys: 1, lua: REMEMBER_FINGERPRINT },
      ...Object.fromEntries(
        Object.entries(scripts).map(([name, [numberOfKeys, lua]]) => [name, { numberOfKeys, lua }]),
      ),
    });
  }

  protected get scripts(): Scripts {
    return scriptsOf(this.redis);
  }

  /**
   * What a transition writes: `args`, those of RECORD and the first ones of TRANSITION; `member`
   * and `trimBound`, its owner index member and the bound below which members leave the list window
   * (trimmed with their items as the index is written).
   */
  /**
   * A finished video says when Kiln stops serving it (OpenAI's expires_at): the retention after its
   * end, from the record alone, so every path (the workflow's write, the Temporal fallback's
   * answer) shows the same value. Other records as they are.
   */
  withExpiry<R extends AnyTaskRecord>(r: R): R {
    if (r.kind !== 'video' || r.expires_at != null || r.completed_at == null) return r;
    return { ...r, expires_at: r.completed_at + this.retentionSeconds };
  }

  protected transitionArgs(written: AnyTaskRecord) {
    const terminal = TERMINAL_STATUSES.includes(written.status) ? '1' : '0';
    const record = this.withExpiry(written);
    const { view, item } = storedViews(record);
    return {
      args: [
        JSON.stringify(record),
        record.status,
        STATUS_RANK[record.status],
        this.retentionSeconds,
        terminal,
        view,
        item,
        record.owner,
        record.kind,
        this.waitChannel,
        record.id,
      ],
      member: indexMember(record.created_at, record.id),
      trimBound: `(${indexMember(nowSeconds() - LIST_WINDOW_SECONDS, '')}`,
    };
  }

  /**
   * A transition, by TRANSITION's strict flag: `forward` over a lower rank or the same unfinished
   * state, `strict` over no record or a lower rank only, `requeue` also from running back to queued.
   */
  protected abstract write(record: AnyTaskRecord, mode: WriteMode): Promise<boolean>;

  transition(record: AnyTaskRecord): Promise<boolean> {
    return this.write(record, 'forward');
  }

  restore(record: AnyTaskRecord): Promise<boolean> {
    return this.write(record, 'strict');
  }

  async requeue(id: string): Promise<boolean> {
    const stored = await this.get(id);
    if (stored?.status !== 'running') return false;
    return this.write({ ...stored, status: 'queued' }, 'requeue');
  }

  /** The gauge key that holds (or would hold) `id`'s reservation. */
  protected abstract gaugeKey(id: string): string;
  /** RESERVE_ONCE's full flag: '' lets the script count the gauge, which it can only on one node. */
  protected abstract fullFlag(stale: number, max: number): Promise<'' | '0' | '1'>;
  /** LIST or LIST_ITEMS, with the arguments both take: owner index and items, max, min, limit. */
  protected abstract runList(args: (string | number)[]): Promise<unknown>;
  /** PAGE or PAGE_ITEMS, with the arguments both take: owner index and items, window start, limit, cursor, order. */
  protected abstract runPage(args: (string | number)[], owner: string, kind: Kind): Promise<Page>;

  async get(id: string): Promise<ImageTaskRecord | null> {
    const j = await this.redis.hget(this.taskKey(id), 'j');
    return j ? (JSON.parse(j) as ImageTaskRecord) : null;
  }

  async release(id: string): Promise<void> {
    await this.redis.zrem(this.gaugeKey(id), id);
  }

  async read(
    ids: string[],
    owner: string,
    kind: Kind,
    limiterKey: string | null,
    intervalMs: number,
  ): Promise<ReadOutcome> {
    const interval = limiterKey !== null && intervalMs > 0 ? intervalMs : 0;
    const keys = ids.map((id) => this.taskKey(id));
    if (interval > 0) keys.push(this.limiterKey(limiterKey!));
    return this.readKeys(ids, keys, owner, kind, interval);
  }

  /** `keys`: the task keys, then the limiter key when `interval` > 0. One script run reads them all. */
  protected async readKeys(
    ids: string[],
    keys: string[],
    owner: string,
    kind: Kind,
    interval: number,
  ): Promise<ReadOutcome> {
    const reply = await this.scripts.kilnRead(keys.length, ...keys, owner, kind, interval);
    return readOutcome(reply as unknown[], ids.length, owner, kind);
  }

  /**
   * A page of the owner's image tasks. A first page (no cursor: what a refreshing client asks for
   * again and again) is kept by this process, and LIST answers LIST_UNCHANGED instead of the page
   * while the owner's list version is the kept one (list-pages.ts).
   */
  async list(owner: string, max: string, min: string, limit: number, frame?: ListFrame): Promise<Buffer> {
    const items = this.ownerItemsKey(owner);
    const key = max === '+' ? `${owner}\n${min}\n${limit}` : null;
    const kept = key === null ? undefined : this.listPages.get(key, frame);
    const reply = await this.runList([this.ownerKey(owner), items, max, min, limit, kept?.version ?? '']);
    if (reply === LIST_UNCHANGED && kept) return kept.page;
    const entries = reply as (number | Buffer | null)[];
    const version = entries.pop() as Buffer | null;
    // Kept: a first page of entries with a version. Not an older release's pairs, nor items with
    // no version yet (an older release wrote them, and its writes do not bump it).
    const keep = key !== null && version !== null && typeof entries[0] !== 'number';
    const until = keep ? firstExpiry(entries as Buffer[]) : 0;
    const page = listPage(entries as (number | Buffer)[], frame);
    if (keep) this.listPages.set(key, frame, version.toString(), page, until);
    return page;
  }

  async page(owner: string, kind: Kind, opts: { limit: number; after?: string; order: 'asc' | 'desc' }): Promise<Page> {
    const start = `[${indexMember(nowSeconds() - LIST_WINDOW_SECONDS, '')}`;
    const keys = [this.ownerKey(owner, kind), this.ownerItemsKey(owner, kind)];
    return this.runPage([...keys, start, opts.limit, opts.after ?? '', opts.order], owner, kind);
  }

  async lease(name: string, ttlMs: number): Promise<boolean> {
    return (await this.redis.set(`${this.prefix}lease:{${name}}`, String(process.pid), 'PX', ttlMs, 'NX')) === 'OK';
  }

  /** One gauge key's reservations in the window, oldest first. */
  protected async gaugePage(
    key: string,
    before: number,
    after: number | null,
    limit: number,
  ): Promise<{ id: string; since: number }[]> {
    const flat = await this.redis.zrangebyscore(
      key,
      after === null ? '-inf' : after,
      before,
      'WITHSCORES',
      'LIMIT',
      0,
      limit,
    );
    const out: { id: string; since: number }[] = [];
    for (let i = 0; i < flat.length; i += 2) out.push({ id: flat[i]!, since: Number(flat[i + 1]) });
    return out;
  }

  async markDispatched(id: string, attempt: number, channel = ''): Promise<void> {
    await this.redis.hset(this.taskKey(id), 'd', channel ? `${attempt}:${channel}` : attempt);
  }

  async clearDispatched(id: string): Promise<void> {
    await this.redis.hdel(this.taskKey(id), 'd');
  }

  async wasDispatched(id: string): Promise<boolean> {
    return (await this.dispatchedTo(id)) !== null;
  }

  async dispatchedTo(id: string): Promise<string | null> {
    return dispatchChannel(await this.redis.hget(this.taskKey(id), 'd'));
  }

  async reserveOnce(id: string, max: number): Promise<'added' | 'held' | 'full'> {
    const now = nowSeconds();
    const stale = now - STALE_RESERVATION_SECONDS;
    const full = await this.fullFlag(stale, max);
    const r = await this.scripts.kilnReserveOnce(this.gaugeKey(id), id, now, stale, max, full);
    return r === RESERVATION.added ? 'added' : r === RESERVATION.held ? 'held' : 'full';
  }

  async rememberFingerprint(id: string, fingerprint: string): Promise<void> {
    await this.scripts.kilnRememberFingerprint(this.taskKey(id), fingerprint, this.retentionSeconds);
  }

  async fingerprintOf(
    id: string,
  ): Promise<{ fingerprint: string | null; owner: string | null; record: AnyTaskRecord | null; deleted: boolean }> {
    const [f, o, j, x] = await this.redis.hmget(this.taskKey(id), 'f', 'o', 'j', 'x');
    return { fingerprint: f, owner: o, record: j ? (JSON.parse(j) as AnyTaskRecord) : null, deleted: x !== null };
  }

  /** Whether one script may touch the task hash and the owner's keys together (single node). */
  protected abstract readonly crossSlot: boolean;

  async deleteTask(
    r: Pick<AnyTaskRecord, 'id' | 'owner' | 'kind' | 'created_at'>,
  ): Promise<'deleted' | 'gone' | 'absent' | 'unfinished'> {
    const owned = [this.ownerKey(r.owner, r.kind), this.ownerItemsKey(r.owner, r.kind)];
    const keys = this.crossSlot ? [this.taskKey(r.id), ...owned] : [this.taskKey(r.id)];
    const args = [r.owner, r.kind, this.retentionSeconds, indexMember(r.created_at, r.id), r.id, this.deletionChannel];
    const [code, member] = (await this.redis.eval(DELETE_TASK, keys.length, ...keys, ...args)) as [number, string];
    // A cluster unlists after the tombstone: any write after it leaves the owner's keys alone
    // (cluster.ts), so nothing lists the task again, and a repeated delete finishes a stopped one.
    if (!this.crossSlot && member) await this.redis.eval(UNLIST, 2, ...owned, member, r.id);
    this.finished?.forget(r.id);
    const names = ['absent', 'deleted', 'gone', 'unfinished'] as const;
    return names[code] ?? 'absent';
  }
}
