// Image models whose provider answers later (fal, Replicate, DashScope): the task creates the
// upstream job, one activity watches it (activities/job-watch.ts; workflows/image-job.ts), and the
// finished images are copied into Kiln's blob store and recorded `succeeded` by the fetch itself.
import type { ImageModel, ImageUpstream } from '../../src/config/models.js';
import type { ImageTaskInput, ImageTaskRecord } from '../../src/shared/image-task.js';
import { IMAGE_CALL } from '../../src/shared/call-wording.js';
import { upstreamKey } from '../../src/shared/credentials.js';
import type { Closing } from '../../src/shared/closing.js';
import type { JobCheck, JobOutput, UpstreamJob, WatchPlan, Watched } from '../../src/shared/upstream-job.js';
import type { TaskStore } from '../../src/tasks/store/task-store.js';
import { settle, type Settled } from '../read-model.js';
import type { kindUpstream } from '../upstream-call.js';
import {
  providerFor,
  runsJobs,
  type ImageJobCall,
  type ImageJobProvider,
  type ImageProvider,
} from '../providers/contract.js';
import { finderOf } from '../lookup.js';
import { watchJob } from '../job-watch.js';
import { runningRecord, succeededRecord } from './records.js';

/** What an attempt that ends the task answers: its final record, and whether the read model holds it. */
export interface ImageDone extends Settled {
  /** False when the `succeeded` write failed (Redis unreachable): the workflow writes it then. */
  recorded: boolean;
}

export interface ImageJobStep {
  task: ImageTaskInput;
  job: UpstreamJob;
}

export interface ImageJobWatch extends ImageJobStep {
  plan: WatchPlan;
}

/**
 * Records `succeeded`. Redis unreachable now must not cost the images (a retry would generate them
 * again, or end a non-idempotent task uncertain): the workflow records them then, with its retries.
 */
export function recordSucceeded(store: TaskStore, record: ImageTaskRecord): Promise<ImageDone> {
  return settle(store, record).then(
    (settled) => ({ ...settled, recorded: true }),
    () => ({ record, recorded: false, written: false }),
  );
}

export function imageJobActivities(
  store: TaskStore,
  providers: Partial<Record<string, ImageProvider>>,
  keys: Record<string, string>,
  upstream: ReturnType<typeof kindUpstream<ImageModel>>,
  stopping?: AbortSignal,
) {
  const jobProvider = (name: string): ImageJobProvider => {
    const p = providerFor(providers, name);
    if (!runsJobs(p)) throw new Error(`${name} answers within its call: its tasks take the one-call path`);
    return p;
  };
  const callOf = (input: ImageTaskInput, model: ImageUpstream, signal: AbortSignal): ImageJobCall => {
    const key = upstreamKey(model, input.credential, keys);
    return { input, model, signal, ...(key ? { key } : {}) };
  };
  /** A check, download or cancel on the channel that accepted the job: passing faults are retried. */
  const read = <T>(
    input: ImageTaskInput,
    job: UpstreamJob,
    fn: (call: ImageJobCall, provider: ImageJobProvider) => Promise<T>,
  ): Promise<T> =>
    upstream.read(input, IMAGE_CALL, job.channel, (model, signal) =>
      fn(callOf(input, model, signal), jobProvider(model.provider)),
    );

  const check = ({ task, job }: ImageJobStep): Promise<JobCheck> =>
    read(task, job, (call, provider) => provider.check({ ...call, job }));

  return {
    /** Starts the upstream job. Marks the task running; an attempt lost after sending is uncertain. */
    async createImageJob(input: ImageTaskInput): Promise<UpstreamJob> {
      const timing = await upstream.timing(input);
      const sent = await upstream.send(
        input,
        IMAGE_CALL,
        (channel) => store.transition(runningRecord(input, timing, channel)),
        (model, signal, dispatching) =>
          jobProvider(model.provider).create({ ...callOf(input, model, signal), dispatching }),
        { finder: finderOf(providers, (model, signal) => callOf(input, model, signal)) },
      );
      return { ...sent.value, channel: sent.channel, timing };
    },

    /** One look at the upstream job (a read: safe to retry); workflows an older release started. */
    async checkImageJob(step: ImageJobStep): Promise<JobCheck> {
      return check(step);
    },

    /** Checks the job every pollIntervalMs until it completes (activities/job-watch.ts). */
    async watchImageJob({ task, job, plan }: ImageJobWatch): Promise<Watched> {
      return watchJob(plan, { taskId: task.id, feed: upstream.cancels, stopping, check: () => check({ task, job }) });
    },

    /** Copies the finished images into the blob store and records `succeeded` with them. */
    async fetchImageJob({ task, job, outputs }: ImageJobStep & { outputs: JobOutput[] }): Promise<ImageDone> {
      const result = await read(task, job, (call, provider) => provider.fetch({ ...call, job, outputs }));
      return recordSucceeded(store, succeededRecord(task, result, job.timing, job.channel));
    },

    /** The task was canceled: stops the upstream job where the provider can (`stopped`), and says who. */
    async cancelImageJob({ task, job }: ImageJobStep): Promise<{ stopped: boolean; closing: Closing }> {
      const closing = await upstream.origin();
      const stopped = await read(task, job, async (call, provider) => {
        if (!provider.cancel) return false;
        await provider.cancel({ ...call, job });
        return true;
      });
      return { stopped, closing };
    },
  };
}
