// An owner's list items as the read model keeps them (scripts.ts, OWNER_ITEMS) and as the
// API turns a page of them into its JSON: bytes in, bytes out, never decoded.
/** An owner's list item entry is "<rank>:<expiry ms, 13 digits>:<item>" (scripts.ts, OWNER_ITEMS). */
export const ENTRY_HEAD = 16;
const COMMA = Buffer.from(',');

/**
 * Whether an entry's record still exists: its expiry (13 ASCII digits after "<rank>:") is after
 * `now`. Read here rather than in the list script, where Redis would pay for it on every item. The clocks
 * compared are this host's and Redis's (the expiry is Redis's TIME): a skew between them moves the
 * end of a record's retention in lists by that much.
 */
export function entryLive(entry: Buffer | string, now: number): boolean {
  let expiry = 0;
  for (let i = 2; i < ENTRY_HEAD - 1; i++) {
    expiry = expiry * 10 + ((typeof entry === 'string' ? entry.charCodeAt(i) : entry[i]) - 48);
  }
  return expiry > now;
}

/** The items of the live entries, in order. */
export function liveItems(entries: Buffer[]): Buffer[] {
  const now = Date.now();
  const items: Buffer[] = [];
  for (const e of entries) if (entryLive(e, now)) items.push(e.subarray(ENTRY_HEAD));
  return items;
}

/** List items joined with commas, copied once. */
export function joinItems(items: Buffer[]): Buffer {
  const parts: Buffer[] = [];
  for (const item of items) {
    if (parts.length > 0) parts.push(COMMA);
    parts.push(item);
  }
  return Buffer.concat(parts);
}
