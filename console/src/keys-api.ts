// The managed-keys admin calls of the Keys page (src/keys/routes.ts), with the operator token: list,
// issue, change limits, revoke. The answers' shapes are checked loosely, enough to render them.
import { adminCall, type AdminAnswer } from './operator.js';

export const LIMIT_NAMES = ['max_unfinished', 'submits_per_minute', 'daily_units', 'monthly_units'] as const;
export type LimitName = (typeof LIMIT_NAMES)[number];
/** A key's own limits; null: none of its own (the owner's limits apply all the same). */
export type Limits = Record<LimitName, number | null>;
/** The largest limit the API accepts (src/config/limits.ts). */
export const MAX_LIMIT = 1_000_000_000;

/** An API key as the admin API shows it: never the key itself. */
export interface KeyView {
  id: string;
  object: 'api_key';
  owner: string;
  label: string | null;
  hint: string;
  created_at: number;
  last_used_at: number | null;
  expires_at: number | null;
  revoked_at: number | null;
  models: string[] | null;
  /** Absent on a Kiln from before per-key limits. */
  limits?: Limits;
}

/** The answer of an issue: the only time the key itself is seen. */
export interface CreatedKey extends KeyView {
  key: string;
}

export interface NewKeyBody {
  owner: string;
  label?: string;
  models?: string[];
  limits?: Partial<Limits>;
}

/** Keys per page: the API's largest. */
const PAGE = 100;
const BASE = '/admin/v1/keys';

const isKey = (b: unknown): b is KeyView => (b as { object?: unknown } | null)?.object === 'api_key';
const isCreated = (b: unknown): b is CreatedKey => isKey(b) && typeof (b as { key?: unknown }).key === 'string';
const isPage = (b: unknown): b is { data: KeyView[]; has_more: boolean } =>
  Array.isArray((b as { data?: unknown } | null)?.data);

export const listKeys = (token: string, after?: string) =>
  adminCall(token, `${BASE}?limit=${PAGE}${after ? `&after=${encodeURIComponent(after)}` : ''}`, isPage);

export const createKey = (token: string, body: NewKeyBody): Promise<AdminAnswer<CreatedKey>> =>
  adminCall(token, BASE, isCreated, { method: 'POST', json: body });

/** Only the limits sent change; null clears one. */
export const updateLimits = (token: string, id: string, limits: Partial<Limits>) =>
  adminCall(token, `${BASE}/${encodeURIComponent(id)}`, isKey, { method: 'PATCH', json: { limits } });

export const revokeKey = (token: string, id: string) =>
  adminCall(token, `${BASE}/${encodeURIComponent(id)}/revoke`, isKey, { method: 'POST' });

export type KeyState = 'active' | 'revoked' | 'expired';

export function stateOf(k: KeyView, nowSeconds: number): KeyState {
  if (k.revoked_at !== null) return 'revoked';
  if (k.expires_at !== null && k.expires_at <= nowSeconds) return 'expired';
  return 'active';
}
