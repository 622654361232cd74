// The one way an activity calls an upstream (image generation, video create / check / fetch): the
// model's per-call timeout, heartbeats, the Redis dispatch mark, and how a failure ends the attempt
// (a task failure code, `uncertain`, or a retry by Temporal).
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { TaskStore } from '../src/tasks/store/task-store.js';
import type { AnyTaskRecord } from '../src/shared/records.js';
import { ALREADY_ENDED_FAILURE_TYPE, UNCERTAIN_FAILURE_TYPE } from '../src/shared/errors.js';
import { TERMINAL_STATUSES } from '../src/shared/task.js';
import { notResent, type CallWording } from '../src/shared/upstream.js';
import type { Closing, Reach } from '../src/shared/closing.js';
import type { CancelOrigin } from './cancel-origin.js';
import { retrying, STORE_RETRY_MS } from './retrying.js';
import { TransportFailure, UpstreamFailure } from './upstream-http.js';

/** Longest gap between an upstream call's heartbeats, and the workers' heartbeat throttle. */
export const HEARTBEAT_EVERY_MS = 400;

/** What a call needs of its model (image or video). */
export interface UpstreamModel {
  timeoutMs: number;
  heartbeatTimeoutMs: number;
  idempotent: boolean;
}

type DispatchStore = Pick<TaskStore, 'wasDispatched' | 'markDispatched' | 'clearDispatched' | 'get'>;

/** The timing extension fields an attempt records: when the first attempt began, and this attempt's number. */
export interface Timing {
  started_at: number;
  attempts: number;
}

/** How far a canceled task's upstream call got, and who canceled it (see `reach`). */
export interface ReachAnswer {
  reach: Reach;
  closing: Closing;
}

/** A terminal record the workflow built without the timing fields gets the ones the attempts stored. */
export async function keepTiming<R extends AnyTaskRecord>(store: Pick<TaskStore, 'get'>, record: R): Promise<R> {
  if (record.started_at != null) return record;
  const stored = (await store.get(record.id).catch(() => null)) as AnyTaskRecord | null;
  if (stored?.started_at == null) return record;
  return { ...record, started_at: stored.started_at, attempts: stored.attempts };
}

/** Heartbeat details: for operators (the Web UI shows them); the Redis mark is what decides uncertain. */
interface DispatchMark {
  dispatched: boolean;
}

/** Must be awaited right before the request can reach the upstream: it makes `uncertain` decidable. */
export type Dispatching = () => Promise<void>;

/** A task as the calls see it: its id and its model's id. */
interface TaskRef {
  id: string;
  model: string;
}

