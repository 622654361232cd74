// Quota reservations, their settlement and the usage ledger, in Redis (scripts.ts has the layout).
// A submit reserves its units in one script round trip; the task's terminal state settles them
// (settlement.ts); a reservation whose workflow never started is voided by the sweep (sweep.ts).
import { Cluster } from 'ioredis';
import type { RedisClient } from '../tasks/store/task-store.js';
import { defineScripts, type ScriptCommand } from '../infra/redis.js';
import {
  LIMIT_NAMES,
  limitArgs,
  NO_LIMITS,
  patchLimits,
  REFUSALS,
  type LimitName,
  type Limits,
  type LimitsPatch,
} from '../config/limits.js';
import { TASK_COUNTERS } from '../shared/usage.js';
import { ADMIT, SETTLE } from './scripts.js';

/** The ledger is kept this long, whatever the read model's retention. */
export const LEDGER_DAYS = 400;
const LEDGER_TTL_S = LEDGER_DAYS * 86_400;

/** The ledger's counters, per owner, model and UTC day of submission. */
export const LEDGER_FIELDS = [...TASK_COUNTERS, 'upstream_ms'] as const;
export type LedgerField = (typeof LEDGER_FIELDS)[number];
export type LedgerCounts = Record<LedgerField, number>;
/** How a task ended, as the ledger counts it (a failed task whose code is `canceled` counts as canceled). */
export type LedgerStatus = 'succeeded' | 'failed' | 'canceled' | 'uncertain';

export interface Admission {
  owner: string;
  id: string;
  model: string;
  units: number;
  /** The model charges a failed task whose upstream call was sent. */
  chargeFailed: boolean;
  /** Keys mode: the key submitting, with its own limits (counted over that key alone). */
  key?: { id: string; limits: Limits };
  /** Epoch ms; tests cross a day boundary with it. */
  nowMs?: number;
}

export type AdmitOutcome =
  | { admitted: true; fresh: boolean }
  | {
      admitted: false;
      code: (typeof REFUSALS)[keyof typeof REFUSALS]['code'];
      limit: LimitName;
      scope: 'owner' | 'key';
      /** When the limit can next let a submit through; null when that depends on tasks finishing. */
      retryAfterMs: number | null;
    };

/** What a submit needs of the quota (the unit tier has an in-memory stand-in). */
export type Admissions = Pick<QuotaStore, 'admit' | 'void'>;

export type SettleOutcome = 'charged' | 'held' | 'released' | 'none';

export interface Reservation {
  id: string;
  units: number;
  day: string;
  month: string;
  keyId: string | null;
  model: string;
  reservedAtMs: number;
  held: boolean;
}

/** UTC day (YYYYMMDD) of an epoch ms. */
export const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10).replaceAll('-', '');
/** YYYYMMDD -> YYYY-MM-DD. */
export const isoDay = (day: string) => `${day.slice(0, 4)}-${day.slice(4, 6)}-${day.slice(6, 8)}`;

function untilNextDay(ms: number): number {
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1) - ms;
}
function untilNextMonth(ms: number): number {
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) - ms;
}

