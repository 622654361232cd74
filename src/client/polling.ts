// The contract's polling guidance as code. The schedule (pure functions) is kept apart from time
// (an injectable Clock), so tests run it on a fake clock:
//   first check 50 s after submit, then every 10 s; a longer Retry-After / next_poll_after_ms wins;
//   give up after 1200 s with the task id; batches only carry unfinished ids, at most 100 per
//   request, all sent in the same cycle; transport failures are retried with backoff; 429 waits.
// Long-poll: each check asks the server to wait (`Prefer: wait=N` / batch `"wait": N`), the first one
// at once. While answers carry `Preference-Applied` the next check follows at once (the server held
// the request until a change or N s); an answer without it puts the wait back on the schedule.
import { abortableSleep } from '../shared/abortable-sleep.js';
import { isRetryable, KilnAPIError, PollTimeoutError } from './errors.js';

export interface PollingOptions {
  /** Delay between submit and the first check. */
  firstCheckMs: number;
  /** Delay between checks, unless the server asks for longer. */
  intervalMs: number;
  /** Total time to wait before giving up with PollTimeoutError. */
  timeoutMs: number;
  /** Ids per batch-get request (the server's limit is 100). */
  batchSize: number;
  /** Backoff after a failed check (transport error, 502/503/504): initial × factor^(n-1), capped. */
  retryInitialMs: number;
  retryFactor: number;
  retryMaxMs: number;
  /** Seconds each check asks the server to wait for a change (1-60); 0: never ask, only the schedule. */
  waitSeconds: number;
}

export const DEFAULT_POLLING: PollingOptions = {
  firstCheckMs: 50_000,
  intervalMs: 10_000,
  timeoutMs: 1_200_000,
  batchSize: 100,
  retryInitialMs: 1_000,
  retryFactor: 2,
  retryMaxMs: 30_000,
  waitSeconds: 30,
};

export const UNFINISHED_TASK_STATUSES: readonly string[] = ['accepted', 'queued', 'running'];

