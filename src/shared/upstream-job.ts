// A job an upstream runs after its create call answered (video tasks, and image models whose
// provider answers later: fal, Replicate, DashScope): what the workflow keeps of it between checks.
// Pure types: the workflow value-imports nothing from here.

/** The upstream job a create call started. */
export interface UpstreamJob {
  upstreamId: string;
  /** The channel that accepted the job: every later check, download and cancel goes there. */
  channel?: string;
  /**
   * What the provider needs to find the job again beside its id, such as the status, result and
   * cancel URLs fal's submit answers. Short strings only: they travel in the workflow's history.
   */
  refs?: Record<string, string>;
  /** local provider: when the simulated render is done (epoch ms). */
  readyAtMs?: number;
  /** The create attempt's timing fields, for the records the workflow writes afterwards. */
  timing?: { started_at: number; attempts: number };
}

/** One output of a finished job, at the upstream (copied into Kiln's blob store by `fetch`). */
export interface JobOutput {
  url: string;
  fileType?: string;
  nodeId?: string;
}

/**
 * One look at the upstream job. A job that failed upstream is not a state: `check` throws the
 * UpstreamFailure that names its code.
 */
export type JobCheck = { state: 'running'; progress?: number } | { state: 'completed'; outputs?: JobOutput[] };

/** The longest one watch lasts: then the workflow records the job's progress and starts another. */
export const WATCH_WINDOW_MS = 5 * 60_000;

/** What the workflow hands a watch: when to look, until when, and how often a passing fault may repeat. */
export interface WatchPlan {
  pollIntervalMs: number;
  /** Epoch ms: the task's overall budget. */
  deadlineMs: number;
  /** The model's maxAttempts: consecutive checks that may fail on a passing fault. */
  attempts: number;
  /** The progress the task already shows (video). */
  progress?: number;
}

/**
 * The queue of job watches, beside the workflows' own (every worker serves it): a watch holds its
 * slot while the job runs, so watches must not take the slots of the model queues' upstream calls.
 */
export function watchQueue(workflowQueue: string): string {
  return `${workflowQueue}.watch`;
}

/**
 * How a watch ended. `running`: the job is not done; `timedOut` when the task's budget is spent
 * (the workflow ends it upstream_timeout), else the window closed or the worker is stopping.
 */
export type Watched = (JobCheck & { state: 'completed' }) | { state: 'running'; progress: number; timedOut?: boolean };

/**
 * The id Kiln gives the upstream request of a task's job, for upstreams that take one of the
 * caller's (ComfyUI's `prompt_id`, Kling's `external_task_id`): the task id (`task_<32 hex>`,
 * `video_<32 hex>`), so every attempt and every worker names the same request, and a lost answer
 * can be looked up. A provider whose upstream wants another shape maps it deterministically.
 */
export function kilnJobId(task: { id: string }): string {
  return task.id;
}
