// How an attempt heartbeats while it waits for a channel or a slot, or calls its upstream. A
// heartbeat does two jobs: it tells Temporal the worker lives (within the activity's heartbeat
// timeout), and its answer carries a cancel to the attempt. Each one is a write of the workflow's
// state in Temporal, so an attempt beats quietly (a third of its heartbeat timeout) and quickens to
// every HEARTBEAT_EVERY_MS once a cancel notice for its task arrives (activities/cancel-notices.ts),
// or whenever the notice feed cannot hear one (Redis down, a worker built without the feed).
import type { Context } from '@temporalio/activity';
import type { CancelFeed } from './cancel-notices.js';

/** The gap between heartbeats once a cancel may be pending, and the workers' heartbeat throttle. */
export const HEARTBEAT_EVERY_MS = 400;

/** The activity's heartbeat timeout when it set none (the model default, src/config/models.ts). */
const DEFAULT_HEARTBEAT_TIMEOUT_MS = 10_000;

/** The gaps an attempt with this heartbeat timeout beats at: quiet, and once a cancel may be pending. */
export function beatGaps(heartbeatTimeoutMs = DEFAULT_HEARTBEAT_TIMEOUT_MS): { quiet: number; pending: number } {
  const pending = Math.max(200, Math.min(HEARTBEAT_EVERY_MS, Math.floor(heartbeatTimeoutMs / 3)));
  return { quiet: Math.max(pending, Math.floor(heartbeatTimeoutMs / 3)), pending };
}

/**
 * Heartbeats for `taskId`'s attempt until the returned stop is called. The first beat waits for its
 * gap too: an attempt that ends sooner costs Temporal no heartbeat. `details`: what each beat carries
 * (the Web UI shows them). A local activity (an inline call) has no heartbeat: Core delivers its cancel.
 */
export function heartbeating(
  ctx: Context,
  taskId: string,
  feed: CancelFeed | undefined,
  details: () => unknown = () => undefined,
): () => void {
  if (ctx.info.isLocal) return () => undefined;
  // 0 or unset: no heartbeat timeout on the activity; beat as for the model default.
  const gaps = beatGaps(ctx.info.heartbeatTimeoutMs || undefined);
  const beat = () => ctx.heartbeat(details());
  let pending = false;
  let timer: NodeJS.Timeout | undefined;
  const quicken = (now: boolean) => {
    if (pending) return;
    pending = true;
    clearInterval(timer);
    if (now) beat();
    timer = setInterval(beat, gaps.pending);
  };
  if (!feed?.listening) quicken(false);
  else
    timer = setInterval(() => {
      if (feed.listening) beat();
      else quicken(true);
    }, gaps.quiet);
  const unwatch = feed?.watch(taskId, () => quicken(true));
  return () => {
    clearInterval(timer);
    unwatch?.();
  };
}
