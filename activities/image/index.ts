// Activities: everything that touches Redis, the blob store or an upstream. Built by a factory so
// the worker (and tests) hand in their dependencies.
import { Context } from '@temporalio/activity';
import type { ImageModel } from '../../src/config.js';
import type { TaskStore } from '../../src/infra/store.js';
import type { GenerationResult, ImageTaskInput, TaskRecord } from '../../src/shared/task.js';
import { IMAGE_CALL } from '../../src/shared/upstream.js';
import { WEBHOOK_PENDING } from '../../src/shared/webhook.js';
import { settle, type Settled } from '../read-model.js';
import { keepTiming, upstreamCalls } from '../upstream-call.js';
import type { ImageProvider } from './types.js';

export interface ActivityDeps {
  store: TaskStore;
  models: ImageModel[];
  providers: Record<ImageModel['provider'], ImageProvider>;
}

/** What generateImage answers: the task's final record, and whether the read model holds it already. */
export interface ImageDone extends Settled {
  /** False when the `succeeded` write failed (Redis unreachable): the workflow writes it then. */
  recorded: boolean;
}

export function createActivities({ store, models, providers }: ActivityDeps) {
  const upstream = upstreamCalls(store, models);

  return {
    /**
     * Writes one transition to the read model (run as a local activity). True when it moved the
     * task forward: the first terminal write of a task is the one that counts it as finished.
     */
    recordTransition: (record: TaskRecord): Promise<boolean> => store.transition(record),
    /**
     * The terminal write of a task that did not succeed (a local activity): returns the record the
     * read model ends up with, which is an earlier `succeeded` when an attempt recorded its image
     * and then lost its answer.
     */
    recordOutcome: async (record: TaskRecord): Promise<Settled> => settle(store, await keepTiming(store, record)),
    /** A local activity: see upstreamCalls. */
    mayHaveReachedUpstream: upstream.mayHaveReached,
    /** A local activity, asked when the owner cancels: see upstreamCalls. */
    upstreamReach: upstream.reach,

    /**
     * One upstream generation. Marks the task running, calls the model's provider, and records
     * `succeeded` itself, so a successful task needs no further activity or marker in its history.
     */
    async generateImage(input: ImageTaskInput): Promise<ImageDone> {
      const base = { id: input.id, kind: 'image' as const, owner: input.owner, model: input.model };
      // A task with a webhook keeps showing it (the delivery of this state has not begun).
      const webhook = input.webhook ? { webhook: WEBHOOK_PENDING } : {};
      if (Context.current().info.attempt > 1) {
        // An earlier attempt recorded its image, then its answer was lost (its worker died): that
        // image is the task's result. Asking again would cost a second generation, or for a
        // non-idempotent upstream end the task uncertain although its image exists.
        const stored = await store.get(input.id);
        if (stored?.status === 'succeeded') return { record: stored, recorded: true, written: false };
      }
      const timing = await upstream.timing(input);
      const running = () =>
        store.transition({
          ...base,
          status: 'running',
          created_at: input.created_at,
          finished_at: null,
          candidates: null,
          error: null,
          ...timing,
          ...webhook,
        });
      const result: GenerationResult = await upstream.send(input, IMAGE_CALL, running, (model, signal, dispatching) =>
        providers[model.provider].generate({ input, model, signal, dispatching }),
      );
      // The fields in the order the workflow wrote them before, so stored JSON keeps its shape.
      const { candidates, ...rest } = result;
      const record: TaskRecord = {
        ...base,
        status: 'succeeded',
        created_at: input.created_at,
        finished_at: Math.floor(Date.now() / 1000),
        candidates,
        error: null,
        ...rest,
        ...timing,
        ...webhook,
      };
      // Redis unreachable now must not cost the image (a retry would generate it again, or end a
      // non-idempotent task uncertain): the workflow records it then, with its retries.
      return settle(store, record).then(
        (settled) => ({ ...settled, recorded: true }),
        () => ({ record, recorded: false, written: false }),
      );
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
