// The long-poll answer (GET /v1/tasks/{id}?wait=N, batch and video waits): a waiter registered in
// the process's WaitRegistry (waits.ts) before the first read, then one read again after a change,
// the time, or the client's leaving.
import { KilnError } from '../shared/errors.js';
import { UNFINISHED_STATUSES, type TaskStatus } from '../shared/task.js';
import type { ViewText } from './poll.js';
import type { WaitAsk, WaitRegistry } from './waits.js';

/** What a read of the listed ids gives: null where not found (another owner's, unknown, malformed). */
export type ReadViews = (limited: boolean) => Promise<(ViewText | null)[]>;

/**
 * Answers a wait: registers a waiter, reads through the poll limiter (the only limited read), and
 * unless a task is finished or not found already, waits for a change, the time or the client's
 * disconnect, then reads again from Redis (never from the message). `applied`: the wait was
 * honoured (false without `ask`, or when the subscriber is down: answered at once).
 */
export async function longPoll(
  registry: WaitRegistry | undefined,
  ids: readonly string[],
  ask: WaitAsk | undefined,
  read: ReadViews,
  opts: { label?: (s: TaskStatus) => string; share?: string } = {},
): Promise<{ views: (ViewText | null)[]; applied: boolean }> {
  const label = opts.label ?? ((s: TaskStatus) => s);
  if (!ask || !registry?.ready) return { views: await read(true), applied: false };
  const w = registry.watch(ids, label);
  try {
    // Subscribed before the first read: a change after that read is always delivered.
    if (!(await registry.subscribed())) return { views: await read(true), applied: false };
    const first = await read(true).catch((err: unknown) => heldRead(err, read));
    if (first.some((v) => v === null || !UNFINISHED_STATUSES.includes(v.status)))
      return { views: first, applied: true };
    w.arm(new Map(ids.map((id, i) => [id, label(first[i]!.status)])));
    const why = await w.until(ask.seconds * 1000, ask.signal);
    // Nobody reads the answer of a client that left.
    if (why === 'aborted') return { views: first, applied: true };
    const again =
      why === 'changed' && opts.share !== undefined
        ? registry.shared(`${opts.share}\n${w.wokenBy}`, () => read(false))
        : read(false);
    return { views: await again, applied: true };
  } finally {
    w.release();
  }
}

/**
 * A wait the poll limiter refuses is held rather than refused while every listed task is unfinished:
 * a client woken by one change (accepted → queued, say) asks again at once, and a held request costs
 * one read per change or per N seconds, which is what the limiter is there to bound. With a listed
 * task finished or not found there is nothing to wait for, and the limiter's answer stands.
 */
async function heldRead(err: unknown, read: ReadViews): Promise<(ViewText | null)[]> {
  if (!(err instanceof KilnError) || err.code !== 'rate_limited') throw err;
  const views = await read(false);
  if (views.some((v) => v === null || !UNFINISHED_STATUSES.includes(v.status))) throw err;
  return views;
}
