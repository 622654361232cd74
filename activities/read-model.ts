// Read-model writes that cost the workflow no history event: the `queued` write as a workflow sink
// (run by the worker while it handles the workflow task, never replayed), and the terminal write
// that settles on whichever terminal record Redis already holds.
import type { Sinks } from '@temporalio/workflow';
import type { InjectedSinks } from '@temporalio/worker';
import type { TaskStore } from '../src/tasks/store/task-store.js';
import { retrying } from './retrying.js';
import { TERMINAL_STATUSES } from '../src/shared/task.js';
import type { ImageTaskRecord } from '../src/shared/image-task.js';

/** The sinks workflow code may call (`proxySinks<ReadModelSinks>()`). */
export interface ReadModelSinks extends Sinks {
  readModel: {
    /** The workflow picked the task up: record `queued`. */
    queued(record: ImageTaskRecord): void;
  };
}

type SinkStore = Pick<TaskStore, 'transition'>;

/** How long a workflow task waits for the `queued` write before going on without it. */
const QUEUED_WAIT_MS = 1000;
/** A `queued` write Redis refused keeps being retried this long, in the background. */
const QUEUED_RETRY_MS = 5 * 60_000;

/**
 * `queued` is written before the workflow task completes (so before the upstream activity can
 * start), as the local activity did, but records no marker in history. When Redis does not answer
 * within QUEUED_WAIT_MS the task goes on and the write is retried in the background: a transition
 * never moves a record backwards, so a late `queued` after `running` is simply ignored, and until
 * then the record says `accepted` — also unfinished. Not called on replay.
 */
export function readModelSinks(
  store: SinkStore,
  onError: (err: unknown) => void = () => undefined,
): InjectedSinks<ReadModelSinks> {
  return {
    readModel: {
      queued: {
        fn: async (_info, record) => {
          const written = retrying(() => store.transition(record), QUEUED_RETRY_MS).catch(onError);
          await Promise.race([written, new Promise((r) => setTimeout(r, QUEUED_WAIT_MS).unref())]);
        },
        callDuringReplay: false,
      },
    },
  };
}

/** A terminal write's answer: the record Redis holds, and whether this write is what put it there. */
export interface Settled {
  record: ImageTaskRecord;
  /** This write moved the task forward (the task's first terminal write: it counts as finished). */
  written: boolean;
}

/**
 * Writes a terminal record and returns the record the read model ends up with: this one, or the
 * terminal record an earlier write left (the first terminal write of a task wins). The workflow
 * returns and tags what this returns, so Redis, the workflow result and KilnStatus agree.
 */
export async function settle(store: Pick<TaskStore, 'transition' | 'get'>, record: ImageTaskRecord): Promise<Settled> {
  if (await store.transition(record)) return { record, written: true };
  const stored = await store.get(record.id);
  return { record: stored && TERMINAL_STATUSES.includes(stored.status) ? stored : record, written: false };
}
