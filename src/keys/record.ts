// What Kiln stores about an issued API key, and the pure rules around it: how a key and its id are
// made, how a stored record reads (records written before managed keys included), whether a key may
// be used now, and its public form. The secret itself is in none of these: only its SHA-256 is kept.
import { createHash, randomBytes } from 'node:crypto';
import { keyLimits, LIMIT_NAMES, patchLimits, type Limits, type LimitsPatch } from '../config/limits.js';

export const KEY_PREFIX = 'kiln_sk_';
/** Characters of the key shown in listings: the prefix and 4 of its 32 random characters (24 of 192 bits). */
export const HINT_CHARS = 12;

export const LIMITS = {
  ownerChars: 64,
  labelChars: 128,
  /** Models on one key's allow-list. */
  models: 64,
  modelIdChars: 256,
  /** The latest expires_at accepted: 9999-12-31T23:59:59Z. */
  latestExpiry: 253_402_300_799,
  listPage: 100,
} as const;

export interface KeyRecord {
  id: string;
  owner: string;
  label: string | null;
  hint: string;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
  /** The only model ids the key may use; null: every model. */
  models: string[] | null;
  /** The key's own limits, counted over this key alone (absent or null fields: none of its own). */
  limits?: Partial<Limits> | null;
}

/** The answer of the admin API: the record with its last use, never the secret. */
export interface KeyView extends Omit<KeyRecord, 'limits'> {
  object: 'api_key';
  last_used_at: number | null;
  /** Every limit of the key's own, null where it has none (the owner's limits apply all the same). */
  limits: Limits;
}

export const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

export const nowSeconds = () => Math.floor(Date.now() / 1000);

/**
 * A new key: 192 random bits (so an unsalted SHA-256 is a safe way to store it), and its record id:
 * the time in ms, then 48 random bits, so keys issued within one second still list in issue order
 * and one issued while an operator pages through the list lands after the page being read.
 */
export function newKey(nowMs = Date.now()): { secret: string; id: string } {
  return {
    secret: `${KEY_PREFIX}${randomBytes(24).toString('base64url')}`,
    id: `key_${nowMs.toString(16).padStart(12, '0')}${randomBytes(6).toString('hex')}`,
  };
}

/** Keys issued before managed keys had no id: theirs comes from the hash, so every process agrees on it. */
export const legacyId = (hash: string) => `key_${hash.slice(0, 24)}`;

/**
 * A stored record as JSON. A legacy record (`{owner, name, created_at, hint}`, keyed by the same
 * hash) reads as a key with its name as label, no expiry, no restriction. Undefined when unreadable.
 */
export function readRecord(hash: string, json: string): KeyRecord | undefined {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return undefined;
  }
  if (!v || typeof v.owner !== 'string') return undefined;
  if (typeof v.id === 'string') return v as unknown as KeyRecord;
  return {
    id: legacyId(hash),
    owner: v.owner,
    label: typeof v.name === 'string' ? v.name : null,
    hint: typeof v.hint === 'string' ? v.hint : '',
    created_at: typeof v.created_at === 'number' ? v.created_at : 0,
    expires_at: null,
    revoked_at: null,
    models: null,
  };
}

/** Only the record's own fields, in a fixed order (the JSON stored is compared when updating). */
export const recordJson = (r: KeyRecord): string =>
  JSON.stringify({
    id: r.id,
    owner: r.owner,
    label: r.label,
    hint: r.hint,
    created_at: r.created_at,
    expires_at: r.expires_at,
    revoked_at: r.revoked_at,
    models: r.models,
    ...(r.limits ? { limits: r.limits } : {}),
  });

export type KeyState = 'active' | 'revoked' | 'expired';

/** `nowMs` in milliseconds: a key expires at its second, not up to a second later. */
export function keyState(r: Pick<KeyRecord, 'revoked_at' | 'expires_at'>, nowMs = Date.now()): KeyState {
  if (r.revoked_at !== null) return 'revoked';
  if (r.expires_at !== null && r.expires_at * 1000 <= nowMs) return 'expired';
  return 'active';
}

export const keyView = (r: KeyRecord, lastUsedAt: number | null): KeyView => ({
  id: r.id,
  object: 'api_key',
  owner: r.owner,
  label: r.label,
  hint: r.hint,
  created_at: r.created_at,
  last_used_at: lastUsedAt,
  expires_at: r.expires_at,
  revoked_at: r.revoked_at,
  models: r.models,
  limits: keyLimits(r.limits),
});

/** The listing order: oldest first, so keys issued while paging land on later pages, never shift earlier ones. */
export const byCreation = (a: KeyRecord, b: KeyRecord) =>
  a.created_at - b.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** One page of `sorted` after the key `after` (exclusive; itself filtered out of `sorted` or not). */
export function pageAfter<T extends KeyRecord>(
  sorted: readonly T[],
  after: KeyRecord | undefined,
  limit: number,
): { page: T[]; hasMore: boolean } {
  const start = after ? sorted.findIndex((r) => byCreation(r, after) > 0) : 0;
  if (start < 0) return { page: [], hasMore: false };
  return { page: sorted.slice(start, start + limit), hasMore: sorted.length > start + limit };
}

/** What a PATCH may change; an absent field stays, null clears. */
export interface KeyPatch {
  label?: string | null;
  expires_at?: number | null;
  models?: string[] | null;
  /** Merged into the key's limits: an absent field stays, null removes that limit. */
  limits?: LimitsPatch;
}

export function patched(r: KeyRecord, p: KeyPatch): KeyRecord {
  const limits = p.limits === undefined ? undefined : ownLimits(patchLimits(keyLimits(r.limits), p.limits));
  return {
    ...r,
    ...(limits !== undefined ? { limits } : {}),
    ...(p.label !== undefined ? { label: p.label } : {}),
    ...(p.expires_at !== undefined ? { expires_at: p.expires_at } : {}),
    ...(p.models !== undefined ? { models: p.models } : {}),
  };
}

/** Only the limits that are set, or null when none is (so records without limits keep their JSON). */
export function ownLimits(l: Limits): Partial<Limits> | null {
  const own: Partial<Limits> = {};
  for (const n of LIMIT_NAMES) if (l[n] !== null) own[n] = l[n];
  return Object.keys(own).length ? own : null;
}
