import type { ImageUpstream } from '../../src/config/env.js';
import type { GenerationResult, ImageTaskInput } from '../../src/shared/image-task.js';
import type { Dispatching } from '../upstream-call.js';

export interface ImageCall {
  input: ImageTaskInput;
  /** The model's settings with those of the channel the call goes to over them. */
  model: ImageUpstream;
  /** Aborts on the model's timeout or when Temporal cancels the attempt. */
  signal: AbortSignal;
  dispatching: Dispatching;
}

export interface ImageProvider {
  generate(call: ImageCall): Promise<GenerationResult>;
}
