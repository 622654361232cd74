// The provider contract: what an image or video provider implements. An image provider answers
// within its call; a video provider runs a job (create, check, fetch, cancel) whose checks the
// workflow spaces out on durable timers.
import type { ImageUpstream, VideoUpstream } from '../../src/config/models.js';
import type { GenerationResult, ImageTaskInput } from '../../src/shared/image-task.js';
import type { VideoCheck, VideoJob, VideoOutput, VideoResult, VideoTaskInput } from '../../src/shared/video-task.js';
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

export interface VideoCall {
  input: VideoTaskInput;
  /** The model's settings with those of the channel the call goes to over them. */
  model: VideoUpstream;
  /** The upstream key: the caller's (passthrough) or the configured one. */
  key?: string;
  /** Aborts on the model's per-call timeout or when Temporal cancels the attempt. */
  signal: AbortSignal;
}

export interface VideoFinished {
  video_url?: string;
  results?: VideoResult[];
}

/** One provider speaks one upstream's create / check / fetch; the workflow waits between checks. */
export interface VideoProvider {
  /**
   * `dispatching` must be awaited right before the create request can reach the upstream (it makes `uncertain`
   * decidable).
   */
  create(call: VideoCall & { dispatching: Dispatching }): Promise<VideoJob>;
  check(call: VideoCall & { job: VideoJob }): Promise<VideoCheck>;
  /** Copies the finished outputs into Kiln's blob store, so links never expire with the upstream's. */
  fetch(call: VideoCall & { job: VideoJob; outputs: VideoOutput[]; results: boolean }): Promise<VideoFinished>;
  /** Stops the upstream job (the owner canceled the task); providers whose upstream has no such call leave it out. */
  cancel?(call: VideoCall & { job: VideoJob }): Promise<void>;
}
