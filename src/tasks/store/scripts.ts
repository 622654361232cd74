// The read model's Lua scripts (single-node.ts and cluster.ts run them; the list pages are in
// list-scripts.ts). Each one is atomic in Redis; in cluster mode only the single-slot ones are
// used. Numeric replies come from replies.ts, where the stores read them too.
import { DELETION, DONE, READ_REPLY, RESERVATION, TERMINAL_RANK, TOMBSTONE_RANK, TRANSITION_REPLY } from './replies.js';
import { STATUS_RANK } from '../../shared/task.js';
import { LIST_VERSION_FIELD } from './list-pages.js';

// Lua shared by the scripts that keep or read an owner's list items: a hash in the owner's slot,
// id -> "<rank>:<expiry ms, 13 digits>:<item>", beside the owner index (a sorted set of
// "<created_at, 10 digits>:<id>" members). An item outlives its record until the hash expires or
// the member is trimmed, so readers leave out items past their expiry: their records are gone.
// add_member puts a member in the index and trims the members before the window, with their items.
// Every change to an index or its items bumps the items hash's version field (list-pages.ts: the
// API keeps a page while it is unchanged); a new hash's version starts at Redis's clock in µs, so
// a hash that expired and came back never repeats a version an API process may still hold.
// each_item reads the entries of members[1..n] with one HMGET and calls found(id, entry) for each
// entry and missing(id), when given, for each member with none. page_entries reads a list page:
// the HMGET's reply as it is when every member has an entry (the usual page: no per-item Lua, which
// is most of the script's cost), else the members, for the caller to go through each_item. Readers
// reply whole entries, and the caller (list-items.ts, entryLive) leaves out expired ones and cuts
// the item out: cutting, parsing or joining 100 entries here costs Redis more than the HMGET saves
// over reading each task hash (and table.concat of a page costs more than the replies it saves).
export const OWNER_ITEMS = `
local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end
local function entry(rank, expiry, item) return rank .. ':' .. string.format('%013d', expiry) .. ':' .. item end
local function entry_rank(v) return tonumber(string.sub(v, 1, 1)) end
local function entry_expiry(v) return tonumber(string.sub(v, 3, 15)) end
local function entry_item(v) return string.sub(v, 17) end
local function bump(items)
  if redis.call('HINCRBY', items, '${LIST_VERSION_FIELD}', 1) == 1 then
    local t = redis.call('TIME')
    redis.call('HSET', items, '${LIST_VERSION_FIELD}', t[1] .. string.format('%06d', t[2]))
  end
end
local function add_member(index, items, member, bound, ttl)
  bump(items)
  redis.call('ZADD', index, 0, member)
  local old = redis.call('ZRANGE', index, '-', bound, 'BYLEX', 'LIMIT', 0, 200)
  if #old > 0 then
    local ids = {}
    for i, m in ipairs(old) do ids[i] = string.sub(m, 12) end
    redis.call('ZREM', index, unpack(old))
    redis.call('HDEL', items, unpack(ids))
  end
  redis.call('EXPIRE', index, ttl)
  redis.call('EXPIRE', items, ttl)
end
local function list_members(index, max, min, limit)
  return redis.call('ZRANGE', index, max, min, 'BYLEX', 'REV', 'LIMIT', 0, tonumber(limit))
end
local function member_entries(items, members, n)
  local ids = {}
  for i = 1, n do ids[i] = string.sub(members[i], 12) end
  return ids, redis.call('HMGET', items, unpack(ids))
end
local function each_item(items, members, n, found, missing)
  if n == 0 then return end
  local ids, vals = member_entries(items, members, n)
  for i = 1, n do
    local v = vals[i]
    if v then found(ids[i], v) elseif missing then missing(ids[i]) end
  end
end
local function list_version(items, known)
  local v = redis.call('HGET', items, '${LIST_VERSION_FIELD}')
  return v or false, v ~= false and v == known
end
local function page_entries(index, items, max, min, limit)
  local members = list_members(index, max, min, limit)
  local n = #members
  if n == 0 then return {}, true end
  local ids, vals = member_entries(items, members, n)
  for i = 1, n do if not vals[i] then return members, false end end
  return vals, true
end`;

