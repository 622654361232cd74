// An owner's list items as the read model keeps them (scripts.ts, OWNER_ITEMS) and as the
// API turns a page of them into its JSON: bytes in, bytes out, never decoded.
/** An owner's list item entry is "<rank>:<expiry ms, 13 digits>:<item>" (scripts.ts, OWNER_ITEMS). */
export const ENTRY_HEAD = 16;
const COMMA = 0x2c;
const NOTHING = Buffer.alloc(0);

/** What a page's items are written between, e.g. the list object's head and its closing `]}`. */
export interface ListFrame {
  head: Buffer;
  tail: Buffer;
}

/** No frame: the items joined with commas, nothing around them. */
export const BARE_FRAME: ListFrame = { head: NOTHING, tail: NOTHING };

/**
 * Whether an entry's record still exists: its expiry (13 ASCII digits after "<rank>:") is after
 * `now`. Read here rather than in the list script, where Redis would pay for it on every item. The clocks
 * compared are this host's and Redis's (the expiry is Redis's TIME): a skew between them moves the
 * end of a record's retention in lists by that much.
 */
export function entryLive(entry: Buffer | string, now: number): boolean {
  return entryExpiry(entry) > now;
}

/** An entry's expiry, in ms (Redis's clock). */
function entryExpiry(entry: Buffer | string): number {
  let expiry = 0;
  for (let i = 2; i < ENTRY_HEAD - 1; i++) {
    expiry = expiry * 10 + ((typeof entry === 'string' ? entry.charCodeAt(i) : entry[i]) - 48);
  }
  return expiry;
}

/**
 * When the first of the entries live at `now` expires: a page made of them is exact until then.
 * Infinity for none.
 */
export function firstExpiry(entries: Buffer[], now = Date.now()): number {
  let first = Infinity;
  for (const e of entries) {
    const expiry = entryExpiry(e);
    if (expiry > now && expiry < first) first = expiry;
  }
  return first;
}

/** The entries whose records still exist, in order (the same Buffers: nothing is copied). */
export function liveEntries(entries: Buffer[], now = Date.now()): Buffer[] {
  const live: Buffer[] = [];
  for (const e of entries) if (entryLive(e, now)) live.push(e);
  return live;
}

/**
 * `frame.head`, the parts from byte `skip` on joined with commas, `frame.tail`: one allocation and
 * one copy of each part, no Buffer per item (a page is ~100 of them, and their collection is a
 * visible share of a list page's CPU). `skip` is ENTRY_HEAD for entries, 0 for items.
 */
export function joinFramed(parts: Buffer[], skip: number, frame: ListFrame = BARE_FRAME): Buffer {
  const { head, tail } = frame;
  let size = head.length + tail.length + Math.max(parts.length - 1, 0);
  for (const p of parts) size += p.length - skip;
  const out = Buffer.allocUnsafe(size);
  let at = head.copy(out, 0);
  for (let i = 0; i < parts.length; i++) {
    if (i > 0) out[at++] = COMMA;
    at += parts[i].copy(out, at, skip);
  }
  tail.copy(out, at);
  return out;
}
