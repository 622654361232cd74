// Video activities: create the upstream job, check it, copy the finished files into the blob store.
// Waiting between checks is the workflow's (durable timers), never an activity's.
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { VideoModel } from '../../src/config.js';
import type { TaskStore } from '../../src/infra/store.js';
import { UNCERTAIN_FAILURE_TYPE } from '../../src/shared/errors.js';
import type { VideoCheck, VideoJob, VideoOutput, VideoTaskInput, VideoTaskRecord } from '../../src/shared/video.js';
import { TransportFailure, UpstreamFailure } from '../image/types.js';
import { HttpStatusFailure } from './http.js';
import type { VideoCall, VideoFinished, VideoProvider } from './types.js';

export interface VideoActivityDeps {
  store: TaskStore;
  models: VideoModel[];
  providers: Record<VideoModel['provider'], VideoProvider>;
  /** Configured upstream keys (`credential: {env}`), by model id. */
  configuredKey(modelId: string): string | undefined;
}

export interface VideoStep { task: VideoTaskInput; job: VideoJob }

export function createVideoActivities({ store, models, providers, configuredKey }: VideoActivityDeps) {
  const byId = new Map(models.map((m) => [m.id, m]));

  const modelOf = (input: VideoTaskInput): VideoModel => {
    const model = byId.get(input.model);
    if (!model) throw ApplicationFailure.nonRetryable(`model ${input.model} is not configured on this worker`, 'invalid_request');
    return model;
  };

  /**
   * Runs one upstream call with the model's per-call timeout, heartbeats (cancellation and dead-worker
   * detection) and Kiln's failure mapping. Failures not mapped here are retried by Temporal; so
   * are a read's 5xx/429/408 answers (a long job must not end on one bad status check).
   */
  async function upstream<T>(input: VideoTaskInput, fn: (call: VideoCall, beat: (d: unknown) => void) => Promise<T>, read = false): Promise<T> {
    const ctx = Context.current();
    const model = modelOf(input);
    const timeout = AbortSignal.timeout(model.timeoutMs);
    const signal = AbortSignal.any([timeout, ctx.cancellationSignal]);
    let details: unknown = undefined;
    const beat = setInterval(() => ctx.heartbeat(details), Math.max(200, Math.floor(model.heartbeatTimeoutMs / 3)));
    const key = model.credential === 'passthrough' ? input.credential : typeof model.credential === 'object' ? configuredKey(model.id) : undefined;
    try {
      return await fn({ input, model, signal, ...(key ? { key } : {}) }, (d) => { details = d; ctx.heartbeat(d); });
    } catch (err) {
      if (timeout.aborted) {
        throw ApplicationFailure.nonRetryable(`The upstream gave no answer within ${model.timeoutMs} ms.`, 'upstream_timeout');
      }
      if (read && err instanceof HttpStatusFailure && err.transient) throw ApplicationFailure.retryable(err.message, 'upstream_transient');
      if (err instanceof UpstreamFailure) throw ApplicationFailure.nonRetryable(err.message, err.code);
      throw err;
    } finally {
      clearInterval(beat);
    }
  }

  return {
    /** Writes one transition of a video task to the read model (run as a local activity). */
    async recordVideoTransition(record: VideoTaskRecord): Promise<void> {
      await store.transition(record);
    },

    /** As for images: whether a non-idempotent upstream may have received the create request. */
    async videoMayHaveReachedUpstream(input: VideoTaskInput): Promise<boolean> {
      if (byId.get(input.model)?.idempotent) return false;
      return store.wasDispatched(input.id);
    },

    /** Starts the upstream job. Marks the task running; an attempt lost after sending is uncertain. */
    async createVideo(input: VideoTaskInput): Promise<VideoJob> {
      const model = modelOf(input);
      const attempt = Context.current().info.attempt;
      if (attempt > 1 && !model.idempotent && await store.wasDispatched(input.id)) {
        throw ApplicationFailure.nonRetryable(
          'The create request may have reached the upstream, but the attempt ended before its answer arrived; it is not resent because the upstream is not idempotent.',
          UNCERTAIN_FAILURE_TYPE,
        );
      }
      const r = input.request;
      await store.transition({
        id: input.id, kind: 'video', owner: input.owner, model: input.model, status: 'running', progress: 0,
        prompt: r.prompt, seconds: r.seconds, size: r.size, created_at: input.created_at, completed_at: null, error: null,
      });
      try {
        return await upstream(input, (call, beat) => providers[model.provider].create({
          ...call,
          dispatching: async () => {
            beat({ dispatched: true });
            await store.markDispatched(input.id, attempt);
          },
        }));
      } catch (err) {
        if (err instanceof TransportFailure && !err.dispatched) await store.clearDispatched(input.id);
        if (err instanceof TransportFailure && err.dispatched && !model.idempotent) {
          throw ApplicationFailure.nonRetryable(`${err.message} after the create request was sent; the outcome cannot be confirmed.`, UNCERTAIN_FAILURE_TYPE);
        }
        throw err;
      }
    },

    /** One look at the upstream job (a read: safe to retry). */
    async checkVideo({ task, job }: VideoStep): Promise<VideoCheck> {
      return upstream(task, (call) => providers[modelOf(task).provider].check({ ...call, job }), true);
    },

    /** Copies the finished video (and, workflow-node, every output) into the blob store. */
    async fetchVideo({ task, job, outputs, results }: VideoStep & { outputs: VideoOutput[]; results: boolean }): Promise<VideoFinished> {
      return upstream(task, (call) => providers[modelOf(task).provider].fetch({ ...call, job, outputs, results }), true);
    },
  };
}

export type VideoActivities = ReturnType<typeof createVideoActivities>;
