// The Redis read model: task records, the owner index, the unfinished-task gauge and poll limiters.
// Reads on the poll path are a single round trip (one pipeline or one script).
import { Redis } from 'ioredis';
import { STATUS_RANK, TERMINAL_STATUSES, type TaskRecord } from '../shared/task.js';
import type { AnyTaskRecord } from '../shared/video.js';

const LIST_WINDOW_SECONDS = 3 * 86400;
/**
 * How long an id unknown to Redis and Temporal stays known-missing. Ids are random and a client
 * learns one only from a submit response, sent after the workflow exists and its record is written,
 * so a miss does not turn into a task later; the TTL only bounds memory.
 */
const MISSING_TTL_MS = 10 * 60_000;
/** An unfinished-task reservation older than this is dropped: no task runs that long. */
const STALE_RESERVATION_SECONDS = 86400;

// KEYS: task hash, owner index, unfinished gauge. ARGV: json, status, rank, ttl, index member,
// trim bound, id, terminal flag. A write that would move a task backwards is ignored, so replays,
// retries and the API/worker race never regress a record; the first terminal write wins. Writes of
// the same unfinished state go through (progress updates of a running task).
const TRANSITION = `
local cur = redis.call('HGET', KEYS[1], 'r')
if cur and (tonumber(cur) > tonumber(ARGV[3]) or (tonumber(cur) == tonumber(ARGV[3]) and ARGV[8] == '1')) then return 0 end
redis.call('HSET', KEYS[1], 'j', ARGV[1], 's', ARGV[2], 'r', ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
if not cur then
  redis.call('ZADD', KEYS[2], 0, ARGV[5])
  redis.call('ZREMRANGEBYLEX', KEYS[2], '-', ARGV[6])
  redis.call('EXPIRE', KEYS[2], ARGV[4])
end
if ARGV[8] == '1' then redis.call('ZREM', KEYS[3], ARGV[7]) end
return 1`;

// KEYS: unfinished gauge. ARGV: id, now, stale bound, max.
const RESERVE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1`;

// KEYS: owner index. ARGV: max (exclusive or inclusive lex bound), min, limit, task key prefix.
const LIST = `
local members = redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2], 'BYLEX', 'REV', 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for i, m in ipairs(members) do
  local id = string.sub(m, 12)
  out[i] = redis.call('HGET', ARGV[4] .. '{' .. id .. '}', 'j') or false
end
return out`;

export type PollOutcome = { limited: true; retryAfterMs: number } | { limited: false; json: (string | null)[] };

export function indexMember(createdAt: number, id: string): string {
  return `${String(createdAt).padStart(10, '0')}:${id}`;
}

export class TaskStore {
  constructor(
    readonly redis: Redis,
    private readonly prefix: string,
    private readonly retentionSeconds: number,
  ) {
    redis.defineCommand('kilnTransition', { numberOfKeys: 3, lua: TRANSITION });
    redis.defineCommand('kilnReserve', { numberOfKeys: 1, lua: RESERVE });
    redis.defineCommand('kilnList', { numberOfKeys: 1, lua: LIST });
  }

  // Hash tags keep a task's keys in one slot should the deployment move to Redis Cluster.
  taskKey(id: string) { return `${this.prefix}task:{${id}}`; }
  // Each kind has its own owner index, so image lists never show video tasks.
  ownerKey(owner: string, kind: AnyTaskRecord['kind'] = 'image') { return `${this.prefix}owner:{${owner}}:${kind === 'image' ? 'tasks' : 'videos'}`; }
  private get unfinishedKey() { return `${this.prefix}unfinished`; }

  /** Writes a transition if it moves the task forward; creates the owner index entry on first write. */
  async transition(record: AnyTaskRecord): Promise<boolean> {
    const now = Math.floor(Date.now() / 1000);
    const terminal = TERMINAL_STATUSES.includes(record.status);
    const r = await (this.redis as unknown as Scripts).kilnTransition(
      this.taskKey(record.id), this.ownerKey(record.owner, record.kind), this.unfinishedKey,
      JSON.stringify(record), record.status, STATUS_RANK[record.status], this.retentionSeconds,
      indexMember(record.created_at, record.id), `(${indexMember(now - LIST_WINDOW_SECONDS, '')}`,
      record.id, terminal ? '1' : '0',
    );
    return r === 1;
  }

  async get(id: string): Promise<TaskRecord | null> {
    const j = await this.redis.hget(this.taskKey(id), 'j');
    return j ? (JSON.parse(j) as TaskRecord) : null;
  }

  /** Claims a place among unfinished tasks; false when the queue is full. */
  async reserve(id: string, max: number): Promise<boolean> {
    const now = Math.floor(Date.now() / 1000);
    const r = await (this.redis as unknown as Scripts).kilnReserve(this.unfinishedKey, id, now, now - STALE_RESERVATION_SECONDS, max);
    return r === 1;
  }

  async release(id: string): Promise<void> {
    await this.redis.zrem(this.unfinishedKey, id);
  }

  async unfinishedCount(): Promise<number> {
    return this.redis.zcard(this.unfinishedKey);
  }

  /**
   * Reads task records behind a poll limiter, in one round trip. The limiter lets one request per
   * `intervalMs` through for `limiterKey`; 0 disables it.
   */
  async poll(ids: string[], limiterKey: string | null, intervalMs: number): Promise<PollOutcome> {
    const p = this.redis.pipeline();
    const limited = limiterKey !== null && intervalMs > 0;
    if (limited) {
      p.set(`${this.prefix}rl:${limiterKey}`, '1', 'PX', intervalMs, 'NX');
      p.pttl(`${this.prefix}rl:${limiterKey}`);
    }
    for (const id of ids) p.hget(this.taskKey(id), 'j');
    const res = (await p.exec()) ?? [];
    for (const [err] of res) if (err) throw err;
    if (limited && res[0][1] === null) {
      return { limited: true, retryAfterMs: Math.max(1, Number(res[1][1])) };
    }
    return { limited: false, json: res.slice(limited ? 2 : 0).map(([, v]) => (v as string | null) ?? null) };
  }

  /** Newest first, between two lex bounds of the owner index, with the records in one script call. */
  async list(owner: string, max: string, min: string, limit: number): Promise<TaskRecord[]> {
    const rows = (await (this.redis as unknown as Scripts).kilnList(this.ownerKey(owner), max, min, limit, `${this.prefix}task:`)) as (string | null)[];
    return rows.filter((j): j is string => typeof j === 'string').map((j) => JSON.parse(j) as TaskRecord);
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

  private missKey(owner: string, id: string) { return `${this.prefix}miss:{${id}}:${owner}`; }

  /** Ids that neither Redis nor Temporal knew for this owner within MISSING_TTL_MS. */
  async recentlyMissing(owner: string, ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const hits = await this.redis.mget(ids.map((id) => this.missKey(owner, id)));
    return new Set(ids.filter((_, i) => hits[i] !== null));
  }

  async rememberMissing(owner: string, ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    const p = this.redis.pipeline();
    for (const id of ids) p.set(this.missKey(owner, id), '1', 'PX', MISSING_TTL_MS);
    await p.exec();
  }
}

interface Scripts {
  kilnTransition(...args: (string | number)[]): Promise<number>;
  kilnReserve(...args: (string | number)[]): Promise<number>;
  kilnList(...args: (string | number)[]): Promise<unknown>;
}
