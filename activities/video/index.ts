// Video activities: create the upstream job, watch it (activities/job-watch.ts; one check at a time
// for workflows an older release started), copy the finished files into the blob store.
import type { VideoModel, VideoUpstream } from '../../src/config/models.js';
import { upstreamKey } from '../../src/shared/credentials.js';
import { VIDEO_CALL } from '../../src/shared/call-wording.js';
import type {
  VideoCheck,
  VideoJob,
  VideoOutput,
  VideoTaskInput,
  VideoTaskRecord,
} from '../../src/shared/video-task.js';
import { TERMINAL_STATUSES } from '../../src/shared/task.js';
import type { Closing } from '../../src/shared/closing.js';
import type { WatchPlan, Watched } from '../../src/shared/upstream-job.js';
import { keepTiming, kindUpstream, type KindDeps } from '../upstream-call.js';
import { providerFor, type VideoCall, type VideoFinished, type VideoProvider } from '../providers/contract.js';
import { finderOf } from '../lookup.js';
import { watchJob } from '../job-watch.js';

export interface VideoActivityDeps extends KindDeps<VideoModel, VideoProvider> {
  /** Configured upstream keys (`credential: {env}`), by variable name. */
  keys: Record<string, string>;
}

export interface VideoWatch extends VideoStep {
  plan: WatchPlan;
  /** The record the workflow holds: progress is written over it, starting from its own. */
  record: VideoTaskRecord;
}

export interface VideoStep {
  task: VideoTaskInput;
  job: VideoJob;
}

export function createVideoActivities(deps: VideoActivityDeps) {
  const { store, providers, keys } = deps;
  const upstream = kindUpstream(deps);

  const callOf = (input: VideoTaskInput, model: VideoUpstream, signal: AbortSignal): VideoCall => {
    const key = upstreamKey(model, input.credential, keys);
    return { input, model, signal, ...(key ? { key } : {}) };
  };

  /**
   * A status check, download or cancel, on the channel that accepted the job: the upstream's
   * 5xx/429/408 answers are retried by Temporal.
   */
  const read = <T>(
    input: VideoTaskInput,
    job: VideoJob,
    fn: (call: VideoCall, provider: VideoProvider) => Promise<T>,
  ): Promise<T> =>
    upstream.read(input, VIDEO_CALL, job.channel, (model, signal) =>
      fn(callOf(input, model, signal), providerFor(providers, model.provider)),
    );

  /** A watch cut off by the task's end (a cancel, the budget) wrote progress the workflow never saw. */
  const keepProgress = async (record: VideoTaskRecord): Promise<VideoTaskRecord> => {
    const stored = (await store.get(record.id).catch(() => null)) as VideoTaskRecord | null;
    return stored && stored.progress > record.progress ? { ...record, progress: stored.progress } : record;
  };
  const check = ({ task, job }: VideoStep): Promise<VideoCheck> =>
    read(task, job, (call, provider) => provider.check({ ...call, job }));

  return {
    /** Writes one transition of a video task to the read model (run as a local activity). */
    async recordVideoTransition(record: VideoTaskRecord): Promise<void> {
      if (!TERMINAL_STATUSES.includes(record.status)) {
        await store.transition(record);
        return;
      }
      // A create that never returned left its timing only in the stored record.
      const ended = await keepTiming(store, record);
      await store.transition(ended.status === 'succeeded' ? ended : await keepProgress(ended));
    },
    /** A local activity: see upstreamCalls. */
    videoMayHaveReachedUpstream: upstream.mayHaveReached,
    /** A local activity, asked when the owner cancels: see upstreamCalls. */
    videoUpstreamReach: upstream.reach,

    /** Starts the upstream job. Marks the task running; an attempt lost after sending is uncertain. */
    async createVideo(input: VideoTaskInput): Promise<VideoJob> {
      const r = input.request;
      const timing = await upstream.timing(input);
      const running = (channel: string) =>
        store.transition({
          id: input.id,
          kind: 'video',
          owner: input.owner,
          model: input.model,
          status: 'running',
          progress: 0,
          prompt: r.prompt,
          seconds: r.seconds,
          size: r.size,
          created_at: input.created_at,
          completed_at: null,
          error: null,
          ...timing,
          channel,
        });
      const sent = await upstream.send(
        input,
        VIDEO_CALL,
        running,
        (model, signal, dispatching) =>
          providerFor(providers, model.provider).create({ ...callOf(input, model, signal), dispatching }),
        { finder: finderOf(providers, (model, signal) => callOf(input, model, signal)) },
      );
      // The workflow keeps the timing and channel in the records it writes next (progress, outcome).
      return { ...sent.value, channel: sent.channel, timing };
    },

    /**
     * The task was canceled: stops the upstream job where the provider has a cancel call (`stopped`),
     * and says who canceled.
     */
    async cancelVideo({ task, job }: VideoStep): Promise<{ stopped: boolean; closing: Closing }> {
      const closing = await upstream.origin();
      const stopped = await read(task, job, async (call, provider) => {
        if (!provider.cancel) return false;
        await provider.cancel({ ...call, job });
        return true;
      });
      return { stopped, closing };
    },

    /** One look at the upstream job (a read: safe to retry). */
    async checkVideo(step: VideoStep): Promise<VideoCheck> {
      return check(step);
    },

    /** Checks the job every pollIntervalMs, writing its progress to the read model, until it completes. */
    async watchVideo({ task, job, plan, record }: VideoWatch): Promise<Watched> {
      // The record's progress is where the watch starts: it never writes less.
      return watchJob(
        { ...plan, progress: record.progress },
        {
          taskId: task.id,
          feed: upstream.cancels,
          stopping: deps.stopping,
          check: () => check({ task, job }),
          progressed: (progress) => store.transition({ ...record, progress }).then(() => undefined),
        },
      );
    },

    /** Copies the finished video (and, workflow-node, every output) into the blob store. */
    async fetchVideo({
      task,
      job,
      outputs,
      results,
    }: VideoStep & { outputs: VideoOutput[]; results: boolean }): Promise<VideoFinished> {
      return read(task, job, (call, provider) => provider.fetch({ ...call, job, outputs, results }));
    },
  };
}

export type VideoActivities = ReturnType<typeof createVideoActivities>;
