// Issued API keys in Redis, all in one hash (`<prefix>apikeys`, where the keys have always been):
// one key is one slot on a Redis Cluster, so every command and script here is Cluster-safe and a
// script may change several fields at once. Fields:
//   <sha256 of the key>  the record as JSON (src/keys/record.ts); authentication reads it by hash
//   id:<key id>          that hash, for the admin calls, which name keys by id
//   used:<sha256>        last use, epoch seconds (written at most about once a minute per key)
// The key itself is stored nowhere: it is 192 random bits, so its unsalted SHA-256 reveals nothing.
import type { RedisClient } from '../tasks/store/task-store.js';
import {
  byCreation,
  HINT_CHARS,
  keyView,
  legacyId,
  newKey,
  nowSeconds,
  ownLimits,
  pageAfter,
  patched,
  readRecord,
  recordJson,
  sha256,
  type KeyPatch,
  type KeyRecord,
  type KeyView,
} from './record.js';
import { NO_LIMITS, patchLimits, type LimitsPatch } from '../config/limits.js';
import { OWNER_NAME } from '../infra/callers.js';

/**
 * Compare and set: writes field ARGV[1] = ARGV[3] (and ARGV[4] = ARGV[5] when given) only while
 * ARGV[1] still holds ARGV[2] ('' = absent). Updates are read-modify-write in TypeScript and
 * retried on a conflict; WATCH is no option on a Cluster client.
 */
const CAS = `
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if (cur or '') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
if ARGV[4] then redis.call('HSET', KEYS[1], ARGV[4], ARGV[5]) end
return 1`;

const HASH = /^[a-f0-9]{64}$/;
const CONFLICT_RETRIES = 5;

export interface NewKey {
  label?: string | null;
  expires_at?: number | null;
  models?: string[] | null;
  limits?: LimitsPatch;
}

export interface KeyPage {
  data: KeyView[];
  has_more: boolean;
}

const seconds = (v: string | null | undefined) => (v ? Number(v) : null);

export class KeyStore {
  private upgrade?: Promise<void>;
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {}
  private get key() {
    return `${this.prefix}apikeys`;
  }

  private async cas(field: string, expected: string, value: string, extra?: [string, string]): Promise<boolean> {
    return (await this.redis.eval(CAS, 1, this.key, field, expected, value, ...(extra ?? []))) === 1;
  }

  /** Issues a key: the secret is returned here once and kept nowhere. */
  async create(owner: string, opts: NewKey = {}): Promise<{ key: string; record: KeyRecord }> {
    if (!OWNER_NAME.test(owner)) throw new Error('owner must be 1-64 characters of letters, digits, ".", "_" or "-"');
    const { secret, id } = newKey();
    const hash = sha256(secret);
    const limits = opts.limits ? ownLimits(patchLimits(NO_LIMITS, opts.limits)) : null;
    const record: KeyRecord = {
      id,
      owner,
      label: opts.label ?? null,
      hint: secret.slice(0, HINT_CHARS),
      created_at: nowSeconds(),
      expires_at: opts.expires_at ?? null,
      revoked_at: null,
      models: opts.models ?? null,
      ...(limits ? { limits } : {}),
    };
    if (!(await this.cas(hash, '', recordJson(record), [`id:${id}`, hash])))
      throw new Error('key collision: retry the create');
    return { key: secret, record };
  }

  /** Authentication's read: the record of the key with this SHA-256, and its last use. */
  async lookup(hash: string): Promise<{ record: KeyRecord; lastUsedAt: number | null } | null> {
    const [json, used] = await this.redis.hmget(this.key, hash, `used:${hash}`);
    const record = json ? readRecord(hash, json) : undefined;
    return record ? { record, lastUsedAt: seconds(used) } : null;
  }

  /** Records a use (authentication decides how often: no write per request). */
  async touch(hash: string, at: number): Promise<void> {
    await this.redis.hset(this.key, `used:${hash}`, String(at));
  }

