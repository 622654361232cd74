// The quota's Lua scripts. Every key of one owner shares the hash tag `{<owner>}`, so each script
// stays in one slot on a Redis Cluster. Keys under the base `<prefix>q:{<owner>}:`:
//   res            hash  task id -> "units|day|month|key id|model|reserved at ms|chargeFailed|held"
//   open[:<key>]   zset  the owner's (the key's) unfinished tasks, scored by reservation time
//   rate[:<key>]   zset  submits of the last minute, scored by time (a sliding log)
//   d:<YYYYMMDD>   hash  u[:<key>] = units reserved or charged by tasks submitted that UTC day
//   m:<YYYYMM>     hash  the same per UTC month
//   usage:<day>    hash  the ledger: "<model>|<field>" -> count (submitted, succeeded, failed,
//                        canceled, uncertain, units, upstream_ms), kept 400 days
//   limits         hash  the owner's own limits (absent field: the deployment default; -1: none)
// A script builds these names from the base it is given; the one key it declares (`res`) routes it.

// Shared: split an entry, the key suffixes an entry counts under, and the ledger counter.
const COMMON = `
local function split(s)
  local out = {}
  for part in string.gmatch(s .. '|', '([^|]*)|') do out[#out + 1] = part end
  return out
end
local function suffixes(kid)
  if kid ~= '' then return {'', ':' .. kid} end
  return {''}
end
local function count(base, day, model, field, n, ttl)
  if n == 0 then return end
  local ledger = base .. 'usage:' .. day
  redis.call('HINCRBY', ledger, model .. '|' .. field, n)
  redis.call('EXPIRE', ledger, ttl)
end`;

// KEYS: res, then (single node) the deployment's owners set. ARGV: base, task id, now ms, key id
// ('' none), units, model, day, month, chargeFailed, the owner's default limits (4), the key's
// limits (4) (-1: none), ledger ttl s, owner. Replies {0, fresh} when admitted (fresh 0: this task
// id holds a reservation already, as when a keyed submit is resent), else {refusal, scope (0 owner,
// 1 key), retry ms (rate only)}: 1 unfinished, 2 rate, 3 day units, 4 month units.
export const ADMIT = `${COMMON}
local base, id, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local kid, units, model, day, month = ARGV[4], tonumber(ARGV[5]), ARGV[6], ARGV[7], ARGV[8]
if redis.call('HEXISTS', KEYS[1], id) == 1 then return {0, 0} end
local own = redis.call('HMGET', base .. 'limits', 'max_unfinished', 'submits_per_minute', 'daily_units', 'monthly_units')
local limits = {{}, {}}
for i = 1, 4 do
  limits[1][i] = tonumber(own[i] or ARGV[9 + i])
  limits[2][i] = tonumber(ARGV[13 + i])
end
local sfx = suffixes(kid)
local dayKey, monthKey = base .. 'd:' .. day, base .. 'm:' .. month
for s = 1, #sfx do
  local l = limits[s]
  if l[1] >= 0 and redis.call('ZCARD', base .. 'open' .. sfx[s]) >= l[1] then return {1, s - 1, 0} end
  if l[2] >= 0 then
    local rate = base .. 'rate' .. sfx[s]
    redis.call('ZREMRANGEBYSCORE', rate, '-inf', now - 60000)
    if redis.call('ZCARD', rate) >= l[2] then
      local oldest = redis.call('ZRANGE', rate, 0, 0, 'WITHSCORES')[2]
      return {2, s - 1, oldest and (tonumber(oldest) + 60000 - now) or 60000}
    end
  end
  if l[3] >= 0 and tonumber(redis.call('HGET', dayKey, 'u' .. sfx[s]) or '0') + units > l[3] then return {3, s - 1, 0} end
  if l[4] >= 0 and tonumber(redis.call('HGET', monthKey, 'u' .. sfx[s]) or '0') + units > l[4] then return {4, s - 1, 0} end
end
redis.call('HSET', KEYS[1], id, table.concat({units, day, month, kid, model, now, ARGV[9], '0'}, '|'))
for s = 1, #sfx do
  local rate = base .. 'rate' .. sfx[s]
  redis.call('ZADD', base .. 'open' .. sfx[s], now, id)
  redis.call('ZREMRANGEBYSCORE', rate, '-inf', now - 60000)
  redis.call('ZADD', rate, now, id)
  redis.call('PEXPIRE', rate, 60000)
  redis.call('HINCRBY', dayKey, 'u' .. sfx[s], units)
  redis.call('HINCRBY', monthKey, 'u' .. sfx[s], units)
end
redis.call('EXPIRE', dayKey, 3 * 86400)
redis.call('EXPIRE', monthKey, 63 * 86400)
count(base, day, model, 'submitted', 1, tonumber(ARGV[18]))
if KEYS[2] then redis.call('ZADD', KEYS[2], now, ARGV[19]) end
return {0, 1}`;

