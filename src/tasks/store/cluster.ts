// The read model on a Redis Cluster (an ioredis `Cluster`). Every script, transaction and pipeline
// stays within one slot or one node. A transition is split into idempotent steps that converge (the
// record on `task:{id}`, then the owner index and list item on `owner:{owner}:…`, then the gauge
// shard), and a caller that sees an error runs the whole transition again. The gauge is sharded so
// no single key is hot. Reads of many keys go as one pipeline per node, all nodes at once.
import type { Cluster } from 'ioredis';
import { STATUS_RANK, TERMINAL_STATUSES, type TaskStatus } from '../../shared/task.js';
import type { AnyTaskRecord } from '../../shared/records.js';
import {
  MISSING_TTL_MS,
  nowSeconds,
  RedisTaskStore,
  scriptsOf,
  STALE_RESERVATION_SECONDS,
  type TaskStoreOptions,
  WRITE_FLAG,
  type WriteMode,
} from './base.js';
import { perNode, replicated } from './cluster-ops.js';
import { pageOf, READ_REPLY, storedView, TRANSITION_REPLY } from './replies.js';
import { LIST_ITEMS, PAGE_ITEMS } from './list-scripts.js';
import { OWNER_STEP, RECORD, RESERVE_SHARD, UNLIST } from './scripts.js';
import { keySlot } from './cluster-slots.js';
import type { Page, ReadOutcome, TaskStore } from './task-store.js';

/** The unfinished gauge is this many sorted sets, each in its own slot; a task's shard follows its id. */
export const UNFINISHED_SHARDS = 16;

/** Kinds whose finished tasks a client can delete (DELETE /v1/videos/{id}: src/tasks/delete.ts). */
const DELETABLE: readonly AnyTaskRecord['kind'][] = ['video'];

export class ClusterTaskStore extends RedisTaskStore implements TaskStore {
  constructor(
    private readonly cluster: Cluster,
    opts: TaskStoreOptions,
  ) {
    super(cluster, opts, {
      kilnRecord: [1, RECORD],
      kilnOwnerStep: [2, OWNER_STEP],
      kilnListItems: [2, LIST_ITEMS],
      kilnReserveShard: [1, RESERVE_SHARD],
      kilnPageItems: [2, PAGE_ITEMS],
    });
  }

  protected readonly crossSlot = false;

  private shardKey(n: number) {
    return `${this.prefix}unfinished:{u${n}}`;
  }
  /** The gauge shard a task's reservation lives in. */
  protected gaugeKey(id: string): string {
    return this.shardKey(keySlot(id) % UNFINISHED_SHARDS);
  }
  protected async fullFlag(stale: number, max: number): Promise<'0' | '1'> {
    return (await this.countUnfinished(stale)) >= max ? '1' : '0';
  }

  /**
   * The record first, then the owner index, list item and gauge from the record as stored: if one
   * of them fails this throws, and running the transition again completes them.
   */
  protected async write(record: AnyTaskRecord, mode: WriteMode): Promise<boolean> {
    const t = this.transitionArgs(record);
    const taskKey = this.taskKey(record.id);
    const [applied, status, storedItem, expiresAtMs] = (await replicated(this.cluster, taskKey, (p) =>
      scriptsOf(p).kilnRecord(taskKey, ...t.args, WRITE_FLAG[mode]),
    )) as [number, TaskStatus | null, string, number];
    // No status: the task was deleted (a tombstone, scripts.ts DELETE_TASK); its owner's keys stay
    // unlisted (again, if this write is the repeat of one that failed after listing it: see below).
    if (status === null) {
      await this.unlistIfDeleted(record);
      return false;
    }
    const ownerKey = this.ownerKey(record.owner, record.kind);
    const shard = this.gaugeKey(record.id);
    await Promise.all([
      replicated(this.cluster, ownerKey, (p) =>
        scriptsOf(p).kilnOwnerStep(
          ownerKey,
          this.ownerItemsKey(record.owner, record.kind),
          t.member,
          t.trimBound,
          this.retentionSeconds,
          record.id,
          STATUS_RANK[status],
          String(expiresAtMs).padStart(13, '0'),
          storedItem,
          mode === 'requeue' && applied === TRANSITION_REPLY.applied ? '1' : '0',
        ),
      ),
      TERMINAL_STATUSES.includes(status) ? replicated(this.cluster, shard, (p) => p.zrem(shard, record.id)) : null,
    ]);
    // A delete that ran between the record step and the owner step (its tombstone, then its UNLIST)
    // was undone by the owner step, which cannot see the task hash (another slot): the deleted task
    // was listed again. So a write that found a finished task of a deletable kind looks once more:
    // either the delete's tombstone is there by now, or the delete's UNLIST runs after the owner step.
    if (DELETABLE.includes(record.kind) && TERMINAL_STATUSES.includes(status)) await this.unlistIfDeleted(record);
    return applied === TRANSITION_REPLY.applied;
  }

