// Activities: everything that touches Redis, the blob store or an upstream. Built by a factory so
// the worker (and tests) hand in their dependencies.
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { ImageModel } from '../../src/config.js';
import type { TaskStore } from '../../src/infra/store.js';
import { UNCERTAIN_FAILURE_TYPE } from '../../src/shared/errors.js';
import type { GenerationResult, ImageTaskInput, TaskRecord } from '../../src/shared/task.js';
import { TransportFailure, UpstreamFailure, type ImageProvider } from './types.js';

export interface ActivityDeps {
  store: TaskStore;
  models: ImageModel[];
  providers: Record<ImageModel['provider'], ImageProvider>;
}

interface DispatchMark { dispatched: boolean }

export function createActivities({ store, models, providers }: ActivityDeps) {
  const byId = new Map(models.map((m) => [m.id, m]));

  return {
    /**
     * Writes one transition to the read model (run as a local activity). True when it moved the
     * task forward: the first terminal write of a task is the one that counts it as finished.
     */
    async recordTransition(record: TaskRecord): Promise<boolean> {
      return store.transition(record);
    },

    /**
     * Asked (as a local activity) when the last attempt ended without an answer of its own — the
     * worker shut down or died mid-call, or retries ran out: whether a non-idempotent upstream may
     * have received the request, which makes the task uncertain rather than failed.
     */
    async mayHaveReachedUpstream(input: ImageTaskInput): Promise<boolean> {
      if (byId.get(input.model)?.idempotent) return false;
      return store.wasDispatched(input.id);
    },

    /** One upstream generation. Marks the task running, then calls the model's provider. */
    async generateImage(input: ImageTaskInput): Promise<GenerationResult> {
      const ctx = Context.current();
      const model = byId.get(input.model);
      if (!model) throw ApplicationFailure.nonRetryable(`model ${input.model} is not configured on this worker`, 'invalid_request');
      const attempt = ctx.info.attempt;
      if (attempt > 1 && !model.idempotent) {
        // The Redis mark is awaited before sending, unlike heartbeats, which are throttled and may be lost with the worker.
        if (await store.wasDispatched(input.id)) {
          throw ApplicationFailure.nonRetryable(
            'The request may have reached the upstream generator, but the attempt ended before its answer arrived; it is not resent because the upstream is not idempotent.',
            UNCERTAIN_FAILURE_TYPE,
          );
        }
      }
      await store.transition({ id: input.id, kind: 'image', owner: input.owner, model: input.model, status: 'running', created_at: input.created_at, finished_at: null, candidates: null, error: null });

      const timeout = AbortSignal.timeout(model.timeoutMs);
      const signal = AbortSignal.any([timeout, ctx.cancellationSignal]);
      // Heartbeats carry cancellation to the attempt and let Temporal notice a dead worker quickly.
      // Details are for operators (the Web UI shows them); the Redis mark is what decides uncertain.
      let details: DispatchMark = { dispatched: false };
      const beat = setInterval(() => ctx.heartbeat(details), Math.max(200, Math.floor(model.heartbeatTimeoutMs / 3)));
      try {
        return await providers[model.provider].generate({
          input, model, signal,
          dispatching: async () => {
            details = { dispatched: true };
            ctx.heartbeat(details);
            await store.markDispatched(input.id, attempt);
          },
        });
      } catch (err) {
        if (timeout.aborted) {
          throw ApplicationFailure.nonRetryable(`The upstream generator gave no final answer within ${model.timeoutMs} ms.`, 'upstream_timeout');
        }
        if (err instanceof TransportFailure && !err.dispatched) await store.clearDispatched(input.id);
        if (err instanceof UpstreamFailure) {
          // A retryable type outside TASK_FAILURE_CODES: once retries run out the workflow reports upstream_error.
          throw err.retryable ? ApplicationFailure.retryable(err.message, `${err.code}_retryable`) : ApplicationFailure.nonRetryable(err.message, err.code);
        }
        if (err instanceof TransportFailure && err.dispatched && !model.idempotent) {
          throw ApplicationFailure.nonRetryable(`${err.message} after the request was sent; the outcome cannot be confirmed.`, UNCERTAIN_FAILURE_TYPE);
        }
        throw err; // retryable: transport failure before dispatch, or an idempotent upstream
      } finally {
        clearInterval(beat);
      }
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
