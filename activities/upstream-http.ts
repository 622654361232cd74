// What a provider reports to the activity that called it, and the HTTP steps every provider takes
// the same way: sending (transport failures, with whether the request may have left) and reading JSON.
import type { TaskFailureCode } from '../src/shared/errors.js';
import { causeCode, notDispatched } from '../src/shared/upstream.js';

/** What an upstream's error answer says beyond its code: what a model's channels route on. */
export interface AnswerInfo {
  /** The HTTP status, when the answer had one of its own. */
  status?: number;
  /** An explicit refusal before any processing (429, 503, the channel's credential or balance). */
  refused?: boolean;
  /** A 429's Retry-After. */
  retryAfterMs?: number;
}

/**
 * A failure whose cause is known: it ends the task with this code, unless `retryable` (a 5xx from an
 * idempotent upstream), when Temporal retries the attempt first, or unless the model has another
 * channel to try (see activities/channel-router.ts).
 */
export class UpstreamFailure extends Error {
  constructor(
    readonly code: TaskFailureCode,
    message: string,
    readonly retryable = false,
    readonly info: AnswerInfo = {},
  ) {
    super(message);
    this.name = 'UpstreamFailure';
  }
  /** A passing fault: worth asking again when the request is a read (status checks, downloads). */
  get transient(): boolean {
    return false;
  }
}

/** A transport failure: `dispatched` says whether the request may have reached the upstream. */
export class TransportFailure extends Error {
  constructor(
    message: string,
    readonly dispatched: boolean,
  ) {
    super(message);
    this.name = 'TransportFailure';
  }
}

/** Sends the request and reads the whole answer; an abort (timeout, cancellation) is rethrown as is. */
export async function fetchText(
  url: string,
  init: RequestInit & { signal: AbortSignal },
): Promise<{ res: Response; text: string }> {
  try {
    const res = await fetch(url, init);
    return { res, text: await res.text() };
  } catch (err) {
    if (init.signal.aborted) throw err;
    const code = causeCode(err);
    throw new TransportFailure(`upstream connection failed (${code ?? (err as Error).message})`, !notDispatched(code));
  }
}

export function parseUpstreamJson<T = unknown>(text: string): T {
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new UpstreamFailure('upstream_error', 'upstream answered with a body that is not JSON');
  }
}
