// Where a read-model rebuild keeps its place, so it survives the process that runs it: the
// progress (the visibility page token and the counts), the ids it wrote as still running (checked
// again at the end), and the lock that lets one process at a time run it. All three share one slot
// (`{rebuild}`), so a progress write can be made conditional on still holding the lock: a process
// that lost it (paused past the TTL) cannot move the progress back.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { RedisClient } from '../store/task-store.js';

export interface RebuildProgress {
  /** `running` until the last page and the settle pass are done; a run whose lock lapsed is resumed. */
  state: 'running' | 'done';
  /** `listing`: walking visibility page by page; `settling`: checking again the tasks written as running. */
  phase: 'listing' | 'settling' | 'done';
  started_at: number;
  updated_at: number;
  finished_at: number | null;
  /** Workflows closed before this (epoch s) are past the retention and not rebuilt. */
  since: number;
  page_size: number;
  /** How many times a process took it up (1 for a run never interrupted). */
  runs: number;
  pages: number;
  /** Task workflows read from Temporal. */
  workflows: number;
  /** Records written (Redis had none, or an earlier state). */
  written: number;
  /** Records Redis already had at the same or a later state: left alone. */
  unchanged: number;
  /** Tasks still running, written with their place in the unfinished gauge. */
  unfinished: number;
  /** Webhook delivery states written back. */
  webhooks: number;
  errors: number;
  last_error: string | null;
  /** Time spent working, over all runs (ms): the rate's denominator. */
  busy_ms: number;
  /** The next visibility page (base64); null before the first page and after the last. */
  token: string | null;
}

// KEYS: lock. ARGV: holder, ttl ms. Extends the lock only while this holder has it.
const RENEW = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`;
// KEYS: lock, progress. ARGV: holder, progress JSON, ttl s. Writes only while this holder has the lock.
const SAVE = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
return 1`;
// KEYS: lock. ARGV: holder.
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1`;

/** The rebuild's keys under the deployment's prefix, and the lock held by this process. */
export class RebuildState {
  readonly holder = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private readonly base: string;

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
    /** How long the progress stays after its last write: as long as the records it rebuilt. */
    private readonly keepSeconds: number,
    readonly lockTtlMs: number,
  ) {
    this.base = `${prefix}rebuild:{rebuild}:`;
  }

  get lockKey() {
    return `${this.base}lock`;
  }
  private get progressKey() {
    return `${this.base}progress`;
  }
  private get settleKey() {
    return `${this.base}settle`;
  }

  async acquire(): Promise<boolean> {
    return (await this.redis.set(this.lockKey, this.holder, 'PX', this.lockTtlMs, 'NX')) === 'OK';
  }
  async renew(): Promise<boolean> {
    return (await this.redis.eval(RENEW, 1, this.lockKey, this.holder, this.lockTtlMs)) === 1;
  }
  async release(): Promise<void> {
    await this.redis.eval(RELEASE, 1, this.lockKey, this.holder);
  }
  /** Whether any process holds the lock now. */
  async held(): Promise<boolean> {
    return (await this.redis.exists(this.lockKey)) === 1;
  }

  async read(): Promise<RebuildProgress | null> {
    const json = await this.redis.get(this.progressKey);
    return json ? (JSON.parse(json) as RebuildProgress) : null;
  }
  /** False when this process no longer holds the lock: it must stop. */
  async save(p: RebuildProgress): Promise<boolean> {
    const json = JSON.stringify(p);
    return (await this.redis.eval(SAVE, 2, this.lockKey, this.progressKey, this.holder, json, this.keepSeconds)) === 1;
  }

  /** A fresh run forgets the previous run's tasks to settle. */
  async clearSettle(): Promise<void> {
    await this.redis.del(this.settleKey);
  }
  async addSettle(ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    await this.redis.sadd(this.settleKey, ...ids);
    await this.redis.expire(this.settleKey, this.keepSeconds);
  }
  /** Up to `n` ids still to settle; removed with `settled` once handled, so a crash redoes them. */
  async toSettle(n: number): Promise<string[]> {
    return this.redis.srandmember(this.settleKey, n);
  }
  async settled(ids: string[]): Promise<void> {
    if (ids.length) await this.redis.srem(this.settleKey, ...ids);
  }
}
