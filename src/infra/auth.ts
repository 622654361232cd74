// Resolves the bearer token to an owner. passthrough: any well-formed key, owner = HMAC(secret, key).
// keys: Kiln-issued keys, stored only as SHA-256 in Redis.
import { createHash, randomBytes } from 'node:crypto';
import { KilnError } from '../shared/errors.js';
import { ownerOfKey } from '../config.js';
import type { RedisClient } from '../tasks/store/task-store.js';

// RFC 6750 b64token, bounded (padding included) so a hostile header cannot become a huge HMAC
// input, Redis key or upstream header.
const BEARER = /^Bearer (?=[^ ]{1,1024}$)([A-Za-z0-9\-._~+/]+=*)$/;
const OWNER_NAME = /^[A-Za-z0-9._-]{1,64}$/;
const CACHE_MS = 5000;

export interface Caller {
  owner: string;
  /** The caller's key, forwarded upstream in passthrough mode only. */
  credential?: string;
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

/** Callers of recently seen keys; the HMAC was a measurable share of a poll's CPU (BENCHMARKS.md). */
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

export interface IssuedKey {
  owner: string;
  name: string;
  created_at: number;
  /** First characters of the key, to recognise it in listings. */
  hint: string;
}

export const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

export class KeyStore {
  private readonly cache = new Map<string, { owner: string | null; until: number }>();
  constructor(
    // One hash: one slot on a Redis Cluster.
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {}
  private get key() {
    return `${this.prefix}apikeys`;
  }

  async create(owner: string, name = 'default'): Promise<{ key: string; record: IssuedKey }> {
    if (!OWNER_NAME.test(owner)) throw new Error('owner must be 1-64 characters of letters, digits, ".", "_" or "-"');
    const key = `kiln_sk_${randomBytes(24).toString('base64url')}`;
    const record: IssuedKey = { owner, name, created_at: Math.floor(Date.now() / 1000), hint: key.slice(0, 12) };
    await this.redis.hset(this.key, sha256(key), JSON.stringify(record));
    return { key, record };
  }

  async list(): Promise<(IssuedKey & { id: string })[]> {
    const all = await this.redis.hgetall(this.key);
    return Object.entries(all).map(([id, j]) => ({ id, ...(JSON.parse(j) as IssuedKey) }));
  }

  /** Revokes by key id (its SHA-256) or by the key itself. */
  async revoke(idOrKey: string): Promise<boolean> {
    const id = /^[a-f0-9]{64}$/.test(idOrKey) ? idOrKey : sha256(idOrKey);
    return (await this.redis.hdel(this.key, id)) === 1;
  }

  /** The key's owner as cached (null: known not to be a key); undefined when Redis must be asked. */
  cachedOwner(key: string, id = sha256(key)): string | null | undefined {
    const hit = this.cache.get(id);
    return hit && hit.until > Date.now() ? hit.owner : undefined;
  }

  async ownerOf(key: string): Promise<string | null> {
    const id = sha256(key);
    const hit = this.cachedOwner(key, id);
    if (hit !== undefined) return hit;
    const j = await this.redis.hget(this.key, id);
    const owner = j ? (JSON.parse(j) as IssuedKey).owner : null;
    // Short cache: revocation takes effect within CACHE_MS on every API replica.
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(id, { owner, until: Date.now() + CACHE_MS });
    return owner;
  }
}

export class IssuedKeyAuth implements Authenticator {
  constructor(private readonly keys: KeyStore) {}
  known(header: string | undefined): Caller | undefined {
    const m = header ? BEARER.exec(header.trim()) : null;
    const owner = m ? this.keys.cachedOwner(m[1]) : undefined;
    return owner ? { owner: `key:${owner}` } : undefined;
  }

  async authenticate(header: string | undefined): Promise<Caller> {
    const key = parseBearer(header);
    const owner = await this.keys.ownerOf(key);
    if (!owner) throw new KilnError('invalid_api_key', 'The API key is not known or was revoked.');
    return { owner: `key:${owner}` };
  }
}
