// Read-model calls inside activities ride out a short Redis outage (a restart, a cluster failover)
// instead of failing the attempt: a failed attempt counts against the task's retries, and once
// they are spent the task would end failed for a fault that was Redis's, not the upstream's.

/** How long an activity keeps retrying one read-model call; a Redis Cluster failover takes ~8 s. */
export const STORE_RETRY_MS = 15_000;

/** `fn`, retried with backoff for up to `forMs`; `beat` runs between tries (an activity's heartbeat). */
export async function retrying<T>(fn: () => Promise<T>, forMs: number, beat: () => void = () => undefined): Promise<T> {
  const deadline = Date.now() + forMs;
  for (let delay = 200; ; delay = Math.min(delay * 2, 10_000)) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() + delay > deadline) throw err;
      beat();
      await new Promise((r) => setTimeout(r, delay).unref());
    }
  }
}

/** A read-model or channel-state call inside an activity, retried as `retrying` says. */
export const storeRetry = <T>(fn: () => Promise<T>): Promise<T> => retrying(fn, STORE_RETRY_MS);
