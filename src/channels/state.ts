// What every process of a deployment shares about a model's channels, kept in Redis so that the
// number of workers never multiplies what an upstream sees: in-flight leases (concurrency), the
// rate, health (failures in a window, cool-down, the half-open probe), and the recent outcomes the
// admin API, the console and Prometheus report. Implemented by ./redis-state.ts.

/** One channel of one model. Both ids use only [A-Za-z0-9._-]. */
export interface ChannelRef {
  model: string;
  channel: string;
}

/** A channel's limits and health settings, as the models file gives them (defaults applied). */
export interface ChannelLimits {
  /** Calls in flight at once, deployment-wide. */
  concurrency: number;
  /** Calls started per second, deployment-wide; unset: no rate limit. */
  ratePerSecond?: number;
  /**
   * Whether the channel cools down at all. A model's only channel does not: there is nothing to
   * move to, so each call gets the upstream's own answer (and a cool-down left from an earlier
   * models file is cleared by its next call).
   */
  cools: boolean;
  /** Refusals or not-sent failures within `cooldownWindowMs` that cool the channel down. */
  cooldownAfter: number;
  cooldownWindowMs: number;
  /** How long a cool-down lasts (before jitter). */
  cooldownMs: number;
  /** How long a lease (or a probe) holds if its holder never releases it (a worker killed mid-call). */
  leaseMs: number;
}

export type AcquireResult =
  | { ok: true; /** This call is the half-open probe of a channel whose cool-down ended. */ probe: boolean }
  | { ok: false; reason: 'cooling'; /** Epoch ms when the cool-down ends. */ untilMs: number }
  /** The cool-down ended and another call is probing the channel. */
  | { ok: false; reason: 'probing' }
  | { ok: false; reason: 'full' }
  | { ok: false; reason: 'rate'; /** When the rate allows the next call. */ retryInMs: number };

/**
 * How a call on a channel ended:
 * - `succeeded`: an answer (or an accepted video job);
 * - `refused`: an explicit refusal before processing (429, 503, 401/403, insufficient balance);
 * - `not_sent`: a transport failure before the request could leave (connection refused, DNS …);
 * - `failed`: any other answer (a 5xx that may follow processing, the caller's fault);
 * - `ambiguous`: sent, then a timeout or a dropped connection before a complete answer;
 * - `canceled`: the task was canceled mid-call (no verdict on the channel).
 */
export type CallOutcome = 'succeeded' | 'refused' | 'not_sent' | 'failed' | 'ambiguous' | 'canceled';
export const CALL_OUTCOMES: readonly CallOutcome[] = [
  'succeeded',
  'refused',
  'not_sent',
  'failed',
  'ambiguous',
  'canceled',
];

/** Upper bounds (ms) of the latency histogram's buckets; +Inf is implied. */
export const LATENCY_BUCKETS_MS = [50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000, 120_000] as const;

export interface CallReport {
  outcome: CallOutcome;
  durationMs: number;
  /** The error of a call that did not succeed: the task failure code and a short message (no secrets). */
  error?: { code: string; message: string };
  /** A 429's Retry-After: the channel cools down for exactly this long. */
  retryAfterMs?: number;
  /** 0..1, chosen by the caller: the cool-down lasts cooldownMs × (1 + 0.5 × jitter). */
  jitter: number;
}

export type ChannelHealthState = 'closed' | 'open' | 'half_open';

export interface ChannelSnapshot {
  state: ChannelHealthState;
  /** Epoch ms when the current cool-down ends (null when closed). */
  coolingUntil: number | null;
  inFlight: number;
  /** Calls released within the window (default the last 5 minutes), by outcome. */
  recent: Record<CallOutcome, number>;
  /** succeeded / (calls in the window, canceled ones left out); null without calls. */
  successRate: number | null;
  /** Latency of the window's calls (all outcomes but canceled); null without calls. */
  p50Ms: number | null;
  p95Ms: number | null;
  lastError: { code: string; message: string; at: number } | null;
  /** Since the channel's state was first written (for Prometheus): calls by outcome … */
  totals: Record<CallOutcome, number>;
  /** … and the latency histogram: counts per LATENCY_BUCKETS_MS bucket (cumulative, as Prometheus), + count and sum. */
  latency: { buckets: number[]; count: number; sumMs: number };
}

export interface ChannelState {
  /**
   * Takes a lease for `holder` (a task id, or a chat request id) when the channel is not cooling
   * down, has a free concurrency slot and the rate allows a call; one Redis round trip. A holder
   * that already holds a lease gets it again (an activity retried on the same worker).
   */
  acquire(ref: ChannelRef, holder: string, limits: ChannelLimits): Promise<AcquireResult>;
  /** Gives the lease back and records how the call ended (health, log, totals); one round trip. */
  release(ref: ChannelRef, holder: string, limits: ChannelLimits, report: CallReport): Promise<void>;
  /** What the admin API and metrics show; `windowMs` defaults to 5 minutes. */
  snapshot(ref: ChannelRef, limits: ChannelLimits, windowMs?: number): Promise<ChannelSnapshot>;
}
