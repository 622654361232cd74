// The Redis read model, as the rest of Kiln sees it: task records, the owner indexes, the
// unfinished-task gauge and poll limiters. Two implementations keep it (create.ts picks one from the
// client): single-node.ts, where one script may touch several keys, and cluster.ts, where every
// script stays in one slot and a transition is a chain of idempotent steps. Both answer a poll in one
// round trip (per node, on a cluster), and both list from items kept in the owner's slot.
import type { ImageTaskRecord } from '../../shared/image-task.js';
import type { AnyTaskRecord } from '../../shared/records.js';
import type { FinishedViews } from './finished-views.js';
import type { ListFrame } from './list-items.js';

import type { RedisClient } from '../../infra/redis.js';

export type { RedisClient };

type Kind = AnyTaskRecord['kind'];

import type { StoredView } from './stored-view.js';
export type { StoredView };
export type ReadOutcome = { limited: true; retryAfterMs: number } | { limited: false; views: StoredView[] };

/** A cursor page of an owner index: the stored items (JSON text) with their ids, or an unknown cursor. */
export type Page = { ids: string[]; items: string[]; hasMore: boolean } | 'unknown_cursor';

/** An owner index member: sorting members as text sorts tasks by creation, ties by id. */
export function indexMember(createdAt: number, id: string): string {
  return `${String(createdAt).padStart(10, '0')}:${id}`;
}

export interface TaskStore {
  /** The connection, for the writes kept beside the read model (webhook delivery state and marks). */
  readonly redis: RedisClient;
  /** API processes: finished tasks' views kept in memory (src/tasks/poll.ts reads through it). */
  readonly finished?: FinishedViews;

  taskKey(id: string): string;
  ownerKey(owner: string, kind?: Kind): string;
  ownerItemsKey(owner: string, kind?: Kind): string;
  /** Pub/sub channel of status changes, "<id> <status>" (src/tasks/waits.ts listens). */
  readonly waitChannel: string;
  /** Pub/sub channel of deleted tasks' ids (src/tasks/deletion-feed.ts listens). */
  readonly deletionChannel: string;
  /** Pub/sub channel of tasks asked to cancel, by id (activities/cancel-notices.ts listens). */
  readonly cancelChannel: string;

  /**
   * Writes a transition if it moves the task forward, with the owner index entry and list item.
   * True when this write moved the record. A caller that sees it fail runs it again: on a cluster
   * that is what completes a transition whose later steps failed.
   */
  transition(record: AnyTaskRecord): Promise<boolean>;
  /**
   * Writes a record rebuilt from Temporal (src/tasks/rebuild/) as a transition would, but only over
   * no record or one of a lower rank: never over the same state, which the workers wrote and which
   * knows more. True when written; a caller that sees it fail runs it again, as a transition.
   */
  restore(record: AnyTaskRecord): Promise<boolean>;
  /**
   * Moves a running task back to queued: its upstream call was refused without processing and it
   * waits to be sent again. The one write that moves a task backwards; false when it was not running.
   */
  requeue(id: string): Promise<boolean>;
  get(id: string): Promise<ImageTaskRecord | null>;
  /** The record as a transition stores it: a finished video with its `expires_at`. */
  withExpiry<R extends AnyTaskRecord>(record: R): R;

  /** Claims a place among unfinished tasks; false when the queue is full. */
  reserve(id: string, max: number): Promise<boolean>;
  release(id: string): Promise<void>;
  unfinishedCount(): Promise<number>;
  /**
   * Ids holding a place among unfinished tasks since `after` (inclusive: the reservation time a
   * previous page ended at; null from the start) up to `before` (epoch s), oldest first.
   */
  unfinishedIds(before: number, after: number | null, limit: number): Promise<{ id: string; since: number }[]>;
  /**
   * A lease on `name` for `ttlMs` across the deployment (SET NX PX): true when this caller got it.
   * Work that one process at a time should do (a reconciliation round) takes it first.
   */
  lease(name: string, ttlMs: number): Promise<boolean>;

  /**
   * Public views of `ids` for `owner`, behind a poll limiter that lets one request per `intervalMs`
   * through for `limiterKey` (null or 0 disables it).
   */
  read(ids: string[], owner: string, kind: Kind, limiterKey: string | null, intervalMs: number): Promise<ReadOutcome>;
  /**
   * Newest first, between two lex bounds of the owner's image index: the stored list items, joined
   * with commas, as UTF-8 bytes, between `frame`'s head and tail (none by default). Bytes, never
   * strings: a page's text would live on V8's heap, and its collections cost the API more than the
   * rest of the page (BENCHMARKS.md).
   */
  list(owner: string, max: string, min: string, limit: number, frame?: ListFrame): Promise<Buffer>;
  /**
   * A page of an owner index after the cursor id (exclusive), newest first unless `order` is asc,
   * within the list window: the stored items (the public views, for videos). One round trip.
   */
  page(owner: string, kind: Kind, opts: { limit: number; after?: string; order: 'asc' | 'desc' }): Promise<Page>;

  /** Marks that an upstream request for this task was (about to be) sent. */
  /** Set right before a request can reach an upstream: which attempt sent it, on which channel. */
  markDispatched(id: string, attempt: number, channel?: string): Promise<void>;
  clearDispatched(id: string): Promise<void>;
  wasDispatched(id: string): Promise<boolean>;
  /** The channel the dispatch mark names ('' in an older release's mark, which names none), or null without one. */
  dispatchedTo(id: string): Promise<string | null>;

  /** Ids that neither Redis nor Temporal knew for this owner lately. */
  recentlyMissing(owner: string, ids: string[]): Promise<Set<string>>;
  rememberMissing(owner: string, ids: string[]): Promise<void>;

  // Idempotent submits (Idempotency-Key): the task id is derived from the owner and the key. These
  // help the Temporal workflow id (the arbiter) answer; they never decide alone.

  /**
   * Claims a place among unfinished tasks for a keyed submit: 'added' (this call holds it),
   * 'held' (the id holds one already: a concurrent or earlier submit of the same key; it is
   * neither counted twice nor refused) or 'full'.
   */
  reserveOnce(id: string, max: number): Promise<'added' | 'held' | 'full'>;
  /** Stores a keyed submit's request fingerprint next to its record, to live as long as it. */
  rememberFingerprint(id: string, fingerprint: string): Promise<void>;
  /** A keyed submit's fingerprint, owner and record, each null when absent; `deleted`: a tombstone. */
  fingerprintOf(
    id: string,
  ): Promise<{ fingerprint: string | null; owner: string | null; record: AnyTaskRecord | null; deleted?: boolean }>;

  /**
   * Deletes the owner's finished task: its record becomes a tombstone kept for the retention (no
   * later write, fallback or rebuild brings it back) and it leaves the owner's list. `gone`: a
   * tombstone already (its list entry is removed again, in case an earlier delete stopped short).
   */
  deleteTask(
    record: Pick<AnyTaskRecord, 'id' | 'owner' | 'kind' | 'created_at'>,
  ): Promise<'deleted' | 'gone' | 'absent' | 'unfinished'>;
  /** The ids among `ids` that are deleted tasks' tombstones. */
  deletedAmong(ids: string[]): Promise<Set<string>>;
}

/** The channel a dispatch mark (`attempt` or `attempt:channel`) names; '' for a mark without one. */
export function dispatchChannel(mark: string | null): string | null {
  if (mark === null) return null;
  const at = mark.indexOf(':');
  return at < 0 ? '' : mark.slice(at + 1);
}