  async get(id: string): Promise<KeyView | null> {
    const hash = await this.hashOf(id);
    const found = hash ? await this.lookup(hash) : null;
    return found && keyView(found.record, found.lastUsedAt);
  }

  /** Oldest first; undefined when `after` names no key. */
  async list(q: { owner?: string; after?: string; limit: number }): Promise<KeyPage | undefined> {
    await this.upgraded();
    const all = await this.redis.hgetall(this.key);
    const records: KeyRecord[] = [];
    for (const [field, json] of Object.entries(all)) {
      const r = HASH.test(field) ? readRecord(field, json) : undefined;
      if (r) records.push(r);
    }
    records.sort(byCreation);
    const after = q.after === undefined ? undefined : records.find((r) => r.id === q.after);
    if (q.after !== undefined && !after) return undefined;
    const { page, hasMore } = pageAfter(
      q.owner === undefined ? records : records.filter((r) => r.owner === q.owner),
      after,
      q.limit,
    );
    const usedOf = (r: KeyRecord) => seconds(all[`used:${all[`id:${r.id}`]}`]);
    return { data: page.map((r) => keyView(r, usedOf(r))), has_more: hasMore };
  }

  update(id: string, patch: KeyPatch): Promise<KeyView | null> {
    return this.change(id, (r) => patched(r, patch));
  }

  /** Idempotent: a revoked key keeps its first revoked_at. */
  revoke(id: string): Promise<KeyView | null> {
    return this.change(id, (r) => (r.revoked_at === null ? { ...r, revoked_at: nowSeconds() } : r));
  }

  /** A key's id from its id, the key itself, or its SHA-256 (the id `npm run keys` listed before ids). */
  async idOf(ref: string): Promise<string | null> {
    if (ref.startsWith('key_')) return ref;
    await this.upgraded();
    const found = await this.lookup(HASH.test(ref) ? ref : sha256(ref));
    return found?.record.id ?? null;
  }

  /** The SHA-256 of the key with this id. */
  private async hashOf(id: string): Promise<string | null> {
    await this.upgraded();
    const hash = await this.redis.hget(this.key, `id:${id}`);
    if (hash) return hash;
    // Perhaps a key an older Kiln (still running in a rolling upgrade) issued since the upgrade.
    this.upgrade = undefined;
    await this.upgraded();
    return this.redis.hget(this.key, `id:${id}`);
  }

  private async change(id: string, next: (r: KeyRecord) => KeyRecord): Promise<KeyView | null> {
    for (let i = 0; i < CONFLICT_RETRIES; i++) {
      const hash = await this.hashOf(id);
      if (!hash) return null;
      const [json, used] = await this.redis.hmget(this.key, hash, `used:${hash}`);
      const record = json ? readRecord(hash, json) : undefined;
      if (!record) return null;
      const changed = recordJson(next(record));
      if (changed === json || (await this.cas(hash, json!, changed)))
        return keyView(JSON.parse(changed) as KeyRecord, seconds(used));
    }
    throw new Error(`key ${id} kept changing under this update; retry`);
  }

  /**
   * Gives keys issued before managed keys (no id in their record) their id and id field, once per
   * process. Their derived id is the same in every process, so concurrent upgrades agree.
   */
  private upgraded(): Promise<void> {
    this.upgrade ??= (async () => {
      const all = await this.redis.hgetall(this.key);
      for (const [field, json] of Object.entries(all)) {
        const r = HASH.test(field) ? readRecord(field, json) : undefined;
        if (r && r.id === legacyId(field) && !(await this.redis.hexists(this.key, `id:${r.id}`)))
          await this.cas(field, json, recordJson(r), [`id:${r.id}`, field]);
      }
    })().catch((err: unknown) => {
      this.upgrade = undefined;
      throw err;
    });
    return this.upgrade;
  }
}