  /** Takes a deleted task (its tombstone, of this owner) out of its owner's index and list items. */
  private async unlistIfDeleted(record: AnyTaskRecord): Promise<void> {
    const [owner, member] = await this.cluster.hmget(this.taskKey(record.id), 'x', 'm');
    if (owner !== record.owner || !member) return;
    const ownerKey = this.ownerKey(record.owner, record.kind);
    const itemsKey = this.ownerItemsKey(record.owner, record.kind);
    await replicated(this.cluster, ownerKey, (p) => p.eval(UNLIST, 2, ownerKey, itemsKey, member, record.id));
  }

  /**
   * The shards are counted (one round trip per node), then the task's shard takes the reservation;
   * submits racing past the count can overshoot `max` by at most their number.
   */
  async reserve(id: string, max: number): Promise<boolean> {
    const now = nowSeconds();
    const stale = now - STALE_RESERVATION_SECONDS;
    if ((await this.countUnfinished(stale)) >= max) return false;
    await this.scripts.kilnReserveShard(this.gaugeKey(id), id, now, stale);
    return true;
  }

  async unfinishedCount(): Promise<number> {
    return this.countUnfinished(nowSeconds() - STALE_RESERVATION_SECONDS);
  }

  /** Each shard's oldest, merged: a page holds the overall oldest `limit` of the window. */
  async unfinishedIds(before: number, after: number | null, limit: number) {
    const shards = Array.from({ length: UNFINISHED_SHARDS }, (_, n) => this.shardKey(n));
    const pages = await Promise.all(shards.map((key) => this.gaugePage(key, before, after, limit)));
    return pages
      .flat()
      .sort((a, b) => a.since - b.since || (a.id < b.id ? -1 : 1))
      .slice(0, limit);
  }

  /** Live reservations over all shards. */
  private async countUnfinished(stale: number): Promise<number> {
    const shards = Array.from({ length: UNFINISHED_SHARDS }, (_, n) => this.shardKey(n));
    const res = await perNode(this.cluster, shards, (p, key) => p.zcount(key, `(${stale}`, '+inf'));
    let n = 0;
    for (const [err, v] of res) {
      if (err) throw err;
      n += Number(v);
    }
    return n;
  }

  /**
   * Keys of one slot take the one read script; more go as one pipeline per node (a read script per
   * id, the limiter on its own slot's node). Ids on a node that does not answer come back absent.
   */
  protected override async readKeys(
    ids: string[],
    keys: string[],
    owner: string,
    kind: AnyTaskRecord['kind'],
    interval: number,
  ): Promise<ReadOutcome> {
    if (keys.length < 2 || (keys.length === 2 && keySlot(keys[0]) === keySlot(keys[1]))) {
      return super.readKeys(ids, keys, owner, kind, interval);
    }
    const res = await perNode(
      this.cluster,
      keys,
      (p, key, i) => scriptsOf(p).kilnRead(1, key, owner, kind, i < ids.length ? 0 : interval),
      true,
    );
    if (interval > 0) {
      const [err, reply] = res[ids.length];
      // A limiter whose node does not answer lets the read through, as with Redis down.
      const head = err ? READ_REPLY.passed : (reply as unknown[])[0];
      if (head !== READ_REPLY.passed) return { limited: true, retryAfterMs: Number(head) };
    }
    const views = ids.map((_, i) => {
      const [err, reply] = res[i];
      return err ? 'absent' : storedView((reply as unknown[])[1], (reply as unknown[])[2], owner, kind);
    });
    return { limited: false, views };
  }

  /** Entries only: a member's task hash is in another slot, out of the list script's reach. */
  protected runList(args: (string | number)[]): Promise<unknown> {
    return this.scripts.kilnListItemsBuffer(...args);
  }

  protected async runPage(args: (string | number)[]): Promise<Page> {
    return pageOf((await this.scripts.kilnPageItems(...args)) as (number | string)[], false);
  }

  /** A node that does not answer leaves its ids unknown, as if never missed. */
  async recentlyMissing(owner: string, ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const keys = ids.map((id) => this.missKey(owner, id));
    const res = await perNode(this.cluster, keys, (p, key) => p.get(key), true);
    return new Set(ids.filter((_, i) => !res[i][0] && res[i][1] !== null));
  }

  /** A node that does not answer leaves its ids not deleted, as far as this read can tell. */
  async deletedAmong(ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const res = await perNode(
      this.cluster,
      ids.map((id) => this.taskKey(id)),
      (p, key) => p.hexists(key, 'x'),
      true,
    );
    return new Set(ids.filter((_, i) => !res[i][0] && res[i][1] === 1));
  }

  async rememberMissing(owner: string, ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    const keys = ids.map((id) => this.missKey(owner, id));
    await perNode(this.cluster, keys, (p, key) => p.set(key, '1', 'PX', MISSING_TTL_MS));
  }
}