export interface Clock {
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** Wall-clock time through Date.now and setTimeout (both of which fake timers replace). */
export const realClock: Clock = {
  now: () => Date.now(),
  sleep: abortableSleep,
};

// ---- the schedule (pure) ----

/** Delay before the first check of a task submitted at `submittedAt` (ms), seen from `now`. */
export function firstCheckDelay(o: PollingOptions, submittedAt: number, now: number): number {
  return Math.max(0, submittedAt + o.firstCheckMs - now);
}

/** Delay after a successful check: the interval, or the server's hint when it is longer. */
export function nextCheckDelay(o: PollingOptions, hintMs?: number): number {
  return Math.max(o.intervalMs, hintMs ?? 0);
}

/** Delay after the n-th failed check in a row (n ≥ 1); a server hint (Retry-After) that is longer wins. */
export function retryDelay(o: PollingOptions, failures: number, hintMs?: number): number {
  const backoff = Math.min(o.retryMaxMs, o.retryInitialMs * o.retryFactor ** Math.max(0, failures - 1));
  return Math.max(backoff, hintMs ?? 0);
}

/** Delay after a failed check, by kind of failure: 429 means "too fast", so at least the interval. */
export function delayAfterError(o: PollingOptions, err: unknown, failures: number): number {
  const hint = err instanceof KilnAPIError && err.retryAfter !== undefined ? err.retryAfter * 1000 : undefined;
  if (err instanceof KilnAPIError && err.status === 429) return nextCheckDelay(o, hint);
  return retryDelay(o, failures, hint);
}

export function chunk<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

// ---- the loops (schedule + clock) ----

export interface PollProgress {
  /** Ids still unfinished. */
  pending: string[];
  /** Last status seen per id. */
  statuses: Record<string, string>;
  elapsedMs: number;
  /** When the next check happens, from now. */
  nextCheckInMs: number;
  checks: number;
  /** The failure that caused this retry, if the last check failed. */
  lastError?: Error;
}

export interface PollRun {
  options: PollingOptions;
  clock: Clock;
  signal?: AbortSignal;
  /** When the task was submitted (ms on the clock); the first check is firstCheckMs after it. Default: now. */
  submittedAt?: number;
  /** Overrides the delay before the first check (resuming a wait after a check of one's own). */
  firstDelayMs?: number;
  onProgress?: (p: PollProgress) => void;
}

export interface Observation<T> {
  value: T;
  /** The server's Retry-After / next_poll_after_ms, in ms. */
  hintMs?: number;
  /** The server honoured the wait (Preference-Applied): the next check may follow at once. */
  waited?: boolean;
}

/** Seconds the next check may ask the server to wait: within the option and the time left. */
export function waitFor(o: PollingOptions, now: number, deadline: number): number {
  if (o.waitSeconds <= 0) return 0;
  return Math.max(0, Math.min(o.waitSeconds, 60, Math.floor((deadline - now) / 1000)));
}

/** Delay after a successful check that was not held by the server: the first one of a long-poll was a probe. */
function afterPlainCheck(o: PollingOptions, probe: boolean, submittedAt: number, now: number, hintMs?: number) {
  return probe ? Math.max(firstCheckDelay(o, submittedAt, now), hintMs ?? 0) : nextCheckDelay(o, hintMs);
}

/** Polls one resource until `isDone`; throws PollTimeoutError (with the id) after timeoutMs. */
export async function pollUntilDone<T>(
  id: string,
  check: (waitSeconds: number) => Promise<Observation<T>>,
  statusOf: (v: T) => string,
  isDone: (v: T) => boolean,
  run: PollRun,
): Promise<T> {
  const { options: o, clock } = run;
  const start = clock.now();
  const deadline = start + o.timeoutMs;
  const statuses: Record<string, string> = {};
  const probe = run.firstDelayMs === undefined && o.waitSeconds > 0;
  let delay = run.firstDelayMs ?? (probe ? 0 : firstCheckDelay(o, run.submittedAt ?? start, start));
  let failures = 0;
  let checks = 0;
  let lastError: Error | undefined;
  for (;;) {
    await waitOrTimeout([id], statuses, delay, start, deadline, checks, lastError, run);
    checks++;
    try {
      const obs = await check(waitFor(o, clock.now(), deadline));
      failures = 0;
      lastError = undefined;
      statuses[id] = statusOf(obs.value);
      if (isDone(obs.value)) return obs.value;
      delay = obs.waited
        ? 0
        : afterPlainCheck(o, probe && checks === 1, run.submittedAt ?? start, clock.now(), obs.hintMs);
    } catch (err) {
      if (!isRetryable(err)) throw err;
      failures++;
      lastError = err as Error;
      delay = delayAfterError(o, err, failures);
      // A failed probe puts the wait back on the schedule.
      if (probe && checks === 1) delay = Math.max(delay, firstCheckDelay(o, run.submittedAt ?? start, clock.now()));
    }
  }
}

export interface BatchItem {
  id: string;
  status: string;
}

/**
 * Polls many tasks through batch-get until none is unfinished. Each cycle sends only the ids still
 * accepted/queued/running, split into requests of at most batchSize ids, all in that cycle.
 * Resolves to the last item per id (terminal, or not_found), in the order of `ids`.
 */
export async function pollBatch<T extends BatchItem>(
  ids: string[],
  fetchBatch: (
    ids: string[],
    waitSeconds: number,
    signal?: AbortSignal,
  ) => Promise<{ items: T[]; hintMs?: number; waited?: boolean }>,
  run: PollRun,
): Promise<Map<string, T>> {
  const { options: o, clock } = run;
  const start = clock.now();
  const deadline = start + o.timeoutMs;
  const statuses: Record<string, string> = {};
  const done = new Map<string, T>();
  let pending = [...new Set(ids)];
  const probe = run.firstDelayMs === undefined && o.waitSeconds > 0;
  let delay = run.firstDelayMs ?? (probe ? 0 : firstCheckDelay(o, run.submittedAt ?? start, start));
  let failures = 0;
  let checks = 0;
  let lastError: Error | undefined;
  while (pending.length > 0) {
    await waitOrTimeout(pending, statuses, delay, start, deadline, checks, lastError, run);
    checks++;
    // Long-polls of one cycle: the first held answer ends the others' waits (their ids go out again).
    const cycle = new AbortController();
    const signal = run.signal ? AbortSignal.any([run.signal, cycle.signal]) : cycle.signal;
    const wait = waitFor(o, clock.now(), deadline);
    const outcomes = await Promise.allSettled(
      chunk(pending, o.batchSize).map((ids) =>
        fetchBatch(ids, wait, signal).then((r) => {
          if (r.waited) cycle.abort();
          return r;
        }),
      ),
    );
    const waited = outcomes.some((out) => out.status === 'fulfilled' && out.value.waited);
    let okHint: number | undefined;
    let errDelay = 0;
    let failed = false;
    for (const out of outcomes) {
      if (out.status === 'rejected' && cycle.signal.aborted && !run.signal?.aborted) continue;
      if (out.status === 'fulfilled') {
        const plain = afterPlainCheck(
          o,
          probe && checks === 1,
          run.submittedAt ?? start,
          clock.now(),
          out.value.hintMs,
        );
        okHint = Math.max(okHint ?? 0, waited ? 0 : plain);
        for (const item of out.value.items) {
          statuses[item.id] = item.status;
          if (!UNFINISHED_TASK_STATUSES.includes(item.status)) done.set(item.id, item);
        }
      } else {
        if (!isRetryable(out.reason)) throw out.reason;
        failed = true;
        lastError = out.reason as Error;
        errDelay = Math.max(errDelay, delayAfterError(o, out.reason, failures + 1));
      }
    }
    if (probe && checks === 1)
      errDelay = failed ? Math.max(errDelay, firstCheckDelay(o, run.submittedAt ?? start, clock.now())) : 0;
    failures = failed ? failures + 1 : 0;
    if (!failed) lastError = undefined;
    // A batch that just succeeded may go out again unchanged next cycle: never sooner than the
    // server allows, even when another batch of the cycle failed and would retry sooner.
    delay = Math.max(okHint ?? 0, errDelay);
    pending = pending.filter((id) => !done.has(id));
  }
  return new Map([...new Set(ids)].map((id) => [id, done.get(id)!]));
}

async function waitOrTimeout(
  pending: string[],
  statuses: Record<string, string>,
  delay: number,
  start: number,
  deadline: number,
  checks: number,
  lastError: Error | undefined,
  run: PollRun,
): Promise<void> {
  const now = run.clock.now();
  if (now + delay > deadline) {
    // The next check would land after the deadline: the total timeout ends the wait at the deadline.
    if (deadline > now) await run.clock.sleep(deadline - now, run.signal);
    const last = Object.fromEntries(pending.filter((id) => statuses[id]).map((id) => [id, statuses[id]]));
    throw new PollTimeoutError(pending[0], run.clock.now() - start, pending, last);
  }
  run.onProgress?.({ pending, statuses, elapsedMs: now - start, nextCheckInMs: delay, checks, lastError });
  await run.clock.sleep(delay, run.signal);
}
