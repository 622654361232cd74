// A time limit for one operation, for activities, the API and the SDK. Used instead of
// AbortSignal.timeout: that timer cannot be cleared, so it stays scheduled for its whole delay after
// the operation ended, and on Node 24 it holds the async context it was made in. In an activity
// that context is the Temporal activity itself (its input, logger and metric meter): each upstream
// call kept ~9 KiB for the model's whole timeout (120 s by default), ~40 MiB of a worker's heap at
// 38 tasks a second (BENCHMARKS.md, memory).

export interface Deadline {
  /** Aborts with a `TimeoutError` DOMException, as AbortSignal.timeout's does, once `ms` have passed. */
  readonly signal: AbortSignal;
  /** Whether the time ran out (rather than another signal ending the operation). */
  readonly expired: boolean;
  /** Ends the timer: call it when the operation is over, however it ended. */
  clear(): void;
}

export function deadline(ms: number): Deadline {
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new DOMException(`The operation timed out after ${ms} ms.`, 'TimeoutError')),
    ms,
  );
  // Like AbortSignal.timeout's, the timer alone does not keep a process (a script using the SDK) alive.
  (timer as { unref?: () => void }).unref?.(); // a number in browsers
  return {
    signal: controller.signal,
    get expired() {
      return controller.signal.aborted;
    },
    clear: () => clearTimeout(timer),
  };
}

/** Runs `run` under a deadline of `ms`, cleared when it settles. */
export async function withDeadline<T>(ms: number, run: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const d = deadline(ms);
  try {
    return await run(d.signal);
  } finally {
    d.clear();
  }
}
