// Wait (long-poll): GET /v1/tasks/{id}?wait=N and friends answer as soon as a listed task changes
// status. Every status change in the read model is published on one Redis channel (the transition
// scripts do it, in the same atomic step as the write); each API process holds ONE subscriber
// connection and an in-process map id -> waiters, so a waiting request costs a map entry and a
// timer, never a connection. The connection subscribes only while the process has waiters (and
// WAIT_IDLE_UNSUBSCRIBE_MS after): every message costs each subscribed process a wakeup, and a
// process nobody waits on should not pay for every task of the cluster.
import type { Logger } from 'pino';
import { Gauge, type Registry } from 'prom-client';
import type { TaskStatus } from '../shared/task.js';
import type { RedisClient } from './store/task-store.js';

/** Why a wait ended before its answer is read again. */
export type WakeReason = 'changed' | 'timeout' | 'aborted' | 'unavailable' | 'shutdown';

export interface WaitAsk {
  /** 1 to 60 seconds. */
  seconds: number;
  /** Aborts when the client goes away: the waiter's slot is freed at once. */
  signal?: AbortSignal;
}

/** One waiting request: registered for its ids before their status is read, so no change is missed. */
export class Waiter {
  private baseline: Map<string, string> | null = null;
  /** Changes that arrived before the first read was compared (they may or may not be in it). */
  private early: [string, TaskStatus, number][] = [];
  /** The message that woke this waiter (its number in this process), 0 when none did. */
  wokenBy = 0;
  private settle!: (why: WakeReason) => void;
  readonly woken: Promise<WakeReason>;
  private done = false;

  constructor(
    readonly ids: readonly string[],
    private readonly label: (s: TaskStatus) => string,
    private readonly registry: WaitRegistry,
  ) {
    this.woken = new Promise((r) => (this.settle = r));
  }

  get isArmed(): boolean {
    return this.baseline !== null;
  }

  notify(id: string, status: TaskStatus, seq: number): void {
    if (!this.baseline) this.early.push([id, status, seq]);
    else if (!this.done && this.baseline.get(id) !== this.label(status)) {
      this.wokenBy = seq;
      this.wake('changed');
    }
  }

  /**
   * The statuses the first read saw. A message for a status other than these wakes the waiter (a
   * message that names the status already read is the echo of an earlier write and is ignored).
   */
  arm(baseline: Map<string, string>): void {
    if (!this.baseline) this.registry.armed += 1;
    this.baseline = baseline;
    for (const [id, status, seq] of this.early) this.notify(id, status, seq);
    this.early = [];
  }

  wake(why: WakeReason): void {
    if (this.done) return;
    this.done = true;
    this.settle(why);
  }

  /** Resolves on a change, on `ms` elapsed, or when `signal` aborts; the slot is freed either way. */
  async until(ms: number, signal?: AbortSignal): Promise<WakeReason> {
    const timer = setTimeout(() => this.wake('timeout'), ms);
    const abort = () => this.wake('aborted');
    if (signal?.aborted) abort();
    signal?.addEventListener('abort', abort, { once: true });
    try {
      return await this.woken;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', abort);
      this.release();
    }
  }

  release(): void {
    this.wake('aborted');
    this.registry.remove(this);
  }
}

/** How long the subscriber stays subscribed after the process's last waiter left. */
export const WAIT_IDLE_UNSUBSCRIBE_MS = 15_000;

export class WaitRegistry {
  private readonly byId = new Map<string, Set<Waiter>>();
  private readonly all = new Set<Waiter>();
  /**
   * The SUBSCRIBE on the current connection, true once answered while connected; null when not
   * subscribed (never yet, after the idle UNSUBSCRIBE, or since the connection closed).
   */
  private subscription: Promise<boolean> | null = null;
  private idleTimer: NodeJS.Timeout | undefined;
  private draining = false;
  private seq = 0;
  /** Waiters past their first read, waiting for a change (Waiter.arm counts them). */
  armed = 0;
  private readonly reads = new Map<string, Promise<unknown>>();

  /** `subscriber`: a connection of its own (it enters subscriber mode); null runs without waits. */
  constructor(
    private readonly subscriber: RedisClient | null,
    readonly channel: string,
    private readonly log?: Logger,
    private readonly idleMs = WAIT_IDLE_UNSUBSCRIBE_MS,
  ) {}

