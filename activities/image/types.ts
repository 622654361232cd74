import type { ImageModel } from '../../src/config.js';
import type { GenerationResult, ImageTaskInput } from '../../src/shared/task.js';

export interface ImageCall {
  input: ImageTaskInput;
  model: ImageModel;
  /** Aborts on the model's timeout or when Temporal cancels the attempt. */
  signal: AbortSignal;
  /** Must be awaited right before the request can reach the upstream: it makes `uncertain` decidable. */
  dispatching(): Promise<void>;
}

export interface ImageProvider {
  generate(call: ImageCall): Promise<GenerationResult>;
}

/**
 * A failure whose cause is known: it ends the task with this code, unless `retryable` (a 5xx from an
 * idempotent upstream), when Temporal retries the attempt first.
 */
export class UpstreamFailure extends Error {
  constructor(readonly code: import('../../src/shared/errors.js').TaskFailureCode, message: string, readonly retryable = false) {
    super(message);
    this.name = 'UpstreamFailure';
  }
}

/** A transport failure: `dispatched` says whether the request may have reached the upstream. */
export class TransportFailure extends Error {
  constructor(message: string, readonly dispatched: boolean) {
    super(message);
    this.name = 'TransportFailure';
  }
}