// KEYS: task hash, owner index, unfinished gauge, owner's list items. ARGV: those of RECORD (json,
// status, rank, ttl, terminal flag, public view, list item, owner, kind, wait channel, id), then
// index member and trim bound, and the strict flag. A write
// that would move a task backwards is ignored, so replays, retries and the API/worker race never
// regress a record; the first terminal write wins. Writes of the same unfinished state go through
// (progress updates of a running task). The record, its serialised views, its list item and its
// owner change together, so a read of a view or a list is exactly as fresh as a read of the record;
// the item is set unconditionally as only an applied write gets here. The task hash keeps no copy
// of the item (a list reads the items hash); a stale one an older release left there is dropped,
// so nothing can read it. A write that changes the status publishes "<id> <status>" on the wait
// channel, after the write, so a woken waiter reads the new view. A strict write ('1': a record
// rebuilt from Temporal) never replaces a state of the same rank either: the one stored is as new
// and knows more (a running task's progress). A requeue ('2': a call refused without processing,
// waiting to be sent again) is the one write that moves a task back: from running to queued only.
export const TRANSITION = `${OWNER_ITEMS}
local h = redis.call('HMGET', KEYS[1], 'r', 's')
local cur = h[1]
local rank = tonumber(ARGV[3])
local back = ARGV[14] == '2' and cur and tonumber(cur) == ${STATUS_RANK.running} and rank == ${STATUS_RANK.queued}
if cur and not back and (tonumber(cur) > rank or (tonumber(cur) == rank and (ARGV[5] == '1' or ARGV[14] == '1'))) then return ${TRANSITION_REPLY.stale} end
redis.call('HSET', KEYS[1], 'j', ARGV[1], 's', ARGV[2], 'r', ARGV[3], 'v', ARGV[6], 'o', ARGV[8], 'k', ARGV[9])
redis.call('HDEL', KEYS[1], 'l')
if h[2] ~= ARGV[2] then redis.call('PUBLISH', ARGV[10], ARGV[11] .. ' ' .. ARGV[2]) end
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('HSET', KEYS[4], ARGV[11], entry(rank, now_ms() + tonumber(ARGV[4]) * 1000, ARGV[7]))
add_member(KEYS[2], KEYS[4], ARGV[12], ARGV[13], ARGV[4])
if ARGV[5] == '1' then redis.call('ZREM', KEYS[3], ARGV[11]) end
return ${TRANSITION_REPLY.applied}`;

// KEYS: task hashes, then the limiter key when ARGV[3] > 0. ARGV: owner, kind, limiter interval ms.
// Replies {passed, then per task: status and view | foreign (another owner's or kind, or a deleted
// task's tombstone: no one's, and never looked up in Temporal) | record and the record (an older
// release's record, with no view stored) | absent}, or {pttl} when the limiter refuses.
export const READ = `
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
local out = {${READ_REPLY.passed}}
for i = 1, n do
  local h = redis.call('HMGET', KEYS[i], 'o', 'k', 's', 'v')
  if h[4] then
    if h[1] == ARGV[1] and h[2] == ARGV[2] then out[#out + 1] = h[3]; out[#out + 1] = h[4]
    else out[#out + 1] = ${READ_REPLY.foreign}; out[#out + 1] = false end
  else
    local j = redis.call('HMGET', KEYS[i], 'j', 'x')
    if j[1] then out[#out + 1] = ${READ_REPLY.record}; out[#out + 1] = j[1]
    elseif j[2] then out[#out + 1] = ${READ_REPLY.foreign}; out[#out + 1] = false
    else out[#out + 1] = ${READ_REPLY.absent}; out[#out + 1] = false end
  end
end
return out`;

// KEYS: unfinished gauge. ARGV: id, now, stale bound, max.
export const RESERVE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return ${RESERVATION.full} end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return ${RESERVATION.added}`;

// Cluster mode, step 1 of a transition. KEYS: task hash. ARGV: json, status, rank, ttl, terminal
// flag, public view, list item, owner, kind, wait channel, id, strict flag ('2': requeue). The same forward-only
// rule (strict included) and status message as TRANSITION (on a cluster PUBLISH reaches every node's subscribers over the bus). Replies
// {applied, stored status, stored list item, stored record's expiry in ms}: what the later steps
// write is the stored record's, so running them again after any write, even a stale one, repairs
// them rather than moving them back.
export const RECORD = `${OWNER_ITEMS}
local was = redis.call('HMGET', KEYS[1], 'r', 's')
local cur = was[1]
local applied = ${TRANSITION_REPLY.stale}
local back = ARGV[12] == '2' and cur and tonumber(cur) == ${STATUS_RANK.running} and tonumber(ARGV[3]) == ${STATUS_RANK.queued}
if not cur or back or tonumber(cur) < tonumber(ARGV[3]) or (tonumber(cur) == tonumber(ARGV[3]) and ARGV[5] ~= '1' and ARGV[12] ~= '1') then
  redis.call('HSET', KEYS[1], 'j', ARGV[1], 's', ARGV[2], 'r', ARGV[3], 'v', ARGV[6], 'o', ARGV[8], 'k', ARGV[9])
  if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'l', ARGV[7]) end
  redis.call('EXPIRE', KEYS[1], ARGV[4])
  if was[2] ~= ARGV[2] then redis.call('PUBLISH', ARGV[10], ARGV[11] .. ' ' .. ARGV[2]) end
  applied = ${TRANSITION_REPLY.applied}
