// Batch records in Redis, beside the read model and on its connection. A batch stores only what
// its tasks cannot tell: its requests' task ids (or refusals), their metadata, its display name and
// the cancel mark. Its state is always derived from the tasks' own records, so it is never stale.
// Every key of an owner's batches carries the hash tag `{owner}`: one slot, so each script below
// runs on a Redis Cluster as on a single Redis.
import type { RedisClient } from '../tasks/store/task-store.js';
import type { RpcStatus } from '../http/google-errors.js';

/** One request of a batch: its task, or the refusal it got at submit. */
export interface BatchItem {
  task?: string;
  refused?: RpcStatus;
  metadata?: Record<string, unknown>;
}

export interface BatchRecord {
  id: string;
  model: string;
  displayName?: string;
  /** Epoch ms. */
  createdMs: number;
  items: BatchItem[];
}

/** A record with its marks, as read. */
export interface StoredBatch {
  record: BatchRecord;
  /** When its owner canceled it (epoch ms). */
  canceledMs?: number;
  /** A keyed create's fingerprint (Idempotency-Key). */
  fingerprint?: string;
}

/** An index member: sorting members as text sorts batches by creation, ties by id. */
const member = (createdMs: number, id: string) => `${String(createdMs).padStart(13, '0')}:${id}`;

// KEYS: record, index. ARGV: record JSON, fingerprint, index member, ttl s, index ttl s, oldest member kept.
const CREATE = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'm', ARGV[3])
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'fp', ARGV[2]) end
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[2], 0, ARGV[3])
redis.call('ZREMRANGEBYLEX', KEYS[2], '-', '(' .. ARGV[6])
redis.call('EXPIRE', KEYS[2], ARGV[5])
return 1`;

// KEYS: record, index.
const DELETE = `
local m = redis.call('HGET', KEYS[1], 'm')
if not m then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], m)
return 1`;

// KEYS: record. ARGV: ms. Only on a record that exists; the first cancel's time stays.
const CANCEL = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSETNX', KEYS[1], 'cancel', ARGV[1])
return 1`;

export class BatchStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly retentionSeconds: number,
  ) {}

  private key(owner: string, id: string) {
    return `${this.prefix}gbatch:{${owner}}:${id}`;
  }
  private index(owner: string) {
    return `${this.prefix}gbatches:{${owner}}`;
  }

  /** Writes a new batch; false when one with that id exists already (a keyed create's race). */
  async create(owner: string, record: BatchRecord, fingerprint?: string): Promise<boolean> {
    const ttl = this.retentionSeconds;
    const oldest = member(record.createdMs - ttl * 1000, '');
    const written = await this.redis.eval(
      CREATE,
      2,
      this.key(owner, record.id),
      this.index(owner),
      JSON.stringify(record),
      fingerprint ?? '',
      member(record.createdMs, record.id),
      ttl,
      // The index outlives its newest record's own expiry; members past retention are trimmed here.
      ttl + 86_400,
      oldest,
    );
    return written === 1;
  }

  async get(owner: string, id: string): Promise<StoredBatch | null> {
    const h = await this.redis.hgetall(this.key(owner, id));
    return parse(h);
  }

  /** Records of ids, in order (null where gone), in one round trip: all in the owner's slot. */
  async getMany(owner: string, ids: string[]): Promise<(StoredBatch | null)[]> {
    if (ids.length === 0) return [];
    const p = this.redis.pipeline();
    for (const id of ids) p.hgetall(this.key(owner, id));
    const replies = (await p.exec()) ?? [];
    return replies.map(([err, h]) => (err ? null : parse(h as Record<string, string>)));
  }

  /**
   * A page of the owner's batches, newest first, after the cursor (an index member): their ids and
   * index members, and the member to continue from when there are more.
   */
  async page(
    owner: string,
    after: string | undefined,
    size: number,
  ): Promise<{ ids: string[]; members: string[]; next?: string }> {
    const max = after === undefined ? '+' : `(${after}`;
    const min = `[${member(Date.now() - this.retentionSeconds * 1000, '')}`;
    const found = await this.redis.zrevrangebylex(this.index(owner), max, min, 'LIMIT', 0, size + 1);
    const members = found.slice(0, size);
    const ids = members.map((m) => m.slice(m.indexOf(':') + 1));
    return found.length > size ? { ids, members, next: members[members.length - 1] } : { ids, members };
  }

  /** Drops index members whose records are gone (expired before the index trimmed them). */
  async forget(owner: string, members: string[]): Promise<void> {
    if (members.length) await this.redis.zrem(this.index(owner), ...members);
  }

  async markCanceled(owner: string, id: string, ms: number): Promise<boolean> {
    return (await this.redis.eval(CANCEL, 1, this.key(owner, id), ms)) === 1;
  }

  async delete(owner: string, id: string): Promise<boolean> {
    return (await this.redis.eval(DELETE, 2, this.key(owner, id), this.index(owner))) === 1;
  }
}

/** Whether a page cursor is one `page` could have issued. */
export const isCursor = (s: string) => /^\d{13}:batch_[a-f0-9]{32}$/.test(s);

function parse(h: Record<string, string> | null | undefined): StoredBatch | null {
  if (!h || h.v === undefined) return null;
  return {
    record: JSON.parse(h.v) as BatchRecord,
    ...(h.cancel ? { canceledMs: Number(h.cancel) } : {}),
    ...(h.fp ? { fingerprint: h.fp } : {}),
  };
}
