// The read model's Lua scripts (src/infra/store.ts runs them). Each one is atomic in Redis; in
// cluster mode only the single-slot ones are used.

// KEYS: task hash, owner index, unfinished gauge. ARGV: json, status, rank, ttl, index member,
// trim bound, id, terminal flag, public view, list item, owner, kind. A write that would move a task
// backwards is ignored, so replays, retries and the API/worker race never regress a record; the
// first terminal write wins. Writes of the same unfinished state go through (progress updates of a
// running task). The record, its serialised views and its owner change together, so a read of the
// view is exactly as fresh as a read of the record. ARGV[13], the wait channel: a write that changes
// the status publishes "<id> <status>" there, after the write, so a woken waiter reads the new view.
export const TRANSITION = `
local h = redis.call('HMGET', KEYS[1], 'r', 's')
local cur = h[1]
local rank = tonumber(ARGV[3])
if cur and (tonumber(cur) > rank or (tonumber(cur) == rank and ARGV[8] == '1')) then return 0 end
redis.call('HSET', KEYS[1], 'j', ARGV[1], 's', ARGV[2], 'r', ARGV[3], 'v', ARGV[9], 'o', ARGV[11], 'k', ARGV[12])
if h[2] ~= ARGV[2] then redis.call('PUBLISH', ARGV[13], ARGV[7] .. ' ' .. ARGV[2]) end
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
export const RESERVE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1`;

// KEYS: owner index. ARGV: max (exclusive or inclusive lex bound), min, limit, task key prefix.
// Replies the stored list items joined with commas, as one string: one bulk reply instead of 100
// for the client to decode. When a record written before items were stored is on the page, it
// replies pairs instead: 1 and the stored list item, or 3 and the record (the API makes its item).
export const LIST = `
local members = redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2], 'BYLEX', 'REV', 'LIMIT', 0, tonumber(ARGV[3]))
local out, items, legacy = {}, {}, false
for _, m in ipairs(members) do
  local key = ARGV[4] .. '{' .. string.sub(m, 12) .. '}'
  local l = redis.call('HGET', key, 'l')
  if l then items[#items + 1] = l; out[#out + 1] = 1; out[#out + 1] = l
  else
    local j = redis.call('HGET', key, 'j')
    if j then legacy = true; out[#out + 1] = 3; out[#out + 1] = j end
  end
end
if legacy then return out end
return table.concat(items, ',')`;

// Cluster mode, step 1 of a transition. KEYS: task hash. ARGV: json, status, rank, ttl, terminal
// flag, public view, list item, owner, kind, wait channel, id. The same forward-only rule and status
// message as TRANSITION (on a cluster PUBLISH reaches every node's subscribers over the bus). Replies
// {applied, stored status, stored list item, stored record's expiry in ms}: what the later steps
// write is the stored record's, so running them again after any write, even a stale one, repairs
// them rather than moving them back.
export const RECORD = `
local was = redis.call('HMGET', KEYS[1], 'r', 's')
local cur = was[1]
local applied = 0
if not cur or tonumber(cur) < tonumber(ARGV[3]) or (tonumber(cur) == tonumber(ARGV[3]) and ARGV[5] ~= '1') then
  redis.call('HSET', KEYS[1], 'j', ARGV[1], 's', ARGV[2], 'r', ARGV[3], 'v', ARGV[6], 'o', ARGV[8], 'k', ARGV[9])
  if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'l', ARGV[7]) end
  redis.call('EXPIRE', KEYS[1], ARGV[4])
  if was[2] ~= ARGV[2] then redis.call('PUBLISH', ARGV[10], ARGV[11] .. ' ' .. ARGV[2]) end
  applied = 1
end
local h = redis.call('HMGET', KEYS[1], 's', 'l')
local t = redis.call('TIME')
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then pttl = tonumber(ARGV[4]) * 1000 end
return {applied, h[1], h[2] or '', t[1] * 1000 + math.floor(t[2] / 1000) + pttl}`;

