// AUTH_MODE=keys: the bearer token must be a key issued by Kiln (src/keys/store.ts), not revoked and
// not expired.
//
// Each API process keeps what it last read of a key for FRESH_MS only, so a revocation, an expiry
// change or a new model allow-list reaches every process within a second, with no message to
// lose: a reading is trusted for FRESH_MS from when it was asked for, so one that raced a revoke
// ends no later than FRESH_MS after it. A key in use is re-read in the background once its reading
// is half that old, so its polls keep being answered synchronously from memory (`known`). An
// expiry needs no re-read: the time is checked on every request.
import { KilnError } from '../shared/errors.js';
import { parseBearer, type Authenticator, type Caller } from '../infra/callers.js';
import { keyState, sha256, type KeyRecord } from './record.js';
import type { KeyStore } from './store.js';

/** How long a reading of a key is trusted (ms): under the promised second, with room for the request. */
export const FRESH_MS = 800;
const REFRESH_MS = FRESH_MS / 2;
/** last_used_at is written at most this often per key (s). */
const USED_EVERY_S = 60;
const ENTRIES = 10_000;

interface Reading {
  /** When the read that made it was sent (ms). */
  readAt: number;
  hash: string;
  record?: KeyRecord;
  /** The caller of a key not revoked (expiry is checked per request). */
  caller?: Readonly<Caller>;
  /** Last use known, in Redis or written from here (s). */
  usedAt: number;
}

export class IssuedKeyAuth implements Authenticator {
  // Keyed by the header as sent (as PassthroughAuth): a repeat poll costs one map lookup, no hash.
  // Process memory only, like the key in the request being served.
  private readonly readings = new Map<string, Reading>();
  private readonly reading = new Map<string, Promise<Reading>>();
  constructor(private readonly keys: KeyStore) {}

  known(header: string | undefined): Caller | undefined {
    const r = header === undefined ? undefined : this.readings.get(header);
    if (!r?.caller) return undefined;
    const now = Date.now();
    if (now - r.readAt >= FRESH_MS || keyState(r.record!, now) !== 'active') return undefined;
    if (now - r.readAt >= REFRESH_MS && !this.reading.has(header!)) this.read(header!, r.hash).catch(() => undefined);
    this.used(r, now);
    return r.caller;
  }

  async authenticate(header: string | undefined): Promise<Caller> {
    const hit = this.known(header);
    if (hit) return hit;
    const token = parseBearer(header);
    let r = this.readings.get(header!);
    if (!r || Date.now() - r.readAt >= FRESH_MS) {
      try {
        r = await this.read(header!, r?.hash ?? sha256(token));
      } catch {
        throw new KilnError(
          'service_unavailable',
          'The API key cannot be checked right now (Redis); retry shortly.',
          1,
        );
      }
    }
    const now = Date.now();
    const state = r.record ? keyState(r.record, now) : undefined;
    if (state === 'active') {
      this.used(r, now);
      return r.caller!;
    }
    throw new KilnError(
      'invalid_api_key',
      state === 'revoked'
        ? 'The API key was revoked.'
        : state === 'expired'
          ? `The API key expired at ${new Date(r.record!.expires_at! * 1000).toISOString()}.`
          : 'The API key is not known.',
    );
  }

  /** Reads the key from Redis (one read at a time per header) and keeps the reading. */
  private read(header: string, hash: string): Promise<Reading> {
    const pending = this.reading.get(header);
    if (pending) return pending;
    const readAt = Date.now();
    const p = this.keys
      .lookup(hash)
      .then((found): Reading => {
        const before = this.readings.get(header);
        const r: Reading = { readAt, hash, usedAt: Math.max(found?.lastUsedAt ?? 0, before?.usedAt ?? 0) };
        if (found) {
          r.record = found.record;
          if (found.record.revoked_at === null) r.caller = callerOf(found.record);
        }
        // Dropping everything at the bound keeps this O(1); a full map means many distinct keys.
        if (!before && this.readings.size >= ENTRIES) this.readings.clear();
        this.readings.set(header, r);
        return r;
      })
      .finally(() => this.reading.delete(header));
    this.reading.set(header, p);
    return p;
  }

  private used(r: Reading, nowMs: number): void {
    const now = Math.floor(nowMs / 1000);
    if (now - r.usedAt < USED_EVERY_S) return;
    r.usedAt = now;
    // Best effort: a lost write only makes last_used_at a minute older.
    this.keys.touch(r.hash, now).catch(() => undefined);
  }
}

const callerOf = (r: KeyRecord): Readonly<Caller> =>
  Object.freeze({
    owner: `key:${r.owner}`,
    keyId: r.id,
    ...(r.models ? { models: Object.freeze([...r.models]) } : {}),
    ...(r.limits ? { limits: Object.freeze({ ...r.limits }) } : {}),
  });
