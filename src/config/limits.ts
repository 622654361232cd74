// Limits on what an owner (and each of its keys) may submit: unfinished tasks, submits per minute,
// and units per UTC day and month. Deployment defaults come from the environment (OWNER_*), an
// operator may set an owner's own (PUT /admin/v1/owners/{owner}/limits, kept in Redis beside the
// owner's counters), and a key may carry tighter ones of its own, counted over that key alone.
import { z } from 'zod';

export const LIMIT_NAMES = ['max_unfinished', 'submits_per_minute', 'daily_units', 'monthly_units'] as const;
export type LimitName = (typeof LIMIT_NAMES)[number];

/** null: no limit of this kind. */
export type Limits = Record<LimitName, number | null>;

/** The largest limit accepted (fits a Lua number exactly, and no owner needs more). */
export const MAX_LIMIT = 1_000_000_000;

const limit = z.number().int().min(0).max(MAX_LIMIT).nullable();

/** A change to limits: an absent field stays, null removes that limit. */
export const LimitsPatchSchema = z
  .object({
    max_unfinished: limit.optional(),
    submits_per_minute: limit.optional(),
    daily_units: limit.optional(),
    monthly_units: limit.optional(),
  })
  .strict();
export type LimitsPatch = z.infer<typeof LimitsPatchSchema>;

export const NO_LIMITS: Limits = {
  max_unfinished: null,
  submits_per_minute: null,
  daily_units: null,
  monthly_units: null,
};

/** `base` with `patch` applied; every field present in the answer. */
export function patchLimits(base: Limits, patch: LimitsPatch): Limits {
  const out = { ...base };
  for (const name of LIMIT_NAMES) if (patch[name] !== undefined) out[name] = patch[name];
  return out;
}

/** A key's own limits as stored in its record (absent in records written before limits). */
export function keyLimits(stored: Partial<Limits> | null | undefined): Limits {
  return patchLimits(NO_LIMITS, stored ?? {});
}

/** As the admission script takes them: -1 for no limit. */
export const limitArgs = (l: Limits): number[] => LIMIT_NAMES.map((n) => l[n] ?? -1);

/** What a refusal names, in the order the admission script checks them. */
export const REFUSALS = {
  1: { code: 'concurrency_limit_exceeded', limit: 'max_unfinished' },
  2: { code: 'rate_limited', limit: 'submits_per_minute' },
  3: { code: 'quota_exceeded', limit: 'daily_units' },
  4: { code: 'quota_exceeded', limit: 'monthly_units' },
} as const;
