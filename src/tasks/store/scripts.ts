// The read model's Lua scripts (single-node.ts and cluster.ts run them). Each one is atomic in
// Redis; in cluster mode only the single-slot ones are used. Numeric replies come from replies.ts,
// where the stores read them too.
import {
  DELETION,
  DONE,
  ITEM_SOURCE,
  LIST_UNCHANGED,
  PAGE_REPLY,
  READ_REPLY,
  RESERVATION,
  TERMINAL_RANK,
  TOMBSTONE_RANK,
  TRANSITION_REPLY,
} from './replies.js';
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
const OWNER_ITEMS = `
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

// KEYS: owner index, owner's list items. ARGV: max (exclusive or inclusive lex bound), min, limit,
// the list version of the page the caller keeps ('' for none), task key prefix. Replies
// LIST_UNCHANGED while that version holds (list-pages.ts), else the members' entries, newest
// first, then the list version (nil when the items have none). A member with no entry was
// written by an older release; when one is on the page the entries are pairs instead, an
// ITEM_SOURCE and its text: an entry, the item from the task hash, or the record (a record with
// no item stored at all; the API makes its item).
export const LIST = `${OWNER_ITEMS}
local version, unchanged = list_version(KEYS[2], ARGV[4])
if unchanged then return ${LIST_UNCHANGED} end
local entries, out = {}, nil
local function add(code, text)
  if not out then
    if code == ${ITEM_SOURCE.entry} then entries[#entries + 1] = text return end
    out = {}
    for _, e in ipairs(entries) do out[#out + 1] = ${ITEM_SOURCE.entry}; out[#out + 1] = e end
  end
  out[#out + 1] = code; out[#out + 1] = text
end
local page, complete = page_entries(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
if complete then
  page[#page + 1] = version
  return page
end
each_item(KEYS[2], page, #page, function(_, v) add(${ITEM_SOURCE.entry}, v) end, function(id)
  local h = redis.call('HMGET', ARGV[5] .. '{' .. id .. '}', 'l', 'j')
  if h[1] then add(${ITEM_SOURCE.taskHash}, h[1]) elseif h[2] then add(${ITEM_SOURCE.record}, h[2]) end
end)
out = out or entries
out[#out + 1] = version
return out`;

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

// Cluster mode list. KEYS: owner index, owner's list items. ARGV: max, min, limit, kept version
// (as LIST takes them). Replies LIST_UNCHANGED, or the members' entries, newest first, then the
// list version.
export const LIST_ITEMS = `${OWNER_ITEMS}
local version, unchanged = list_version(KEYS[2], ARGV[4])
if unchanged then return ${LIST_UNCHANGED} end
local page, complete = page_entries(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
if not complete then
  local out = {}
  each_item(KEYS[2], page, #page, function(_, v) out[#out + 1] = v end)
  page = out
end
page[#page + 1] = version
return page`;

// Cluster mode reservation, after the caller has summed the shards. KEYS: the task's gauge shard.
// ARGV: id, now, stale bound.
export const RESERVE_SHARD = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return ${DONE}`;

// Lua shared by both list pages: up to `limit` + 1 members of a lex-ordered owner index from the
// window start, after the cursor (its id and created_at) when there is one, in either order.
const PAGE_MEMBERS = `
local function page_members(index, start, limit, order, cursor, created)
  local lo, hi = start, '+'
  if cursor ~= '' then
    local m = string.format('%010d', created) .. ':' .. cursor
    if order == 'asc' then
      if m > string.sub(start, 2) then lo = '(' .. m end
    else hi = '(' .. m end
  end
  if order == 'asc' then return redis.call('ZRANGE', index, lo, hi, 'BYLEX', 'LIMIT', 0, limit + 1) end
  return redis.call('ZRANGE', index, hi, lo, 'BYLEX', 'REV', 'LIMIT', 0, limit + 1)
end`;

// A cursor page of one owner index (GET /v1/videos), single node. KEYS: owner index, owner's list
// items. ARGV: window start (inclusive lex bound), limit, cursor id ('' for none), 'asc' or 'desc'
// (as PAGE_ITEMS takes them), then task key prefix, owner, kind. The cursor's place comes from its own record (checked to be the
// owner's and this kind), so a page is one round trip; one member past the limit says whether more
// follow. Replies {unknownCursor} for a cursor that is not the owner's, else {found, more or last,
// then per member: id, ITEM_SOURCE and text: its entry | its stored view (a video's item), for a
// member an older release wrote, with no entry | the record (a record with no view stored)}.
export const PAGE = `${PAGE_MEMBERS}${OWNER_ITEMS}
local created
if ARGV[3] ~= '' then
  local h = redis.call('HMGET', ARGV[5] .. '{' .. ARGV[3] .. '}', 'o', 'k', 'v', 'j')
  local doc = h[3] or h[4]
  if not doc or h[1] ~= ARGV[6] or h[2] ~= ARGV[7] then return {${PAGE_REPLY.unknownCursor}} end
  created = cjson.decode(doc).created_at
end
local members = page_members(KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[4], ARGV[3], created)
local n = math.min(#members, tonumber(ARGV[2]))
local out = {${PAGE_REPLY.found}, #members > n and ${PAGE_REPLY.more} or ${PAGE_REPLY.last}}
local function add(id, code, text) out[#out + 1] = id; out[#out + 1] = code; out[#out + 1] = text end
each_item(KEYS[2], members, n, function(id, v) add(id, ${ITEM_SOURCE.entry}, v) end, function(id)
  local h = redis.call('HMGET', ARGV[5] .. '{' .. id .. '}', 'v', 'j')
  if h[1] then add(id, ${ITEM_SOURCE.taskHash}, h[1]) elseif h[2] then add(id, ${ITEM_SOURCE.record}, h[2]) end
end)
return out`;

// The same page in cluster mode, from the list items kept in the owner's slot. KEYS: owner index,
// owner's list items. ARGV: window start, limit, cursor id, order. Replies {unknownCursor} for an
// unknown cursor, else {found, more or last, then per member: id, entry}.
export const PAGE_ITEMS = `${PAGE_MEMBERS}${OWNER_ITEMS}
local created
if ARGV[3] ~= '' then
  local v = redis.call('HGET', KEYS[2], ARGV[3])
  if not v or entry_expiry(v) <= now_ms() then return {${PAGE_REPLY.unknownCursor}} end
  created = cjson.decode(entry_item(v)).created_at
end
local members = page_members(KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[4], ARGV[3], created)
local n = math.min(#members, tonumber(ARGV[2]))
local out = {${PAGE_REPLY.found}, #members > n and ${PAGE_REPLY.more} or ${PAGE_REPLY.last}}
each_item(KEYS[2], members, n, function(id, v) out[#out + 1] = id; out[#out + 1] = v end)
return out`;

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
