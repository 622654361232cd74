// What chat calls need around the channel router (src/upstreams/channel-picker.ts) that task calls do
// not: the channel state as an API process should use it, and the caller's view of an upstream
// failure: a KilnError, the error every chat route answers with.
import { coolingSummary, type PickableChannel, type PickableModel } from '../upstreams/channel-picker.js';
import { TransportFailure, UpstreamFailure } from '../upstreams/failures.js';
import type { ChannelState } from '../channels/state.js';
import { KilnError } from '../shared/errors.js';

/**
 * The state of a ChatService built without one (tests, embedding): every channel always has room,
 * nothing is recorded, so a model routes by priority and weight alone.
 */
export const UNSHARED: ChannelState = {
  acquire: async () => ({ ok: true, probe: false }),
  release: async () => undefined,
  snapshot: () => Promise.reject(new Error('this chat service keeps no channel state')),
};

/**
 * The shared state only advises a chat call, unlike a task's, which can wait: when Redis cannot
 * answer, the call goes ahead as though its channel had room and lets the upstream decide, rather
 * than failing every chat request on a Redis outage. (Releases are best effort in the router.)
 */
export function lenient(state: ChannelState): ChannelState {
  return {
    acquire: (ref, holder, limits) => state.acquire(ref, holder, limits).catch(() => ({ ok: true, probe: false })),
    release: (ref, holder, limits, report) => state.release(ref, holder, limits, report),
    snapshot: (ref, limits, windowMs) => state.snapshot(ref, limits, windowMs),
  };
}

/** How a failed call reads to the caller; `timedOutAfterMs` is set when the channel's budget ran out. */
export function callerError(err: unknown, timedOutAfterMs: number | undefined, gone: boolean): unknown {
  if (err instanceof KilnError) return err;
  if (err instanceof UpstreamFailure) {
    const after = err.info.retryAfterMs;
    return new KilnError(err.code, err.message, after === undefined ? undefined : after / 1000);
  }
  if (err instanceof TransportFailure) return new KilnError('upstream_error', err.message);
  if (timedOutAfterMs !== undefined)
    return new KilnError('upstream_timeout', `The upstream gave no answer within ${timedOutAfterMs} ms.`);
  if (gone) return new KilnError('invalid_request', 'The client closed the connection.');
  return err;
}

/**
 * No channel of the model can take a call now (each is cooling down after refusals, or another
 * call probes it). Answered at once rather than waited out: a cool-down lasts seconds to minutes,
 * longer than a synchronous caller should sit on an open request, and its own retry policy
 * (with the Retry-After: the soonest end of a cool-down) does the waiting better.
 */
export async function noChannelError<C extends PickableChannel>(
  state: ChannelState,
  model: PickableModel<C>,
): Promise<KilnError> {
  const { soonestEndMs } = await coolingSummary(state, model, model.channels);
  return new KilnError(
    'upstream_rate_limited',
    `No channel of model ${model.id} can take a request now: each is cooling down after refusals ` +
      `(or being probed after one); retry later.`,
    soonestEndMs === undefined ? 1 : (soonestEndMs - Date.now()) / 1000,
  );
}
