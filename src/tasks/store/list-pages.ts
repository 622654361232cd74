// First list pages an API process made, kept for as long as they are exact, so an owner's repeated
// list (a console or a dashboard refreshing) costs Redis a version check instead of a page: the
// LIST script's copy of 100 entries through Lua is most of what a page costs Redis (BENCHMARKS.md,
// list).
//
// Exact because every script that changes an owner's index or list items also bumps a version
// field in the items hash (scripts.ts, OWNER_ITEMS `bump`), and LIST reads that version with the
// page, atomically: given the kept page's version, it answers LIST_UNCHANGED while the version is
// still that one, so nothing changed since the kept page was read. A page also stops being kept
// when its first entry expires (a record leaves lists then), and its key holds the window's lower
// bound, which moves every second: no page is kept longer than a second or two.
//
// During a rolling upgrade from a release before the version field, that release's writes do not
// bump it: a list served here may then miss such a write for up to that second.
import type { ListFrame } from './list-items.js';

/** The items hash field that holds an owner's list version (never a task id: ids have no `~`). */
export const LIST_VERSION_FIELD = '~v';

interface Kept {
  version: string;
  frame: ListFrame | undefined;
  page: Buffer;
  until: number;
}

export class ListPages {
  private readonly kept = new Map<string, Kept>();
  private bytes = 0;

  /**
   * `maxBytes`: what all kept pages may hold; a page above a quarter of it is not kept. `maxAgeMs`:
   * the longest a page is kept (its key's window bound moves on within a second anyway).
   */
  constructor(
    private readonly maxBytes = 4 * 2 ** 20,
    private readonly maxAgeMs = 2000,
  ) {}

  /** The page kept for `key` and `frame`, if it has not expired (its version is the caller's to check). */
  get(key: string, frame: ListFrame | undefined, now = Date.now()): Kept | undefined {
    const k = this.kept.get(key);
    if (!k) return undefined;
    if (k.until <= now) {
      this.drop(key, k);
      return undefined;
    }
    return k.frame === frame ? k : undefined;
  }

  /** Keeps `page`, read with list version `version`, until `until` (ms) at the latest. */
  set(key: string, frame: ListFrame | undefined, version: string, page: Buffer, until: number, now = Date.now()) {
    const old = this.kept.get(key);
    if (old) this.drop(key, old);
    if (until <= now || page.length > this.maxBytes / 4) return;
    this.kept.set(key, { version, frame, page, until: Math.min(until, now + this.maxAgeMs) });
    this.bytes += page.length;
    // Oldest first (a Map iterates in insertion order): expired ones, then as many as the bound needs.
    for (const [k, v] of this.kept) {
      if (this.bytes <= this.maxBytes && v.until > now) break;
      this.drop(k, v);
    }
  }

  get size() {
    return this.kept.size;
  }

  private drop(key: string, k: Kept) {
    this.kept.delete(key);
    this.bytes -= k.page.length;
  }
}
