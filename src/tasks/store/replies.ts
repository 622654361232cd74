// The numeric replies of the read model's Lua scripts, named once: scripts.ts interpolates these
// constants into the Lua text and the stores compare against them, so a script and its reader cannot
// disagree on what a number means. The values are the ones the scripts have always returned: a
// reply's meaning must not change under a script that is already loaded.
import type { TaskStatus } from '../../shared/task.js';
import type { ImageTaskRecord } from '../../shared/image-task.js';
import type { AnyTaskRecord } from '../../shared/records.js';
import { listItem, storedViews } from '../../shared/views.js';
import { ENTRY_HEAD, entryLive, joinFramed, liveEntries, type ListFrame } from './list-items.js';
import type { Page, ReadOutcome, StoredView } from './task-store.js';

/** TRANSITION, and the first element of RECORD's reply: whether this write moved the record. */
export const TRANSITION_REPLY = { stale: 0, applied: 1 } as const;

/** RESERVE (never `held`) and RESERVE_ONCE. */
export const RESERVATION = { full: 0, added: 1, held: 2 } as const;

/**
 * READ. The first element is `passed` when the limiter let the read through; any other value is the
 * limiter's remaining PTTL (at least 1 ms), and then it is the whole reply. Each task then gets a
 * status and its view, or one of the codes below and a payload.
 */
export const READ_REPLY = { passed: 0, absent: 0, foreign: 1, record: 3 } as const;

/**
 * LIST (when a member without an entry is on the page) and PAGE, per member: where its text comes
 * from. Kiln writes only `entry`; the other two read what older releases wrote, until it expires.
 */
export const ITEM_SOURCE = {
  /** An owner items entry, "<rank>:<expiry ms>:<item>" (list-items.ts). */
  entry: 1,
  /** The list item (LIST) or public view (PAGE) stored in the task hash. */
  taskHash: 2,
  /** The record itself: an older release's task, with no view or item stored. */
  record: 3,
} as const;

/** LIST and LIST_ITEMS: the page the caller keeps is still the owner's (list-pages.ts). */
export const LIST_UNCHANGED = 0;

/** PAGE and PAGE_ITEMS: the head of the reply, then whether members follow the page. */
export const PAGE_REPLY = { unknownCursor: -1, found: 0, last: 0, more: 1 } as const;

/** The reply of scripts whose callers read none (OWNER_STEP, RESERVE_SHARD, REMEMBER_FINGERPRINT). */
export const DONE = 1;

/** DELETE_TASK: tombstoned now, a tombstone already, no such task of the owner, or still running. */
export const DELETION = { absent: 0, deleted: 1, gone: 2, unfinished: 3 } as const;
/** The rank of every terminal status (STATUS_RANK). */
export const TERMINAL_RANK = 3;
/** A tombstone's rank: above every status, so no transition moves a deleted task again. */
export const TOMBSTONE_RANK = 9;

/** SET_IF_UNCHANGED (webhook.ts): whether the record was still the one read. */
export const COMPARE_AND_SET = { changed: 0, written: 1 } as const;

type Kind = AnyTaskRecord['kind'];

/** A READ reply for `n` tasks, from one script run. */
export function readOutcome(reply: unknown[], n: number, owner: string, kind: Kind): ReadOutcome {
  if (reply[0] !== READ_REPLY.passed) return { limited: true, retryAfterMs: Number(reply[0]) };
  const views: StoredView[] = new Array(n);
  for (let i = 0; i < n; i++) views[i] = storedView(reply[1 + 2 * i], reply[2 + 2 * i], owner, kind);
  return { limited: false, views };
}

/** One task's part of a READ reply. */
export function storedView(code: unknown, payload: unknown, owner: string, kind: Kind): StoredView {
  if (typeof code === 'string') return { status: code as TaskStatus, view: payload as string };
  if (code === READ_REPLY.record) return legacyView(payload as string, owner, kind);
  return code === READ_REPLY.foreign ? 'foreign' : 'absent';
}

/** An older release's record (no view stored): its view is made here, per read, until it is rewritten or expires. */
function legacyView(json: string, owner: string, kind: Kind): StoredView {
  const record = JSON.parse(json) as AnyTaskRecord;
  if (record.owner !== owner || (record.kind ?? 'image') !== kind) return 'foreign';
  return { status: record.status, view: storedViews(record).view };
}

/**
 * A LIST reply as the page's items joined, in `frame`: entries, or source and text pairs when it
 * starts with a source.
 */
export function listPage(reply: (number | Buffer)[], frame?: ListFrame): Buffer {
  return released(reply, pageBytes(reply, frame));
}

/**
 * `out`, once `reply` is emptied. ioredis's command keeps its reply (its promise's result) until it
 * is itself collected, and V8 has often moved a command to the old generation by the time Redis
 * answers it: a page's ~100 items, and the socket chunks its Buffers are cut from, then lived until
 * the next full collection. Under list load the API's processes grew to ~190 MiB each that way;
 * emptied, they stay near 90 (BENCHMARKS.md, memory), and a page costs less CPU (less to promote).
 */
function released<T>(reply: unknown[], out: T): T {
  reply.length = 0;
  return out;
}

function pageBytes(reply: (number | Buffer)[], frame?: ListFrame): Buffer {
  if (typeof reply[0] !== 'number') return joinFramed(liveEntries(reply as Buffer[]), ENTRY_HEAD, frame);
  const now = Date.now();
  const items: Buffer[] = [];
  for (let i = 0; i < reply.length; i += 2) {
    const text = reply[i + 1] as Buffer;
    if (reply[i] === ITEM_SOURCE.entry) {
      if (entryLive(text, now)) items.push(text.subarray(ENTRY_HEAD));
    } else if (reply[i] === ITEM_SOURCE.taskHash) items.push(text);
    else items.push(Buffer.from(JSON.stringify(listItem(JSON.parse(text.toString()) as ImageTaskRecord))));
  }
  return joinFramed(items, 0, frame);
}

/**
 * A PAGE or PAGE_ITEMS reply. `sourced`: each member is id, source and text (PAGE); otherwise id and
 * entry (PAGE_ITEMS, whose members all have entries).
 */
export function pageOf(reply: (number | string)[], sourced: boolean): Page {
  return released(reply, pageOfReply(reply, sourced));
}

function pageOfReply(reply: (number | string)[], sourced: boolean): Page {
  if (reply[0] === PAGE_REPLY.unknownCursor) return 'unknown_cursor';
  const now = Date.now();
  const ids: string[] = [];
  const items: string[] = [];
  const step = sourced ? 3 : 2;
  for (let i = 2; i < reply.length; i += step) {
    const text = reply[i + step - 1] as string;
    const source = sourced ? reply[i + 1] : ITEM_SOURCE.entry;
    if (source === ITEM_SOURCE.entry && !entryLive(text, now)) continue;
    ids.push(reply[i] as string);
    items.push(
      source === ITEM_SOURCE.entry
        ? text.slice(ENTRY_HEAD)
        : source === ITEM_SOURCE.taskHash
          ? text
          : storedViews(JSON.parse(text) as AnyTaskRecord).item,
    );
  }
  return { ids, items, hasMore: reply[1] === PAGE_REPLY.more };
}
