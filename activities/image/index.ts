// Activities: everything that touches Redis, the blob store or an upstream. Built by a factory so
// the worker (and tests) hand in their dependencies.
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { ImageModel } from '../../src/config/models.js';
import type { ImageTaskInput, ImageTaskRecord } from '../../src/shared/image-task.js';
import { INLINE_BUSY_FAILURE_TYPE } from '../../src/shared/errors.js';
import { TERMINAL_STATUSES } from '../../src/shared/task.js';
import { IMAGE_CALL } from '../../src/shared/call-wording.js';
import { upstreamKey } from '../../src/shared/credentials.js';
import { settle, type Settled } from '../read-model.js';
import { Slots } from '../inline-slots.js';
import { keepTiming, kindUpstream, type KindDeps } from '../upstream-call.js';
import { heartbeating } from '../heartbeats.js';
import { workerSlots } from '../../src/config/channels.js';
import { providerFor, runsJobs, type ImageProvider } from '../providers/contract.js';
import { imageJobActivities, recordSucceeded, type ImageDone } from './jobs.js';
import { runningRecord, succeededRecord } from './records.js';

export interface ActivityDeps extends KindDeps<ImageModel, ImageProvider> {
  /** Configured upstream keys (`credential: {env}`), by variable name. */
  keys?: Record<string, string>;
}

/** What generateImage answers: the task's final record, and whether the read model holds it already. */
export type { ImageDone } from './jobs.js';

export function createActivities(deps: ActivityDeps) {
  const { store, models, providers, keys = {} } = deps;
  const upstream = kindUpstream(deps);
  // Inline models only: local activity slots on this worker, beside the channels' deployment-wide leases.
  const slots = new Map(models.filter((m) => m.inline).map((m) => [m.id, new Slots(workerSlots(m))]));

  return {
    /**
     * Writes one transition to the read model (run as a local activity). True when it moved the
     * task forward: the first terminal write of a task is the one that counts it as finished.
     */
    recordTransition: (record: ImageTaskRecord): Promise<boolean> => store.transition(record),
    /**
     * The terminal write of a task that did not succeed (a local activity): returns the record the
     * read model ends up with, which is an earlier `succeeded` when an attempt recorded its image
     * and then lost its answer.
     */
    recordOutcome: async (record: ImageTaskRecord): Promise<Settled> => settle(store, await keepTiming(store, record)),
    /** A local activity: see upstreamCalls. */
    mayHaveReachedUpstream: upstream.mayHaveReached,
    /** A local activity, asked when the owner cancels: see upstreamCalls. */
    upstreamReach: upstream.reach,

    ...imageJobActivities(store, providers, keys, upstream, deps.stopping),

    /**
     * One upstream generation. Marks the task running, calls the model's provider, and records
     * `succeeded` itself, so a successful task needs no further activity or marker in its history.
     */
    async generateImage(input: ImageTaskInput): Promise<ImageDone> {
      const ctx = Context.current();
      const { isLocal } = ctx.info;
      // An earlier attempt may have recorded its image, then lost its answer (its worker died): that
      // image is the task's result. Asking again would cost a second generation, or for a
      // non-idempotent upstream end the task uncertain although its image exists. Every attempt
      // asks: a local activity after its worker died, and any call after an operator reset the
      // workflow, start over at attempt 1. A task that ended keeps its outcome: nothing is sent.
      const stored = await store.get(input.id);
      if (stored && TERMINAL_STATUSES.includes(stored.status))
        return { record: stored, recorded: true, written: false };
      const slot = slots.get(input.model);
      let release: (() => void) | undefined;
      // An inline call runs now or not at all (a workflow task cannot wait, nor take a cancel while
      // it does); on the model's queue, the call waits for a slot, heartbeating, and stays `queued`.
      const claim = async () => {
        if (isLocal) release = slot?.tryTake() ?? busy();
        else if (slot) release = await whileBeating(ctx, input.id, () => slot.take(ctx.cancellationSignal));
      };
      try {
        return await generate(input, stored, claim);
      } finally {
        release?.();
      }
    },
  };

  /** The attempt itself: `running`, the provider's call, then `succeeded` with the image. */
  async function generate(
    input: ImageTaskInput,
    stored: ImageTaskRecord | null,
    claim: () => Promise<void>,
  ): Promise<ImageDone> {
    const timing = await upstream.timing(input, stored);
    const sent = await upstream.send(
      input,
      IMAGE_CALL,
      (channel) => store.transition(runningRecord(input, timing, channel)),
      (model, signal, dispatching) => {
        const provider = providerFor(providers, model.provider);
        if (runsJobs(provider)) throw new Error(`${model.provider} runs jobs: its tasks take the job path`);
        const key = upstreamKey(model, input.credential, keys);
        return provider.generate({ input, model, signal, dispatching, ...(key ? { key } : {}) });
      },
      { claim, stored },
    );
    return recordSucceeded(store, succeededRecord(input, sent.value, timing, sent.channel));
  }

  /** `wait`, heartbeating meanwhile: a long wait must not look like a dead worker, and a cancel arrives. */
  async function whileBeating<T>(ctx: Context, taskId: string, wait: () => Promise<T>): Promise<T> {
    const stop = heartbeating(ctx, taskId, upstream.cancels);
    try {
      return await wait();
    } finally {
      stop();
    }
  }
}

export type Activities = ReturnType<typeof createActivities>;

/** An inline call without a free slot (or on a worker that does not run the model inline). */
function busy(): never {
  throw ApplicationFailure.nonRetryable('no free slot for an inline call on this worker', INLINE_BUSY_FAILURE_TYPE);
}