  /** Connects; a failure leaves waits answering at once (logged), never stops the API. */
  async start(): Promise<void> {
    const sub = this.subscriber;
    if (!sub) return;
    sub.on('message', (channel: string, message: string) => {
      if (channel === this.channel) this.deliver(message);
    });
    // While the connection is down messages are lost: every waiter reads again and answers now.
    sub.on('close', () => {
      this.subscription = null;
      this.lost();
    });
    sub.on('error', () => undefined);
    // ioredis resubscribes on its own after a reconnect; a wait still sends (and awaits) its own
    // SUBSCRIBE, a harmless repeat, so no change falls into the gap. Idle, that resubscription goes.
    sub.on('ready', () => this.idleSoon());
    try {
      if (sub.status === 'wait') await sub.connect();
    } catch (err) {
      this.log?.warn({ err: (err as Error).message }, 'wait subscriber unavailable: waits answer at once');
    }
  }

  /** Resolves true once this connection is subscribed (SUBSCRIBE answered), false if it cannot be. */
  subscribed(): Promise<boolean> {
    const sub = this.subscriber;
    if (!sub || !this.ready) return Promise.resolve(false);
    if (!this.subscription) {
      const failed = () => {
        if (this.subscription === attempt) this.subscription = null;
        return false;
      };
      const attempt: Promise<boolean> = sub.subscribe(this.channel).then(
        () => sub.status === 'ready' || failed(),
        (err: Error) => {
          this.log?.warn({ err: err.message }, 'wait subscriber could not subscribe: waits answer at once');
          return failed();
        },
      );
      this.subscription = attempt;
    }
    return this.subscription;
  }

  /** Unsubscribes after `idleMs` without a waiter (UNSUBSCRIBE and a later SUBSCRIBE stay in order on the connection). */
  private idleSoon(): void {
    clearTimeout(this.idleTimer);
    if (this.all.size > 0 || !this.subscriber) return;
    this.idleTimer = setTimeout(() => {
      if (this.all.size > 0 || this.subscriber!.status !== 'ready') return;
      this.subscription = null;
      this.subscriber!.unsubscribe(this.channel).catch(() => undefined);
    }, this.idleMs);
    this.idleTimer.unref();
  }

  /** True when a wait can be honoured: connected, not shutting down (a wait subscribes first). */
  get ready(): boolean {
    return !this.draining && this.subscriber?.status === 'ready';
  }

  /** Requests in this process waiting for a change (subscribed, first read done). */
  get size(): number {
    return this.armed;
  }

  /** Ids with at least one waiter (the map's size). */
  get watchedIds(): number {
    return this.byId.size;
  }

  watch(ids: readonly string[], label: (s: TaskStatus) => string = (s) => s): Waiter {
    const w = new Waiter(ids, label, this);
    clearTimeout(this.idleTimer);
    this.all.add(w);
    for (const id of ids) {
      let set = this.byId.get(id);
      if (!set) this.byId.set(id, (set = new Set()));
      set.add(w);
    }
    return w;
  }

  remove(w: Waiter): void {
    if (!this.all.delete(w)) return;
    if (w.isArmed) this.armed -= 1;
    for (const id of w.ids) {
      const set = this.byId.get(id);
      if (!set) continue;
      set.delete(w);
      if (set.size === 0) this.byId.delete(id);
    }
    if (this.all.size === 0) this.idleSoon();
  }

  private deliver(message: string): void {
    const cut = message.indexOf(' ');
    if (cut < 0) return;
    const set = this.byId.get(message.slice(0, cut));
    if (!set) return;
    const status = message.slice(cut + 1) as TaskStatus;
    const seq = ++this.seq;
    for (const w of set) w.notify(message.slice(0, cut), status, seq);
  }

  /**
   * One read for every waiter that `key` names (same owner, kind and ids) and the same message
   * woke: all of them were woken after that change was written, so a read started after the first
   * wake is fresh for each. 1,000 waiters on one task cost one Redis read, not 1,000.
   */
  shared<T>(key: string, read: () => Promise<T>): Promise<T> {
    let p = this.reads.get(key) as Promise<T> | undefined;
    if (!p) {
      p = read().finally(() => this.reads.delete(key));
      this.reads.set(key, p);
    }
    return p;
  }

  private lost(): void {
    for (const w of this.all) w.wake('unavailable');
  }

  /** Graceful shutdown: waiting requests answer now with the current state; new waits do not wait. */
  drain(): void {
    this.draining = true;
    for (const w of this.all) w.wake('shutdown');
  }

  close(): void {
    this.drain();
    clearTimeout(this.idleTimer);
    this.subscriber?.disconnect();
  }
}

/** Adds kiln_wait_requests (waiting requests of this process; summed over API processes) to `metrics`. */
export function waitGauge<M extends { registry: Registry }>(metrics: M, waits: WaitRegistry): M {
  new Gauge({
    name: 'kiln_wait_requests',
    help: 'Long-poll requests (wait=N) waiting for a status change',
    registers: [metrics.registry],
    collect() {
      this.set(waits.size);
    },
  });
  return metrics;
}
