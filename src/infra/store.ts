// The Redis read model: task records, the owner index, the unfinished-task gauge and poll limiters.
// Reads on the poll path are a single round trip (one pipeline or one script).
import { Redis } from 'ioredis';
import { STATUS_RANK, TERMINAL_STATUSES, type TaskRecord, type TaskStatus } from '../shared/task.js';
import type { AnyTaskRecord } from '../shared/video.js';
import { listItem, storedViews } from '../shared/views.js';

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
// trim bound, id, terminal flag, public view, list item, owner, kind. A write that would move a task
// backwards is ignored, so replays, retries and the API/worker race never regress a record; the
// first terminal write wins. Writes of the same unfinished state go through (progress updates of a
// running task). The record, its serialised views and its owner change together, so a read of the
// view is exactly as fresh as a read of the record.
const TRANSITION = `
local cur = redis.call('HGET', KEYS[1], 'r')
if cur and (tonumber(cur) > tonumber(ARGV[3]) or (tonumber(cur) == tonumber(ARGV[3]) and ARGV[8] == '1')) then return 0 end
redis.call('HSET', KEYS[1], 'j', ARGV[1], 's', ARGV[2], 'r', ARGV[3], 'v', ARGV[9], 'o', ARGV[11], 'k', ARGV[12])
if ARGV[10] ~= '' then redis.call('HSET', KEYS[1], 'l', ARGV[10]) end
redis.call('EXPIRE', KEYS[1], ARGV[4])
if not cur then
  redis.call('ZADD', KEYS[2], 0, ARGV[5])
  redis.call('ZREMRANGEBYLEX', KEYS[2], '-', ARGV[6])
  redis.call('EXPIRE', KEYS[2], ARGV[4])
end
if ARGV[8] == '1' then redis.call('ZREM', KEYS[3], ARGV[7]) end
return 1`;

// KEYS: task hashes, then the limiter key when ARGV[3] > 0. ARGV: owner, kind, limiter interval ms.
// Replies {0, then per task: status and view | 1 (another owner's or kind) | 3 and the record
// (written before views were stored) | 0 (absent)}, or {pttl} when the limiter refuses.
const READ = `
local n = #KEYS
local interval = tonumber(ARGV[3])
if interval > 0 then
  if not redis.call('SET', KEYS[n], '1', 'PX', interval, 'NX') then
    local t = redis.call('PTTL', KEYS[n])
    if t < 1 then t = 1 end
    return {t}
  end
  n = n - 1
end
local out = {0}
for i = 1, n do
  local h = redis.call('HMGET', KEYS[i], 'o', 'k', 's', 'v')
  if h[4] then
    if h[1] == ARGV[1] and h[2] == ARGV[2] then out[#out + 1] = h[3]; out[#out + 1] = h[4]
    else out[#out + 1] = 1; out[#out + 1] = false end
  else
    local j = redis.call('HGET', KEYS[i], 'j')
    if j then out[#out + 1] = 3; out[#out + 1] = j else out[#out + 1] = 0; out[#out + 1] = false end
  end
end
return out`;

// KEYS: unfinished gauge. ARGV: id, now, stale bound, max.
const RESERVE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1`;

// KEYS: owner index. ARGV: max (exclusive or inclusive lex bound), min, limit, task key prefix.
// Replies pairs: 1 and the stored list item, or 3 and the record (written before items were stored).
const LIST = `
local members = redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2], 'BYLEX', 'REV', 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, m in ipairs(members) do
  local key = ARGV[4] .. '{' .. string.sub(m, 12) .. '}'
  local l = redis.call('HGET', key, 'l')
  if l then out[#out + 1] = 1; out[#out + 1] = l
  else
    local j = redis.call('HGET', key, 'j')
    if j then out[#out + 1] = 3; out[#out + 1] = j end
  end
end
return out`;

export type PollOutcome = { limited: true; retryAfterMs: number } | { limited: false; json: (string | null)[] };

/** A record's public view as stored (JSON text), or why there is none. */
export type StoredView = { status: TaskStatus; view: string } | 'foreign' | 'absent';
export type ReadOutcome = { limited: true; retryAfterMs: number } | { limited: false; views: StoredView[] };

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
    redis.defineCommand('kilnRead', { lua: READ });
  }

  // Hash tags keep a task's keys in one slot should the deployment move to Redis Cluster.
  taskKey(id: string) {
    return `${this.prefix}task:{${id}}`;
  }
  // Each kind has its own owner index, so image lists never show video tasks.
  ownerKey(owner: string, kind: AnyTaskRecord['kind'] = 'image') {
    return `${this.prefix}owner:{${owner}}:${kind === 'image' ? 'tasks' : 'videos'}`;
  }
  private get unfinishedKey() {
    return `${this.prefix}unfinished`;
  }

  /** Writes a transition if it moves the task forward; creates the owner index entry on first write. */
  async transition(record: AnyTaskRecord): Promise<boolean> {
    const now = Math.floor(Date.now() / 1000);
    const terminal = TERMINAL_STATUSES.includes(record.status);
    const { view, item } = storedViews(record);
    const r = await (this.redis as unknown as Scripts).kilnTransition(
      this.taskKey(record.id),
      this.ownerKey(record.owner, record.kind),
      this.unfinishedKey,
      JSON.stringify(record),
      record.status,
      STATUS_RANK[record.status],
      this.retentionSeconds,
      indexMember(record.created_at, record.id),
      `(${indexMember(now - LIST_WINDOW_SECONDS, '')}`,
      record.id,
      terminal ? '1' : '0',
      view,
      item,
      record.owner,
      record.kind,
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
    const r = await (this.redis as unknown as Scripts).kilnReserve(
      this.unfinishedKey,
      id,
      now,
      now - STALE_RESERVATION_SECONDS,
      max,
    );
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

  /**
   * Public views of `ids` for `owner`, behind a poll limiter, in one round trip (one script). The
   * limiter lets one request per `intervalMs` through for `limiterKey`; 0 disables it.
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
    const reply = (await (this.redis as unknown as Scripts).kilnRead(
      keys.length,
      ...keys,
      owner,
      kind,
      limited ? intervalMs : 0,
    )) as (string | number | null)[];
    if (reply[0] !== 0) return { limited: true, retryAfterMs: Number(reply[0]) };
    const views: StoredView[] = new Array(ids.length);
    for (let i = 0; i < ids.length; i++) {
      const code = reply[1 + 2 * i];
      const payload = reply[2 + 2 * i];
      if (typeof code === 'string') views[i] = { status: code as TaskStatus, view: payload as string };
      else if (code === 3) views[i] = legacyView(payload as string, owner, kind);
      else views[i] = code === 1 ? 'foreign' : 'absent';
    }
    return { limited: false, views };
  }

  /** Newest first, between two lex bounds of the owner index: the stored list items (JSON text). */
  async list(owner: string, max: string, min: string, limit: number): Promise<string[]> {
    const reply = (await (this.redis as unknown as Scripts).kilnList(
      this.ownerKey(owner),
      max,
      min,
      limit,
      `${this.prefix}task:`,
    )) as (number | string)[];
    const items: string[] = [];
    for (let i = 0; i < reply.length; i += 2) {
      items.push(
        reply[i] === 1
          ? (reply[i + 1] as string)
          : JSON.stringify(listItem(JSON.parse(reply[i + 1] as string) as TaskRecord)),
      );
    }
    return items;
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
  kilnRead(...args: (string | number)[]): Promise<unknown>;
}
