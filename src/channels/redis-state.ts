// ChannelState on Redis (single node or Cluster). A channel's keys share one hash tag, so each
// operation is one script in one slot: atomic across every worker of the deployment, one round trip.
// Time comes from Redis (TIME), never from the caller, so workers with skewed clocks agree on
// lease expiry, the rate and cool-downs. Keys live a day past their last write (longer while a
// cool-down runs): a model removed from the models file leaves nothing behind.
import type { RedisClient } from '../tasks/store/task-store.js';
import { defineScripts, type ScriptCommand } from '../infra/redis.js';
import {
  CALL_OUTCOMES,
  LATENCY_BUCKETS_MS,
  type AcquireResult,
  type CallOutcome,
  type CallReport,
  type ChannelLimits,
  type ChannelRef,
  type ChannelSnapshot,
  type ChannelState,
} from './state.js';

const IDLE_TTL_MS = 86_400_000;
/** Outcomes kept for the recent window; at 2000 a 5-minute window stays exact up to ~6 calls/s. */
const LOG_MAX = 2000;
const DEFAULT_WINDOW_MS = 300_000;

// The hash (KEYS s) holds: until (cool-down end, 0 = closed), probe + probe_exp (the half-open
// probe's holder and lease expiry), tat (GCRA theoretical arrival time), seq (failure member ids),
// err_code/err_msg/err_at, t:<outcome> totals, h:<i> cumulative latency buckets, lat_count, lat_sum.
const PRELUDE = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function touch(keys, now, until_ms)
  local ttl = ${IDLE_TTL_MS}
  if until_ms > now then ttl = ttl + (until_ms - now) end
  for _, k in ipairs(keys) do redis.call('PEXPIRE', k, ttl) end