export class QuotaStore {
  private readonly cluster: boolean;
  private readonly scripts: Record<'kilnUsageAdmit' | 'kilnUsageSettle', ScriptCommand>;
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    /** The deployment's default limits per owner (OWNER_* settings). */
    readonly defaults: Limits = NO_LIMITS,
  ) {
    this.cluster = redis instanceof Cluster;
    // ADMIT and SETTLE run on every submit and every settled task: by SHA, not their 2.2-2.4 KB text.
    this.scripts = defineScripts(redis, { kilnUsageAdmit: { lua: ADMIT }, kilnUsageSettle: { lua: SETTLE } });
  }

  /** The base of an owner's keys: its hash tag keeps them in one slot. */
  private base(owner: string) {
    return `${this.prefix}q:{${owner}}:`;
  }
  /** Every owner that has reserved, scored by its last reservation (the sweep and the admin usage read it). */
  private get ownersKey() {
    return `${this.prefix}q-owners`;
  }

  /**
   * Checks the owner's and the key's limits and reserves the task's units, atomically: concurrent
   * submits can never take more than a quota between them. A task id that holds a reservation
   * already is admitted without counting again (`fresh: false`).
   */
  async admit(a: Admission): Promise<AdmitOutcome> {
    const now = a.nowMs ?? Date.now();
    const day = dayOf(now);
    const base = this.base(a.owner);
    const args = [
      base,
      a.id,
      now,
      a.key?.id ?? '',
      a.units,
      a.model,
      day,
      day.slice(0, 6),
      a.chargeFailed ? '1' : '0',
      ...limitArgs(this.defaults),
      ...limitArgs(a.key?.limits ?? NO_LIMITS),
      LEDGER_TTL_S,
      a.owner,
    ];
    // On a Cluster the owners set lives in another slot: its write goes out in the same tick as the
    // reservation (so no crash can fall between them) and costs no extra wait.
    const [reply] = (await Promise.all([
      this.cluster
        ? this.scripts.kilnUsageAdmit(1, `${base}res`, ...args)
        : this.scripts.kilnUsageAdmit(2, `${base}res`, this.ownersKey, ...args),
      this.cluster ? this.redis.zadd(this.ownersKey, now, a.owner) : null,
    ])) as [number[], unknown];
    const [code, scope, retryMs] = reply.map(Number);
    if (code === 0) return { admitted: true, fresh: scope === 1 };
    const refusal = REFUSALS[code as keyof typeof REFUSALS];
    return {
      admitted: false,
      code: refusal.code,
      limit: refusal.limit,
      scope: scope === 1 ? 'key' : 'owner',
      retryAfterMs:
        code === 2 ? Math.max(1, retryMs) : code === 3 ? untilNextDay(now) : code === 4 ? untilNextMonth(now) : null,
    };
  }

  /** Settles a task that ended (the rules are in scripts.ts, SETTLE). Safe to run again. */
  async settle(
    owner: string,
    id: string,
    status: LedgerStatus,
    sent: boolean,
    upstreamMs: number,
  ): Promise<SettleOutcome> {
    const r = await this.run(owner, id, 'end', status, sent ? '1' : '0', Math.max(0, Math.round(upstreamMs)));
    return r === 1 ? 'charged' : r === 2 ? 'held' : r === 3 ? 'released' : 'none';
  }

  /** An operator releases an uncertain task's held units. */
  async release(owner: string, id: string): Promise<'released' | 'not_held' | 'not_found'> {
    const r = await this.run(owner, id, 'release');
    return r === 1 ? 'released' : r === -1 ? 'not_held' : 'not_found';
  }

  /** Undoes a reservation whose task never started (or that a resent keyed submit made twice). */
  async void(owner: string, id: string): Promise<boolean> {
    return (await this.run(owner, id, 'void')) === 1;
  }

  private async run(owner: string, id: string, action: string, status = '', sent = '0', ms = 0): Promise<number> {
    const base = this.base(owner);
    return Number(
      await this.scripts.kilnUsageSettle(1, `${base}res`, base, id, action, status, sent, ms, LEDGER_TTL_S),
    );
  }

  /** The owner's reservations not yet settled, and the held (uncertain) ones. */
  async reservations(owner: string): Promise<Reservation[]> {
    const all = await this.redis.hgetall(`${this.base(owner)}res`);
    return Object.entries(all).map(([id, e]) => {
      const [units, day, month, keyId, model, at, , held] = e.split('|');
      return {
        id,
        units: Number(units),
        day,
        month,
        keyId: keyId || null,
        model,
        reservedAtMs: Number(at),
        held: held === '1',
      };
    });
  }

  /**
   * Where the owner (or one of its keys) stands against its limits now: unfinished tasks, submits
   * in the last minute, and units reserved or charged today and this month (UTC). One round trip.
   */
  async standing(owner: string, keyId?: string, nowMs = Date.now()): Promise<Record<LimitName, number>> {
    const base = this.base(owner);
    const sfx = keyId ? `:${keyId}` : '';
    const day = dayOf(nowMs);
    const res = (await this.redis
      .pipeline()
      .zcard(`${base}open${sfx}`)
      .zcount(`${base}rate${sfx}`, `(${nowMs - 60_000}`, '+inf')
      .hget(`${base}d:${day}`, `u${sfx}`)
      .hget(`${base}m:${day.slice(0, 6)}`, `u${sfx}`)
      .exec())!;
    const [open, rate, d, m] = res.map(([err, v]) => {
      if (err) throw err;
      return Number(v ?? 0);
    });
    return { max_unfinished: open, submits_per_minute: rate, daily_units: d, monthly_units: m };
  }

  /** Owners whose last reservation was at or after `sinceMs`. */
  async owners(sinceMs = 0): Promise<string[]> {
    return this.redis.zrangebyscore(this.ownersKey, sinceMs, '+inf');
  }

  /** The owner's limits as they apply: its own where set, the deployment's defaults otherwise. */
  async ownerLimits(owner: string): Promise<{ limits: Limits; own: Partial<Limits> }> {
    const vals = await this.redis.hmget(`${this.base(owner)}limits`, ...LIMIT_NAMES);
    const own: Partial<Limits> = {};
    LIMIT_NAMES.forEach((n, i) => {
      if (vals[i] !== null) own[n] = Number(vals[i]) < 0 ? null : Number(vals[i]);
    });
    return { limits: patchLimits(this.defaults, own), own };
  }

  /** Sets the owner's own limits: a number or null (no limit) overrides the default; `default` goes back to it. */
  async setOwnerLimits(owner: string, patch: LimitsPatch, reset: LimitName[] = []): Promise<void> {
    const key = `${this.base(owner)}limits`;
    const set: string[] = [];
    for (const n of LIMIT_NAMES) {
      const v = patch[n];
      if (v !== undefined) set.push(n, String(v ?? -1));
    }
    const p = this.redis.multi();
    if (reset.length) p.hdel(key, ...reset);
    if (set.length) p.hset(key, ...set);
    await p.exec();
  }

  /** The ledger of `days` (YYYYMMDD): day -> model -> counts. One round trip (one slot). */
  async usage(owner: string, days: string[]): Promise<Map<string, Map<string, LedgerCounts>>> {
    const base = this.base(owner);
    const p = this.redis.pipeline();
    for (const d of days) p.hgetall(`${base}usage:${d}`);
    const res = (await p.exec()) ?? [];
    const out = new Map<string, Map<string, LedgerCounts>>();
    res.forEach(([err, hash], i) => {
      if (err) throw err;
      for (const [field, v] of Object.entries(hash as Record<string, string>)) {
        const at = field.lastIndexOf('|');
        const model = field.slice(0, at);
        const name = field.slice(at + 1) as LedgerField;
        if (!LEDGER_FIELDS.includes(name)) continue;
        let models = out.get(days[i]);
        if (!models) out.set(days[i], (models = new Map()));
        let c = models.get(model);
        if (!c) models.set(model, (c = emptyCounts()));
        c[name] += Number(v);
      }
    });
    return out;
  }
}

export const emptyCounts = (): LedgerCounts => Object.fromEntries(LEDGER_FIELDS.map((f) => [f, 0])) as LedgerCounts;