/** Upstream calls for the tasks of a worker's `models` (one kind: image or video). */
export function upstreamCalls<M extends UpstreamModel & { id: string }>(
  redisStore: DispatchStore,
  models: M[],
  origin: CancelOrigin,
) {
  // Heartbeats go on while a call waits for Redis, so the wait does not look like a dead worker.
  const patient = <T>(fn: () => Promise<T>) =>
    retrying(fn, STORE_RETRY_MS, () => {
      // Local activities (mayHaveReached) have no heartbeat.
      const ctx = Context.current();
      if (!ctx.info.isLocal) ctx.heartbeat();
    });
  const store: DispatchStore = {
    wasDispatched: (id) => patient(() => redisStore.wasDispatched(id)),
    markDispatched: (id, attempt) => patient(() => redisStore.markDispatched(id, attempt)),
    clearDispatched: (id) => patient(() => redisStore.clearDispatched(id)),
    get: (id) => patient(() => redisStore.get(id)),
  };
  const byId = new Map(models.map((m) => [m.id, m]));
  const modelOf = (id: string): M => {
    const model = byId.get(id);
    if (!model)
      throw ApplicationFailure.nonRetryable(`model ${id} is not configured on this worker`, 'invalid_request');
    return model;
  };

  return {
    /**
     * Asked (as a local activity) when the last attempt ended without an answer of its own — the
     * worker shut down or died mid-call, or retries ran out: whether a non-idempotent upstream may
     * have received the request, which makes the task uncertain rather than failed.
     */
    async mayHaveReached(task: TaskRef): Promise<boolean> {
      if (byId.get(task.model)?.idempotent) return false;
      return store.wasDispatched(task.id);
    },

    /**
     * Asked (as a local activity) when the task is canceled: whether a request was sent (the Redis
     * dispatch mark), whether the upstream may bill for it regardless, and who asked (its owner or
     * an operator: Temporal's cancel request says).
     */
    async reach(task: TaskRef): Promise<ReachAnswer> {
      const closing = await origin();
      if (!(await store.wasDispatched(task.id))) return { reach: 'not_sent', closing };
      return { reach: byId.get(task.model)?.idempotent ? 'sent' : 'sent_not_idempotent', closing };
    },

    /**
     * This attempt's timing fields: the first attempt's start is kept through retries, so
     * `started_at` says when the upstream call began and `attempts` how many were made.
     */
    async timing(task: TaskRef, known?: AnyTaskRecord | null): Promise<Timing> {
      const { attempt, isLocal } = Context.current().info;
      const now = Math.floor(Date.now() / 1000);
      if (attempt === 1 && !isLocal) return { started_at: now, attempts: attempt };
      const stored = known !== undefined ? known : ((await store.get(task.id)) as AnyTaskRecord | null);
      // A local activity whose worker died starts over at attempt 1: count on from the stored attempt.
      const attempts =
        isLocal && stored?.status === 'running' && stored.attempts ? Math.max(attempt, stored.attempts + 1) : attempt;
      return { started_at: stored?.started_at ?? now, attempts };
    },

    /**
     * A call that asks the upstream to do something (generate, create). `started` runs once the
     * attempt may go ahead (it marks the task running); an attempt that may already have reached a
     * non-idempotent upstream, or that loses its answer after sending, ends the task uncertain.
     * `claim` (a slot of the model's) runs after that check and before `started`.
     */
    async send<T>(
      task: TaskRef,
      wording: CallWording,
      started: () => Promise<unknown>,
      call: (model: M, signal: AbortSignal, dispatching: Dispatching) => Promise<T>,
      opts: { claim?: () => Promise<void>; stored?: AnyTaskRecord | null } = {},
    ): Promise<T> {
      const model = modelOf(task.model);
      const { attempt, isLocal } = Context.current().info;
      // Every attempt asks, the first too: an operator's reset of the workflow starts the call over at
      // attempt 1 (as does a local activity whose worker died), and the read model is what remembers.
      const stored = opts.stored !== undefined ? opts.stored : ((await store.get(task.id)) as AnyTaskRecord | null);
      if (stored && TERMINAL_STATUSES.includes(stored.status)) {
        throw ApplicationFailure.create({
          message: `The task already ended ${stored.status}; its ${wording.request} is not sent again.`,
          type: ALREADY_ENDED_FAILURE_TYPE,
          nonRetryable: true,
          details: [stored],
        });
      }
      // A retry that finds no record at all: Redis lost it, and the dispatch mark with it, so
      // whether an earlier attempt sent the request cannot be known.
      if (attempt > 1 && stored === null && !model.idempotent) {
        throw ApplicationFailure.nonRetryable(
          notResent(wording, 'its record (with the mark of what was sent) was lost from the read model'),
          UNCERTAIN_FAILURE_TYPE,
        );
      }
      // The Redis mark is awaited before sending, unlike heartbeats, which are throttled and may be
      // lost with the worker. Only an attempt after a `running` write can find it set.
      const mayHaveSent = attempt > 1 || isLocal || stored?.status === 'running';
      if (mayHaveSent && !model.idempotent && (await store.wasDispatched(task.id))) {
        throw ApplicationFailure.nonRetryable(
          notResent(wording, 'the attempt ended before its answer arrived'),
          UNCERTAIN_FAILURE_TYPE,
        );
      }
      await opts.claim?.();
      await patient(started);
      return underBudget(
        model,
        wording,
        { dispatched: false },
        (signal, beat) =>
          call(model, signal, async () => {
            beat({ dispatched: true });
            await store.markDispatched(task.id, attempt);
          }),
        async (err) => {
          if (!(err instanceof TransportFailure)) return;
          if (!err.dispatched) await store.clearDispatched(task.id);
          else if (!model.idempotent) {
            throw ApplicationFailure.nonRetryable(
              `${err.message} after the ${wording.request} was sent; the outcome cannot be confirmed.`,
              UNCERTAIN_FAILURE_TYPE,
            );
          }
        },
      );
    },

    /** A read (status check, download): safe to repeat, so a long job does not end on one passing fault. */
    async read<T>(
      task: TaskRef,
      wording: CallWording,
      call: (model: M, signal: AbortSignal) => Promise<T>,
    ): Promise<T> {
      const model = modelOf(task.model);
      return underBudget(
        model,
        wording,
        undefined,
        (signal) => call(model, signal),
        async (err) => {
          if (err instanceof UpstreamFailure && err.transient)
            throw ApplicationFailure.retryable(err.message, 'upstream_transient');
        },
      );
    },
  };
}

/**
 * Runs `run` within the model's timeout and Temporal's cancellation, heartbeating meanwhile. `map`
 * may turn a failure into the attempt's outcome first; failures mapped by no one are retried.
 */
async function underBudget<T>(
  model: UpstreamModel,
  wording: CallWording,
  initial: DispatchMark | undefined,
  run: (signal: AbortSignal, beat: (details: DispatchMark) => void) => Promise<T>,
  map: (err: unknown) => Promise<void>,
): Promise<T> {
  const ctx = Context.current();
  const timeout = AbortSignal.timeout(model.timeoutMs);
  const signal = AbortSignal.any([timeout, ctx.cancellationSignal]);
  // Heartbeats carry cancellation to the attempt and let Temporal notice a dead worker quickly. An
  // owner's cancel must close the upstream connection within a second: its answer comes back with a
  // heartbeat (the worker's throttle is HEARTBEAT_EVERY_MS too).
  // A local activity (an inline model) has no heartbeat: Core delivers its cancel directly.
  let details = initial;
  const every = Math.max(200, Math.min(HEARTBEAT_EVERY_MS, Math.floor(model.heartbeatTimeoutMs / 3)));
  const beats = !ctx.info.isLocal;
  const timer = beats ? setInterval(() => ctx.heartbeat(details), every) : undefined;
  try {
    return await run(signal, (d) => {
      details = d;
      if (beats) ctx.heartbeat(d);
    });
  } catch (err) {
    if (timeout.aborted) {
      throw ApplicationFailure.nonRetryable(
        `The ${wording.upstream} gave no ${wording.answer} within ${model.timeoutMs} ms.`,
        'upstream_timeout',
      );
    }
    await map(err);
    if (err instanceof UpstreamFailure) {
      // A retryable type outside TASK_FAILURE_CODES: once retries run out the workflow reports upstream_error.
      throw err.retryable
        ? ApplicationFailure.retryable(err.message, `${err.code}_retryable`)
        : ApplicationFailure.nonRetryable(err.message, err.code);
    }
    throw err; // retryable: a transport failure before dispatch, a read, or an idempotent upstream
  } finally {
    clearInterval(timer);
  }
}
