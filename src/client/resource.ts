// Reads and cancels of one task-like resource (an image task, a video): the same request and the
// same poll hints whatever the resource.
import type { KilnCore } from './core.js';
import { retryAfterMs, waitApplied, waitRequest } from './core.js';

export type PollHints = { retryAfterMs?: number; waited?: boolean };

/** Adds the answer's Retry-After (`retryAfterMs`) and Preference-Applied (`waited`), not enumerable. */
export function withPollHints<T extends object>(data: T, response: Response): T & PollHints {
  const hint = retryAfterMs(response);
  if (hint !== undefined) Object.defineProperty(data, 'retryAfterMs', { value: hint, enumerable: false });
  if (waitApplied(response)) Object.defineProperty(data, 'waited', { value: true, enumerable: false });
  return data;
}

/** GET the resource; `wait` (1-60 s) asks the server to hold the answer until its status changes. */
export async function getResource<T extends object>(
  core: KilnCore,
  path: string,
  opts: { signal?: AbortSignal; wait?: number },
): Promise<T & PollHints> {
  // A poll is repeated by its caller anyway: no retries of its own.
  const { data, response } = await core.request<T>('GET', path, {
    signal: opts.signal,
    maxRetries: 0,
    ...waitRequest(opts.wait ?? 0),
  });
  return withPollHints(data, response);
}

/** POST `<path>/cancel`: idempotent, so the client's retries after a lost answer are safe. */
export async function cancelResource<T extends object>(
  core: KilnCore,
  path: string,
  opts: { signal?: AbortSignal },
): Promise<T & { retryAfterMs?: number }> {
  const { data, response } = await core.request<T>('POST', `${path}/cancel`, { signal: opts.signal });
  return withPollHints(data, response);
}

/** Submits, tells `onSubmitted`, then waits from the submit's time (the polling guidance counts from it). */
export async function createThenWait<S extends { id: string }, T, O extends { onSubmitted?: (created: S) => void }>(
  core: KilnCore,
  create: () => Promise<S>,
  wait: (id: string, opts: O & { submittedAt: number }) => Promise<T>,
  opts: O,
): Promise<T> {
  const submittedAt = core.clock.now();
  const created = await create();
  opts.onSubmitted?.(created);
  return wait(created.id, { ...opts, submittedAt });
}
