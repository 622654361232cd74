import type { ImageModel } from '../../src/config.js';
import type { GenerationResult, ImageTaskInput } from '../../src/shared/image-task.js';
import type { Dispatching } from '../upstream-call.js';

export interface ImageCall {
  input: ImageTaskInput;
  model: ImageModel;
  /** Aborts on the model's timeout or when Temporal cancels the attempt. */
  signal: AbortSignal;
  dispatching: Dispatching;
}

export interface ImageProvider {
  generate(call: ImageCall): Promise<GenerationResult>;
}
