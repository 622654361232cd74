// What a provider reports when an upstream call fails: the answer's Kiln code with what routing needs
// (refused before processing, Retry-After), or a transport failure with whether the request may have
// left. Pure module (no I/O): the failover decision (failover.ts) reads these in API and worker alike.
import type { TaskFailureCode } from '../shared/errors.js';

/** What an upstream's error answer says beyond its code: what a model's channels are picked by. */
export interface AnswerInfo {
  /** The HTTP status, when the answer had one of its own. */
  status?: number;
  /** An explicit refusal before any processing (429, 503, the channel's credential or balance). */
  refused?: boolean;
  /** A refusal's Retry-After (429, 503). */
  retryAfterMs?: number;
}

/**
 * A failure whose cause is known: it ends the task with this code, unless `retryable` (a 5xx from an
 * idempotent upstream), when Temporal retries the attempt first, or unless the model has another
 * channel to try (failover.ts).
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