end
local h = redis.call('HMGET', KEYS[1], 's', 'l')
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then pttl = tonumber(ARGV[4]) * 1000 end
return {applied, h[1], h[2] or '', now_ms() + pttl}`;

// Cluster mode, step 2. KEYS: owner index, owner's list items (hash: id -> "<rank>:<expiry ms, 13
// digits>:<item>"), both in the owner's slot. ARGV: index member, trim bound, ttl, id, rank,
// expiry, item, and '1' after an applied requeue (its item goes from running back to queued). Idempotent: the item is replaced only by a later state of the record (higher rank,
// or the same rank written later), and trimmed index members take their items with them.
export const OWNER_STEP = `${OWNER_ITEMS}
if ARGV[7] ~= '' then
  local cur = redis.call('HGET', KEYS[2], ARGV[4])
  local rank = tonumber(ARGV[5])
  local back = ARGV[8] == '1' and entry_rank(cur or '0') == ${STATUS_RANK.running} and rank == ${STATUS_RANK.queued}
  if not cur or back or entry_rank(cur) < rank or (entry_rank(cur) == rank and entry_expiry(cur) < tonumber(ARGV[6])) then
    redis.call('HSET', KEYS[2], ARGV[4], entry(rank, tonumber(ARGV[6]), ARGV[7]))
  end
end
add_member(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
return ${DONE}`;

// Cluster mode reservation, after the caller has summed the shards. KEYS: the task's gauge shard.
// ARGV: id, now, stale bound.
export const RESERVE_SHARD = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return ${DONE}`;

// A keyed submit's reservation (Idempotency-Key). KEYS: the gauge (cluster: the id's shard). ARGV:
// id, now, stale bound, max, full flag: '' to count here (single node), else '1' or '0' as the
// caller counted the shards. A held reservation is neither counted twice nor refused.
export const RESERVE_ONCE = `redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then return ${RESERVATION.held} end
if ARGV[5] == '1' or (ARGV[5] == '' and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4])) then return ${RESERVATION.full} end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return ${RESERVATION.added}`;

// KEYS: task hash. ARGV: fingerprint, ttl. The fingerprint lives in the record's hash so it expires
// with it; a hash with no TTL yet (no record written) gets the retention.
export const REMEMBER_FINGERPRINT = `redis.call('HSET', KEYS[1], 'f', ARGV[1])
if redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
return ${DONE}`;

// A deleted task's tombstone replaces its hash: `x` (the owner), `m` (its index member) and a rank
// above every status, so TRANSITION and RECORD (forward-only) refuse every later write of the task
// (a late worker write, a fallback read's write-back, a rebuild's restore, a reconciler round), and
// READ answers it as no one's. The fingerprint stays: a keyed resubmit learns the key's task is gone.
// KEYS: task hash, then (single node) owner index and owner's list items. ARGV: owner, kind, ttl,
// index member, id, deletion channel (the id is published there: every API process drops its view). Only a finished task of this owner and kind is deleted; a tombstone of the owner
// is unlisted again (a cluster's delete that stopped before UNLIST). Replies {DELETION, member}.
export const DELETE_TASK = `${OWNER_ITEMS}
local h = redis.call('HMGET', KEYS[1], 'o', 'k', 'r', 'x', 'f', 'm')
local member, code = ARGV[4], ${DELETION.deleted}
if h[4] then
  if h[4] ~= ARGV[1] then return {${DELETION.absent}, ''} end
  member, code = h[6] or '', ${DELETION.gone}
else
  if h[1] ~= ARGV[1] or h[2] ~= ARGV[2] then return {${DELETION.absent}, ''} end
  if tonumber(h[3] or 0) < ${TERMINAL_RANK} then return {${DELETION.unfinished}, ''} end
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'x', ARGV[1], 'r', ${TOMBSTONE_RANK}, 'm', member)
  if h[5] then redis.call('HSET', KEYS[1], 'f', h[5]) end
  redis.call('EXPIRE', KEYS[1], ARGV[3])
  redis.call('PUBLISH', ARGV[6], ARGV[5])
end
if #KEYS == 3 and member ~= '' then
  redis.call('ZREM', KEYS[2], member)
  redis.call('HDEL', KEYS[3], ARGV[5])
  if redis.call('EXISTS', KEYS[3]) == 1 then bump(KEYS[3]) end
end
return {code, member}`;

// Cluster mode, the second step of a delete (the first is DELETE_TASK on the task hash alone).
// KEYS: owner index, owner's list items. ARGV: index member, id. Idempotent.
export const UNLIST = `${OWNER_ITEMS}
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[2])
if redis.call('EXISTS', KEYS[2]) == 1 then bump(KEYS[2]) end
return ${DONE}`;
