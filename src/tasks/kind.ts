// What the kernel needs to know of a task kind: everything else about submitting, reading, waiting
// for and cancelling a task is the same for every kind.
import { KilnError } from '../shared/errors.js';
import type { AnyTaskRecord } from '../shared/records.js';
import type { TaskStatus } from '../shared/task.js';
import type { FallbackKind } from './fallback.js';

export interface TaskKind<R extends AnyTaskRecord> {
  kind: R['kind'];
  /** Ids are `<prefix>_<32 hex>`: random, or derived from an Idempotency-Key. */
  idPrefix: 'task' | 'video';
  /** Ids Kiln cannot have issued are not_found without a lookup. */
  idPattern: RegExp;
  /** How a record is rebuilt from Temporal while Redis has none. */
  fallback: FallbackKind<R>;
  /** The public view of a record. */
  view(record: R): unknown;
  /** The collection path (`/v1/tasks`), named in a cancel's reason. */
  path: string;
  /** `Task`, `Video`: how messages name it. */
  noun: string;
  /** The status as this kind's callers see it; a wait wakes only when it changes. Default: as stored. */
  label?: (status: TaskStatus) => string;
}

/** The read model cannot be reached: one answer wherever a request needs it and has no other path. */
export const storageUnavailable = () =>
  new KilnError('service_unavailable', 'Task storage is unavailable for a moment; retry shortly.', 1);

export const notFound = (k: Pick<TaskKind<AnyTaskRecord>, 'noun'>, id: string) =>
  new KilnError('not_found', `${k.noun} ${id} was not found.`);