end`;

// KEYS: hash, leases. ARGV: holder, concurrency, leaseMs, ratePerSecond (0: none), cools (1/0).
// The rate is a GCRA, so a refused call costs nothing and the state is one number; the probe is
// taken only once the capacity checks pass, so a refused would-be probe leaves the next caller free
// to probe.
const ACQUIRE = `${PRELUDE}
local s, l, holder = KEYS[1], KEYS[2], ARGV[1]
local concurrency, lease_ms, rate = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', l, '-inf', '(' .. now)
local h = redis.call('HMGET', s, 'until', 'probe', 'probe_exp', 'tat')
local until_ms, probe, probe_exp = tonumber(h[1]) or 0, h[2], tonumber(h[3]) or 0
-- A channel that never cools down ignores any cool-down left from when it did.
if ARGV[5] == '0' then until_ms = 0 end
local expiry = now + lease_ms
if redis.call('ZSCORE', l, holder) then
  -- A retried activity on the same worker: same slot, same probe role, a fresh expiry.
  redis.call('ZADD', l, expiry, holder)
  local is_probe = until_ms > 0 and probe == holder
  if is_probe then redis.call('HSET', s, 'probe_exp', expiry) end
  touch({s, l}, now, until_ms)
  return {'ok', is_probe and 1 or 0}
end
if now < until_ms then return {'cooling', until_ms} end
local half_open = until_ms > 0
if half_open and probe and probe ~= holder and probe_exp >= now then return {'probing'} end
if redis.call('ZCARD', l) >= concurrency then return {'full'} end
if rate > 0 then
  local interval = 1000 / rate
  local burst = math.max(1, math.floor(rate))
  local tat = math.max(tonumber(h[4]) or 0, now) + interval
  local allow_at = tat - burst * interval
  if now < allow_at then return {'rate', math.max(1, math.ceil(allow_at - now))} end
  redis.call('HSET', s, 'tat', tat)
end
redis.call('ZADD', l, expiry, holder)
if half_open then redis.call('HSET', s, 'probe', holder, 'probe_exp', expiry) end
touch({s, l}, now, until_ms)
return {'ok', half_open and 1 or 0}`;

// KEYS: hash, failures, leases, log. ARGV: holder, outcome, durationMs, error code ('' = none),
// error message, retryAfterMs ('' = none), jitter, cooldownAfter, cooldownWindowMs, cooldownMs,
// cools (1/0: a channel that never cools down records no failures, and its state is reset closed).
// Only refusals and not-sent failures say the upstream is unwilling or unreachable: a failed or
// ambiguous call was answered or reached it, so it never cools the channel down.
const RELEASE = `${PRELUDE}
local s, f, l, o = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local holder, outcome, duration = ARGV[1], ARGV[2], tonumber(ARGV[3])
local retry_after, jitter = tonumber(ARGV[6]), tonumber(ARGV[7])
local after, window, cooldown = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local bounds = {${LATENCY_BUCKETS_MS.join(', ')}}
local now = now_ms()
redis.call('ZREM', l, holder)
redis.call('LPUSH', o, now .. '|' .. outcome .. '|' .. ARGV[3])
redis.call('LTRIM', o, 0, ${LOG_MAX - 1})
redis.call('HINCRBY', s, 't:' .. outcome, 1)
if outcome ~= 'canceled' then
  for i, bound in ipairs(bounds) do
    if duration <= bound then redis.call('HINCRBY', s, 'h:' .. i, 1) end
  end
  redis.call('HINCRBY', s, 'lat_count', 1)
  redis.call('HINCRBY', s, 'lat_sum', duration)
end
if ARGV[4] ~= '' then redis.call('HSET', s, 'err_code', ARGV[4], 'err_msg', ARGV[5], 'err_at', now) end
if ARGV[11] == '0' then
  redis.call('HSET', s, 'until', 0)
  redis.call('HDEL', s, 'probe', 'probe_exp')
  redis.call('DEL', f)
  touch({s, l, o}, now, 0)
  return 1
end
local h = redis.call('HMGET', s, 'until', 'probe')
local until_ms = tonumber(h[1]) or 0
local refusal = outcome == 'refused' or outcome == 'not_sent'
local fresh = now + math.floor(cooldown * (1 + 0.5 * jitter))
if until_ms > 0 and h[2] == holder then
  -- The probe's verdict decides the channel; a canceled probe says nothing, so the next call probes.
  redis.call('HDEL', s, 'probe', 'probe_exp')
  if outcome ~= 'canceled' then
    redis.call('DEL', f)
    if refusal then until_ms = fresh else until_ms = 0 end
  end
elseif refusal then
  redis.call('ZADD', f, now, redis.call('HINCRBY', s, 'seq', 1))
  redis.call('ZREMRANGEBYSCORE', f, '-inf', '(' .. (now - window))
  if redis.call('ZCARD', f) >= after then
    until_ms = math.max(until_ms, fresh)
    redis.call('DEL', f)
  end
elseif outcome == 'succeeded' and until_ms == 0 then
  redis.call('DEL', f)
end
-- The upstream said how long: believe it at once, whatever the failure count.
if retry_after then until_ms = math.max(until_ms, now + retry_after) end
redis.call('HSET', s, 'until', until_ms)
touch({s, f, l, o}, now, until_ms)
return 1`;

// KEYS: hash, leases, log. ARGV: windowMs. Reads only; the log is newest first, so the window's
// entries are a prefix of it. Percentiles are left to the caller: Lua's sort would cost Redis time.
const SNAPSHOT = `${PRELUDE}
local now = now_ms()
local since = now - tonumber(ARGV[1])
local recent = {}
for _, e in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
  if tonumber(string.match(e, '^(%d+)')) < since then break end
  recent[#recent + 1] = e
end
return {now, redis.call('HGETALL', KEYS[1]), redis.call('ZCOUNT', KEYS[2], now, '+inf'), recent}`;

type Commands = Record<'kilnChannelAcquire' | 'kilnChannelRelease' | 'kilnChannelSnapshot', ScriptCommand>;

const zeroCounts = (): Record<CallOutcome, number> =>
  Object.fromEntries(CALL_OUTCOMES.map((o) => [o, 0])) as Record<CallOutcome, number>;
const isOutcome = (s: string): s is CallOutcome => (CALL_OUTCOMES as readonly string[]).includes(s);

/** Nearest rank: the smallest value with at least p of the values at or below it. */
const percentile = (sorted: number[], p: number): number | null =>
  sorted.length === 0 ? null : sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)];

export class RedisChannelState implements ChannelState {
  private readonly commands: Commands;

  constructor(
    redis: RedisClient,
    private readonly prefix: string,
  ) {
    this.commands = defineScripts(redis, {
      kilnChannelAcquire: { numberOfKeys: 2, lua: ACQUIRE },
      kilnChannelRelease: { numberOfKeys: 4, lua: RELEASE },
      kilnChannelSnapshot: { numberOfKeys: 3, lua: SNAPSHOT },
    });
  }

  /** The channel's keys: state hash, failures, leases, outcome log; the hash tag puts them in one slot. */
  keys(ref: ChannelRef) {
    const base = `${this.prefix}ch:{${ref.model}/${ref.channel}}:`;
    return { state: `${base}s`, failures: `${base}f`, leases: `${base}l`, log: `${base}o` };
  }

  async acquire(ref: ChannelRef, holder: string, limits: ChannelLimits): Promise<AcquireResult> {
    const k = this.keys(ref);
    const [verdict, value] = (await this.commands.kilnChannelAcquire(
      k.state,
      k.leases,
      holder,
      limits.concurrency,
      Math.max(1, Math.round(limits.leaseMs)),
      limits.ratePerSecond ?? 0,
      limits.cools ? 1 : 0,
    )) as [string, number | undefined];
    switch (verdict) {
      case 'ok':
        return { ok: true, probe: value === 1 };
      case 'cooling':
        return { ok: false, reason: 'cooling', untilMs: Number(value) };
      case 'rate':
        return { ok: false, reason: 'rate', retryInMs: Number(value) };
      case 'probing':
      case 'full':
        return { ok: false, reason: verdict };
      default:
        throw new Error(`unexpected channel acquire reply: ${verdict}`);
    }
  }

  async release(ref: ChannelRef, holder: string, limits: ChannelLimits, report: CallReport): Promise<void> {
    const k = this.keys(ref);
    await this.commands.kilnChannelRelease(
      k.state,
      k.failures,
      k.leases,
      k.log,
      holder,
      report.outcome,
      // Whole ms: the log and the histogram sum stay integers (HINCRBY).
      Math.max(0, Math.round(report.durationMs)),
      report.error?.code ?? '',
      report.error?.message ?? '',
      report.retryAfterMs === undefined ? '' : Math.max(0, Math.ceil(report.retryAfterMs)),
      Math.min(1, Math.max(0, report.jitter)),
      limits.cooldownAfter,
      Math.round(limits.cooldownWindowMs),
      Math.round(limits.cooldownMs),
      limits.cools ? 1 : 0,
    );
  }

  async snapshot(ref: ChannelRef, _limits: ChannelLimits, windowMs = DEFAULT_WINDOW_MS): Promise<ChannelSnapshot> {
    const k = this.keys(ref);
    const [now, flat, inFlight, entries] = (await this.commands.kilnChannelSnapshot(
      k.state,
      k.leases,
      k.log,
      Math.round(windowMs),
    )) as [number, string[], number, string[]];
    const hash = new Map<string, string>();
    for (let i = 0; i + 1 < flat.length; i += 2) hash.set(flat[i], flat[i + 1]);
    const num = (field: string) => Number(hash.get(field) ?? 0);

    const recent = zeroCounts();
    const durations: number[] = [];
    for (const entry of entries) {
      const [, outcome, duration] = entry.split('|');
      if (!isOutcome(outcome)) continue;
      recent[outcome]++;
      if (outcome !== 'canceled') durations.push(Number(duration));
    }
    durations.sort((a, b) => a - b);

    const until = num('until');
    const totals = zeroCounts();
    for (const o of CALL_OUTCOMES) totals[o] = num(`t:${o}`);
    const errCode = hash.get('err_code');
    return {
      state: until === 0 ? 'closed' : now < until ? 'open' : 'half_open',
      coolingUntil: until === 0 ? null : until,
      inFlight,
      recent,
      successRate: durations.length === 0 ? null : recent.succeeded / durations.length,
      p50Ms: percentile(durations, 0.5),
      p95Ms: percentile(durations, 0.95),
      lastError:
        errCode === undefined ? null : { code: errCode, message: hash.get('err_msg') ?? '', at: num('err_at') },
      totals,
      latency: {
        buckets: [...LATENCY_BUCKETS_MS.map((_, i) => num(`h:${i + 1}`)), num('lat_count')],
        count: num('lat_count'),
        sumMs: num('lat_sum'),
      },
    };
  }
}
