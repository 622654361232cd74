// Lookup instead of `uncertain`: a create whose answer was lost (or whose worker died after sending)
// is looked up at the upstream by the id Kiln gave it, for providers whose upstream takes one
// (ComfyUI's prompt_id, Kling's external_task_id). Found: the task goes on with that job, no second
// create. Certainly absent (the upstream answered, twice, a few seconds apart, without it): it was
// never received, so it is created once. Unreachable: asked again with backoff within a bound,
// then the task ends `uncertain`. Never two executions.
import { abortableSleep } from '../src/shared/abortable-sleep.js';
import { TransportFailure } from '../src/upstreams/failures.js';

/** What a lookup answers: the job, or that the upstream has no request with Kiln's id. */
export type Found<T> = { found: T } | { absent: true };

/** How long apart the two lookups that must both miss are, and how an unreachable upstream is retried. */
export const LOOKUP = { confirmAfterMs: 2000, retries: 4, firstRetryMs: 500, maxRetryMs: 4000 } as const;

/** Creates that may be sent for one attempt: the first, and one per lookup that found the upstream without it. */
const MAX_CREATES = 3;

/** The lookup could not reach the upstream within its bound: whether the request arrived stays unknown. */
export class LookupFailed extends Error {
  constructor(readonly cause: unknown) {
    super(`the upstream could not be asked whether it has the request (${(cause as Error)?.message ?? cause})`);
    this.name = 'LookupFailed';
  }
}

export interface Findable<T> {
  create: () => Promise<T>;
  find: () => Promise<Found<T>>;
  signal: AbortSignal;
  /** An earlier attempt may have sent the create (its dispatch mark is set): look it up first. */
  findFirst: boolean;
}

/**
 * The create, with a lookup wherever its outcome is unknown. Throws the create's own failure, or
 * LookupFailed when the upstream cannot be asked (the caller ends the task uncertain).
 */
export async function createOrFind<T>(f: Findable<T>): Promise<T> {
  if (f.findFirst) {
    const r = await lookUp(f.find, f.signal);
    if ('found' in r) return r.found;
  }
  for (let creates = 1; ; creates++) {
    try {
      return await f.create();
    } catch (err) {
      const lost = err instanceof TransportFailure && err.dispatched && !f.signal.aborted;
      if (!lost || creates >= MAX_CREATES) throw err;
      const r = await lookUp(f.find, f.signal);
      if ('found' in r) return r.found;
    }
  }
}

/** Found, or certainly absent: two answers without it, `confirmAfterMs` apart. Throws LookupFailed. */
async function lookUp<T>(find: () => Promise<Found<T>>, signal: AbortSignal): Promise<Found<T>> {
  let misses = 0;
  let failures = 0;
  for (;;) {
    let r: Found<T>;
    try {
      r = await find();
    } catch (err) {
      if (signal.aborted) throw err;
      if (failures >= LOOKUP.retries) throw new LookupFailed(err);
      await abortableSleep(Math.min(LOOKUP.maxRetryMs, LOOKUP.firstRetryMs * 2 ** failures++), signal);
      continue;
    }
    if ('found' in r || ++misses >= 2) return r;
    await abortableSleep(LOOKUP.confirmAfterMs, signal);
  }
}

/**
 * The lookup of a create on a channel whose provider can find one by Kiln's id (createOrFind);
 * undefined for the others.
 */
export function finderOf<M extends { provider: string }, C, T>(
  providers: Partial<Record<string, object>>,
  callOf: (model: M, signal: AbortSignal) => C,
) {
  return (model: M, signal: AbortSignal) => {
    const p = providers[model.provider] as { lookup?: (call: C) => Promise<Found<T>> } | undefined;
    if (!p?.lookup) return undefined;
    return () => p.lookup!(callOf(model, signal));
  };
}
