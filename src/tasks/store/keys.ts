// The read model's key names, in one place for both stores and the unit tier's stand-in, so a test
// that reaches for a key finds the one the store writes.
import type { AnyTaskRecord } from '../../shared/records.js';

export class TaskKeys {
  constructor(protected readonly prefix: string) {}

  // Hash tags keep a task's keys (record, poll limiter, missing mark) in one slot.
  taskKey(id: string) {
    return `${this.prefix}task:{${id}}`;
  }
  /** What LIST and PAGE put before `{<id>}` to reach a task hash. */
  protected get taskKeyPrefix() {
    return `${this.prefix}task:`;
  }
  // Each kind has its own owner index, so image lists never show video tasks.
  ownerKey(owner: string, kind: AnyTaskRecord['kind'] = 'image') {
    return `${this.prefix}owner:{${owner}}:${kind === 'image' ? 'tasks' : 'videos'}`;
  }
  /** The list items of an owner index, in the owner's slot (scripts.ts, OWNER_ITEMS). */
  ownerItemsKey(owner: string, kind: AnyTaskRecord['kind'] = 'image') {
    return `${this.ownerKey(owner, kind)}:items`;
  }
  get waitChannel() {
    return `${this.prefix}status`;
  }
  /** Pub/sub channel of deleted tasks' ids (src/tasks/deletion-feed.ts listens). */
  get deletionChannel() {
    return `${this.prefix}deleted`;
  }
  /** Pub/sub channel of tasks asked to cancel (activities/cancel-notices.ts): workers listen. */
  get cancelChannel() {
    return `${this.prefix}cancel`;
  }
  protected limiterKey(key: string) {
    return `${this.prefix}rl:${key}`;
  }
  protected missKey(owner: string, id: string) {
    return `${this.prefix}miss:{${id}}:${owner}`;
  }
}