// KEYS: res. ARGV: base, task id, action, ledger status, sent ('1': the upstream call was sent),
// upstream ms, ledger ttl s. Each action takes the task's entry at most once (HDEL, or the held
// flag), so running it again changes nothing: settlement may be retried freely.
//   end      the task ended with the ledger status (succeeded, failed, canceled, uncertain):
//            succeeded is charged; uncertain is held (charged until an operator releases it);
//            failed or canceled is released, unless it was sent and the model charges failures.
//            Replies 1 charged, 2 held, 3 released, 0 nothing to settle.
//   release  an operator releases a held (uncertain) task: 1, or -1 when the entry is not held.
//   void     the task never started (or a resent keyed submit found its task): its reservation
//            is undone as if never made, the submit and its place in the minute's rate included.
export const SETTLE = `${COMMON}
local base, id, action, ttl = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[7])
local e = redis.call('HGET', KEYS[1], id)
if not e then return 0 end
local f = split(e)
local units, day, month, kid, model, chargeFailed, held = tonumber(f[1]), f[2], f[3], f[4], f[5], f[7], f[8]
local sfx = suffixes(kid)
local function unopen(rate)
  for s = 1, #sfx do
    redis.call('ZREM', base .. 'open' .. sfx[s], id)
    if rate then redis.call('ZREM', base .. 'rate' .. sfx[s], id) end
  end
end
local function refund()
  for _, k in ipairs({base .. 'd:' .. day, base .. 'm:' .. month}) do
    if redis.call('EXISTS', k) == 1 then
      for s = 1, #sfx do redis.call('HINCRBY', k, 'u' .. sfx[s], -units) end
    end
  end
end
if action == 'end' then
  if held == '1' then return 0 end
  local status = ARGV[4]
  count(base, day, model, status, 1, ttl)
  count(base, day, model, 'upstream_ms', tonumber(ARGV[6]), ttl)
  unopen(false)
  if status == 'uncertain' then
    f[8] = '1'
    redis.call('HSET', KEYS[1], id, table.concat(f, '|'))
    count(base, day, model, 'units', units, ttl)
    return 2
  end
  redis.call('HDEL', KEYS[1], id)
  if status == 'succeeded' or (ARGV[5] == '1' and chargeFailed == '1') then
    count(base, day, model, 'units', units, ttl)
    return 1
  end
  refund()
  return 3
elseif action == 'release' then
  if held ~= '1' then return -1 end
  redis.call('HDEL', KEYS[1], id)
  refund()
  count(base, day, model, 'units', -units, ttl)
  count(base, day, model, 'released', 1, ttl)
  return 1
elseif action == 'void' then
  if held == '1' then return 0 end
  redis.call('HDEL', KEYS[1], id)
  unopen(true)
  refund()
  count(base, day, model, 'submitted', -1, ttl)
  return 1
end
return 0`;