// Cluster mode, step 2. KEYS: owner index, owner's list items (hash: id -> "<rank>:<expiry ms, 13
// digits>:<item>"), both in the owner's slot. ARGV: index member, trim bound, ttl, id, rank,
// expiry, item. Idempotent: the item is replaced only by a later state of the record (higher rank,
// or the same rank written later), and trimmed index members take their items with them.
export const OWNER_STEP = `
redis.call('ZADD', KEYS[1], 0, ARGV[1])
if ARGV[7] ~= '' then
  local cur = redis.call('HGET', KEYS[2], ARGV[4])
  local rank = tonumber(ARGV[5])
  if not cur or tonumber(string.sub(cur, 1, 1)) < rank
    or (tonumber(string.sub(cur, 1, 1)) == rank and tonumber(string.sub(cur, 3, 15)) < tonumber(ARGV[6])) then
    redis.call('HSET', KEYS[2], ARGV[4], ARGV[5] .. ':' .. ARGV[6] .. ':' .. ARGV[7])
  end
end
local old = redis.call('ZRANGE', KEYS[1], '-', ARGV[2], 'BYLEX', 'LIMIT', 0, 200)
if #old > 0 then
  local ids = {}
  for i, m in ipairs(old) do ids[i] = string.sub(m, 12) end
  redis.call('ZREM', KEYS[1], unpack(old))
  redis.call('HDEL', KEYS[2], unpack(ids))
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return 1`;

// Cluster mode list. KEYS: owner index, owner's list items. ARGV: max, min, limit. The items of
// records past their expiry are left out, as their records are gone.
export const LIST_ITEMS = `
local members = redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2], 'BYLEX', 'REV', 'LIMIT', 0, tonumber(ARGV[3]))
if #members == 0 then return {} end
local ids = {}
for i, m in ipairs(members) do ids[i] = string.sub(m, 12) end
local items = redis.call('HMGET', KEYS[2], unpack(ids))
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local out = {}
for i = 1, #ids do
  local v = items[i]
  if v and tonumber(string.sub(v, 3, 15)) > now then out[#out + 1] = string.sub(v, 17) end
end
return out`;

// Cluster mode reservation, after the caller has summed the shards. KEYS: the task's gauge shard.
// ARGV: id, now, stale bound.
export const RESERVE_SHARD = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1`;

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

// A cursor page of one owner index (GET /v1/videos), single node. KEYS: owner index. ARGV: window
// start (inclusive lex bound), limit, task key prefix, cursor id ('' for none), 'asc' or 'desc',
// owner, kind. The cursor's place comes from its own record (checked to be the owner's and this
// kind), so a page is one round trip; one member past the limit says whether more follow. Replies
// {-1} for a cursor that is not the owner's, else {0, 1 when more follow else 0, then per member:
// id, 1 and the stored view | id, 3 and the record (written before views were stored)}.
export const PAGE = `${PAGE_MEMBERS}
local created
if ARGV[4] ~= '' then
  local h = redis.call('HMGET', ARGV[3] .. '{' .. ARGV[4] .. '}', 'o', 'k', 'v', 'j')
  local doc = h[3] or h[4]
  if not doc or h[1] ~= ARGV[6] or h[2] ~= ARGV[7] then return {-1} end
  created = cjson.decode(doc).created_at
end
local members = page_members(KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[5], ARGV[4], created)
local n = math.min(#members, tonumber(ARGV[2]))
local out = {0, #members > n and 1 or 0}
for i = 1, n do
  local id = string.sub(members[i], 12)
  local h = redis.call('HMGET', ARGV[3] .. '{' .. id .. '}', 'v', 'j')
  if h[1] then out[#out + 1] = id; out[#out + 1] = 1; out[#out + 1] = h[1]
  elseif h[2] then out[#out + 1] = id; out[#out + 1] = 3; out[#out + 1] = h[2] end
end
return out`;

// The same page in cluster mode, from the list items kept in the owner's slot. KEYS: owner index,
// owner's list items. ARGV: window start, limit, cursor id, order. Replies {-1} for an unknown
// cursor, else {0, more flag, then per member: id, item}; items past their record's expiry are
// left out, as their records are gone.
export const PAGE_ITEMS = `${PAGE_MEMBERS}
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local created
if ARGV[3] ~= '' then
  local v = redis.call('HGET', KEYS[2], ARGV[3])
  if not v or tonumber(string.sub(v, 3, 15)) <= now then return {-1} end
  created = cjson.decode(string.sub(v, 17)).created_at
end
local members = page_members(KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[4], ARGV[3], created)
local n = math.min(#members, tonumber(ARGV[2]))
if n == 0 then return {0, 0} end
local ids = {}
for i = 1, n do ids[i] = string.sub(members[i], 12) end
local items = redis.call('HMGET', KEYS[2], unpack(ids))
local out = {0, #members > n and 1 or 0}
for i = 1, #ids do
  local v = items[i]
  if v and tonumber(string.sub(v, 3, 15)) > now then out[#out + 1] = ids[i]; out[#out + 1] = string.sub(v, 17) end
end
return out`;
