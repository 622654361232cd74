// The provider contract: what an image or video provider implements. An upstream that answers
// within its request is one call (`generate`); one that answers later is a job (create, check,
// fetch, cancel) whose checks a job watch spaces out (activities/job-watch.ts). Video providers are jobs;
// an image provider is either, whichever its upstream speaks.
import type { ImageUpstream, VideoUpstream } from '../../src/config/models.js';
import type { GenerationResult, ImageTaskInput } from '../../src/shared/image-task.js';
import type { JobCheck, JobOutput, UpstreamJob } from '../../src/shared/upstream-job.js';
import type { VideoResult, VideoTaskInput } from '../../src/shared/video-task.js';
import type { Dispatching } from '../upstream-call.js';

/** One call of a task's provider on one channel. */
export interface ProviderCall<I, M> {
  input: I;
  /** The model's settings with those of the channel the call goes to over them. */
  model: M;
  /** The upstream key: the caller's (passthrough) or the configured one. */
  key?: string;
  /** Aborts on the model's per-call timeout or when Temporal cancels the attempt. */
  signal: AbortSignal;
}

/**
 * A job: `create` asks for the work, `check` looks at it, `fetch` copies the finished outputs into
 * Kiln's blob store (upstream links expire), `cancel` stops it. Only `create` may cost a second
 * execution: `dispatching` must be awaited right before its request can reach the upstream (it
 * makes `uncertain` decidable). `check`, `fetch` and `cancel` are reads, retried on passing faults.
 */
export interface JobProvider<C, F, X = object> {
  create(call: C & { dispatching: Dispatching }): Promise<UpstreamJob>;
  check(call: C & { job: UpstreamJob }): Promise<JobCheck>;
  fetch(call: C & { job: UpstreamJob; outputs: JobOutput[] } & X): Promise<F>;
  /** Stops the upstream job (the task was canceled); a provider whose upstream has no such call leaves it out. */
  cancel?(call: C & { job: UpstreamJob }): Promise<void>;
  /**
   * Finds the job a create sent, by the id Kiln gave it (`kilnJobId(input)`: ComfyUI's `prompt_id`,
   * Kling's `external_task_id`), when the create's answer was lost or its worker died after sending.
   * `found`: the job, which the task goes on with (no second create); `absent`: the upstream
   * answered and has no such request. Throws when the upstream cannot be asked. Providers whose
   * upstream takes no id of the caller's leave it out: a lost answer then ends the task `uncertain`.
   */
  lookup?(call: C): Promise<Lookup>;
}

export type Lookup = { found: UpstreamJob } | { absent: true };

export interface ImageCall extends ProviderCall<ImageTaskInput, ImageUpstream> {
  dispatching: Dispatching;
}

/** An image upstream that answers within its request. */
export interface ImageCallProvider {
  generate(call: ImageCall): Promise<GenerationResult>;
}

export type ImageJobCall = ProviderCall<ImageTaskInput, ImageUpstream>;
/** An image upstream that answers later: `fetch` answers with the images in Kiln's blob store. */
export type ImageJobProvider = JobProvider<ImageJobCall, GenerationResult>;

export type ImageProvider = ImageCallProvider | ImageJobProvider;

export function runsJobs(p: ImageProvider): p is ImageJobProvider {
  return 'create' in p;
}

export type VideoCall = ProviderCall<VideoTaskInput, VideoUpstream>;

export interface VideoFinished {
  video_url?: string;
  results?: VideoResult[];
}

/** `results`: the workflow-node form, which carries every output as `results[*].url`. */
export type VideoProvider = JobProvider<VideoCall, VideoFinished, { results: boolean }>;

/** The provider a channel names; a worker built without it says so rather than failing obscurely. */
export function providerFor<P>(providers: Partial<Record<string, P>>, name: string): P {
  const p = providers[name];
  if (!p) throw new Error(`provider ${name} is not available on this worker`);
  return p;
}
