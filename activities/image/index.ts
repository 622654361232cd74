// Activities: everything that touches Redis, the blob store or an upstream. Built by a factory so
// the worker (and tests) hand in their dependencies.
import type { ImageModel } from '../../src/config.js';
import type { TaskStore } from '../../src/infra/store.js';
import type { GenerationResult, ImageTaskInput, TaskRecord } from '../../src/shared/task.js';
import { IMAGE_CALL } from '../../src/shared/upstream.js';
import { upstreamCalls } from '../upstream-call.js';
import type { ImageProvider } from './types.js';

export interface ActivityDeps {
  store: TaskStore;
  models: ImageModel[];
  providers: Record<ImageModel['provider'], ImageProvider>;
}

export function createActivities({ store, models, providers }: ActivityDeps) {
  const upstream = upstreamCalls(store, models);

  return {
    /**
     * Writes one transition to the read model (run as a local activity). True when it moved the
     * task forward: the first terminal write of a task is the one that counts it as finished.
     */
    recordTransition: (record: TaskRecord): Promise<boolean> => store.transition(record),
    /** A local activity: see upstreamCalls. */
    mayHaveReachedUpstream: upstream.mayHaveReached,

    /** One upstream generation. Marks the task running, then calls the model's provider. */
    async generateImage(input: ImageTaskInput): Promise<GenerationResult> {
      const running = () =>
        store.transition({
          id: input.id,
          kind: 'image',
          owner: input.owner,
          model: input.model,
          status: 'running',
          created_at: input.created_at,
          finished_at: null,
          candidates: null,
          error: null,
        });
      return upstream.send(input, IMAGE_CALL, running, (model, signal, dispatching) =>
        providers[model.provider].generate({ input, model, signal, dispatching }),
      );
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
