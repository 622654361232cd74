// Activities: everything that touches Redis, the blob store or an upstream. Built by a factory so
// the worker (and tests) hand in their dependencies.
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { ImageModel } from '../../src/config/models.js';
import type { GenerationResult, ImageTaskInput, ImageTaskRecord } from '../../src/shared/image-task.js';
import { INLINE_BUSY_FAILURE_TYPE } from '../../src/shared/errors.js';
import { TERMINAL_STATUSES } from '../../src/shared/task.js';
import { IMAGE_CALL } from '../../src/shared/call-wording.js';
import { WEBHOOK_PENDING } from '../../src/shared/webhook-types.js';
import { settle, type Settled } from '../read-model.js';
import { Slots } from '../inline-slots.js';
import { HEARTBEAT_EVERY_MS, keepTiming, kindUpstream, type KindDeps } from '../upstream-call.js';
import { workerSlots } from '../../src/config/channels.js';
import type { ImageProvider } from '../providers/contract.js';

export type ActivityDeps = KindDeps<ImageModel, ImageProvider>;

/** What generateImage answers: the task's final record, and whether the read model holds it already. */
export interface ImageDone extends Settled {
  /** False when the `succeeded` write failed (Redis unreachable): the workflow writes it then. */
  recorded: boolean;
}

export function createActivities(deps: ActivityDeps) {
  const { store, models, providers } = deps;
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
        else if (slot) release = await whileBeating(ctx, () => slot.take(ctx.cancellationSignal));
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
    const base = { id: input.id, kind: 'image' as const, owner: input.owner, model: input.model };
    // A task with a webhook keeps showing it (the delivery of this state has not begun).
    const webhook = input.webhook ? { webhook: WEBHOOK_PENDING } : {};
    const timing = await upstream.timing(input, stored);
    const running = (channel: string) =>
      store.transition({
        ...base,
        status: 'running',
        created_at: input.created_at,
        finished_at: null,
        candidates: null,
        error: null,
        ...timing,
        channel,
        ...webhook,
      });
    const sent = await upstream.send(
      input,
      IMAGE_CALL,
      running,
      (model, signal, dispatching) => providers[model.provider].generate({ input, model, signal, dispatching }),
      { claim, stored },
    );
    const result: GenerationResult = sent.value;
    // The fields in the order the workflow wrote them before, so stored JSON keeps its shape.
    const { candidates, ...rest } = result;
    const record: ImageTaskRecord = {
      ...base,
      status: 'succeeded',
      created_at: input.created_at,
      finished_at: Math.floor(Date.now() / 1000),
      candidates,
      error: null,
      ...rest,
      ...timing,
      channel: sent.channel,
      ...webhook,
    };
    // Redis unreachable now must not cost the image (a retry would generate it again, or end a
    // non-idempotent task uncertain): the workflow records it then, with its retries.
    return settle(store, record).then(
      (settled) => ({ ...settled, recorded: true }),
      () => ({ record, recorded: false, written: false }),
    );
  }
}

export type Activities = ReturnType<typeof createActivities>;

/** An inline call without a free slot (or on a worker that does not run the model inline). */
function busy(): never {
  throw ApplicationFailure.nonRetryable('no free slot for an inline call on this worker', INLINE_BUSY_FAILURE_TYPE);
}

/** `wait`, heartbeating meanwhile: a long wait must not look like a dead worker, and a cancel arrives. */
async function whileBeating<T>(ctx: Context, wait: () => Promise<T>): Promise<T> {
  const timer = setInterval(() => ctx.heartbeat(), HEARTBEAT_EVERY_MS);
  try {
    return await wait();
  } finally {
    clearInterval(timer);
  }
}
