// The read model on one Redis. Every operation is one script or one pipeline, and a script may touch
// all the keys a change needs (a task, its owner's index and items, the gauge), so a transition is
// atomic and a list page can fall back to task hashes written by older releases.
import type { Redis } from 'ioredis';
import type { AnyTaskRecord } from '../../shared/records.js';
import { MISSING_TTL_MS, nowSeconds, RedisTaskStore, STALE_RESERVATION_SECONDS, WRITE_FLAG } from './base.js';
import type { WriteMode } from './base.js';
import type { TaskStoreOptions } from './base.js';
import { pageOf, RESERVATION, TRANSITION_REPLY } from './replies.js';
import { LIST, PAGE } from './list-scripts.js';
import { RESERVE, TRANSITION } from './scripts.js';
import type { Page, TaskStore } from './task-store.js';

export class SingleNodeTaskStore extends RedisTaskStore implements TaskStore {
  constructor(redis: Redis, opts: TaskStoreOptions) {
    super(redis, opts, {
      kilnTransition: [4, TRANSITION],
      kilnReserve: [1, RESERVE],
      kilnList: [2, LIST],
      kilnPage: [2, PAGE],
    });
  }

  protected readonly crossSlot = true;

  private get unfinishedKey() {
    return `${this.prefix}unfinished`;
  }
  protected gaugeKey(): string {
    return this.unfinishedKey;
  }
  protected async fullFlag(): Promise<''> {
    return '';
  }

  protected async write(record: AnyTaskRecord, mode: WriteMode): Promise<boolean> {
    const { args, member, trimBound } = this.transitionArgs(record);
    const r = await this.scripts.kilnTransition(
      this.taskKey(record.id),
      this.ownerKey(record.owner, record.kind),
      this.unfinishedKey,
      this.ownerItemsKey(record.owner, record.kind),
      ...args,
      member,
      trimBound,
      WRITE_FLAG[mode],
    );
    return r === TRANSITION_REPLY.applied;
  }

  async reserve(id: string, max: number): Promise<boolean> {
    const now = nowSeconds();
    const r = await this.scripts.kilnReserve(this.unfinishedKey, id, now, now - STALE_RESERVATION_SECONDS, max);
    return r === RESERVATION.added;
  }

  async unfinishedCount(): Promise<number> {
    return this.redis.zcard(this.unfinishedKey);
  }

  unfinishedIds(before: number, after: number | null, limit: number) {
    return this.gaugePage(this.unfinishedKey, before, after, limit);
  }

  protected runList(args: (string | number)[]): Promise<unknown> {
    return this.scripts.kilnListBuffer(...args, this.taskKeyPrefix);
  }

  protected async runPage(args: (string | number)[], owner: string, kind: AnyTaskRecord['kind']): Promise<Page> {
    const reply = await this.scripts.kilnPage(...args, this.taskKeyPrefix, owner, kind);
    return pageOf(reply as (number | string)[], true);
  }

  async recentlyMissing(owner: string, ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const hits = await this.redis.mget(ids.map((id) => this.missKey(owner, id)));
    return new Set(ids.filter((_, i) => hits[i] !== null));
  }

  async deletedAmong(ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const p = this.redis.pipeline();
    for (const id of ids) p.hexists(this.taskKey(id), 'x');
    const res = (await p.exec()) ?? [];
    return new Set(ids.filter((_, i) => !res[i]?.[0] && res[i]?.[1] === 1));
  }

  async rememberMissing(owner: string, ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    const p = this.redis.pipeline();
    for (const id of ids) p.set(this.missKey(owner, id), '1', 'PX', MISSING_TTL_MS);
    await p.exec();
  }
}
