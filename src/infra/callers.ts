// Resolves the bearer token to a caller. passthrough: any well-formed key, owner = HMAC(secret, key).
// keys: Kiln-issued keys, managed in src/keys/ (stored only as SHA-256 in Redis).
import { KilnError } from '../shared/errors.js';
import { createHmac } from 'node:crypto';
import type { Limits } from '../config/limits.js';

// RFC 6750 b64token, bounded (padding included) so a hostile header cannot become a huge HMAC
// input, Redis key or upstream header.
const BEARER = /^Bearer (?=[^ ]{1,1024}$)([A-Za-z0-9\-._~+/]+=*)$/;

/** What an owner may be named: issued keys' owners, the usage and limits routes' path parameter. */
export const OWNER_NAME = /^[A-Za-z0-9._-]{1,64}$/;

export interface Caller {
  owner: string;
  /** The caller's key, forwarded upstream in passthrough mode only. */
  credential?: string;
  /** Keys mode: the issued key's id (never the key itself). */
  keyId?: string;
  /** Keys mode: the only model ids this key may use; absent means every model. */
  models?: readonly string[];
  /** Keys mode: the key's own limits, counted over that key alone (src/config/limits.ts). */
  limits?: Readonly<Partial<Limits>>;
}

export interface Authenticator {
  authenticate(header: string | undefined): Promise<Caller>;
  /**
   * The caller when its key is already known in memory (no I/O), else undefined: then
   * `authenticate` answers, errors included. Lets a poll answered from memory stay synchronous.
   */
  known?(header: string | undefined): Caller | undefined;
}

export function parseBearer(header: string | undefined): string {
  const m = header ? BEARER.exec(header.trim()) : null;
  if (!m) throw new KilnError('missing_api_key', 'Send your API key as "Authorization: Bearer <API_KEY>".');
  return m[1];
}

/** Callers of recently seen keys: the HMAC is a measurable share of a poll's CPU. */
const OWNER_CACHE_ENTRIES = 10_000;

export class PassthroughAuth implements Authenticator {
  // Process memory only, like the key in the request being served; never logged or stored.
  // Keyed by the header as sent: a repeat poll is one map lookup, no parse and no new object.
  private readonly callers = new Map<string, Readonly<Caller>>();
  constructor(private readonly ownerKey: Buffer) {}
  known(header: string | undefined): Caller | undefined {
    return header === undefined ? undefined : this.callers.get(header);
  }

  async authenticate(header: string | undefined): Promise<Caller> {
    const hit = this.known(header);
    if (hit) return hit;
    const key = parseBearer(header);
    const caller = Object.freeze({ owner: ownerOfKey(this.ownerKey, key), credential: key });
    // Dropping everything at the bound keeps this O(1) with no bookkeeping per hit; a full cache
    // means many distinct keys, which recompute once each.
    if (this.callers.size >= OWNER_CACHE_ENTRIES) this.callers.clear();
    this.callers.set(header!, caller);
    return caller;
  }
}

/** A passthrough caller's owner: an HMAC of its key, so the key itself is never stored. */
export function ownerOfKey(ownerKey: Buffer, apiKey: string): string {
  return createHmac('sha256', ownerKey).update(apiKey).digest('hex');
}
