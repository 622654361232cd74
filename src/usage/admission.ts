// A submit's admission: the caller's limits checked and its units reserved (one script round trip),
// before any workflow starts. Refusals are 429s that say which limit, with Retry-After.
import type { AdmissionAsk } from '../tasks/service.js';
import { KilnError, type ErrorCode } from '../shared/errors.js';
import { keyLimits, REFUSALS, type LimitName } from '../config/limits.js';
import type { Admissions, AdmitOutcome } from './store.js';

const LIMIT_TEXT: Record<LimitName, string> = {
  max_unfinished: 'limit of unfinished tasks',
  submits_per_minute: 'limit of submits per minute',
  daily_units: 'daily quota of units',
  monthly_units: 'monthly quota of units',
};

const WHEN: Partial<Record<LimitName, string>> = {
  daily_units: 'it resets at 00:00 UTC',
  monthly_units: 'it resets on the first of the month, 00:00 UTC',
  max_unfinished: 'retry once one of your tasks has finished',
};

/** What `admit` refuses with (the 429s, and 503 when Redis cannot answer): every operation that submits documents them. */
export const ADMISSION_ERRORS: readonly ErrorCode[] = [
  ...new Set(Object.values(REFUSALS).map((r) => r.code)),
  'service_unavailable',
];

export type Admit = AdmissionAsk;

/**
 * Reserves the submit's units, or throws the refusal. `fresh` is false when the task id already
 * held a reservation (a keyed submit sent again): the caller undoes only a reservation it made.
 */
export async function admit(quota: Admissions, a: Admit, pollAfterSeconds: number): Promise<{ fresh: boolean }> {
  let outcome: AdmitOutcome;
  try {
    outcome = await quota.admit({
      owner: a.caller.owner,
      id: a.id,
      model: a.model.id,
      units: a.units,
      chargeFailed: a.model.chargeFailed,
      ...(a.caller.keyId ? { key: { id: a.caller.keyId, limits: keyLimits(a.caller.limits) } } : {}),
    });
  } catch {
    throw new KilnError('service_unavailable', 'Quotas cannot be checked right now (Redis); retry shortly.', 1);
  }
  if (outcome.admitted) return { fresh: outcome.fresh };
  const retryAfter =
    outcome.retryAfterMs === null ? pollAfterSeconds : Math.max(1, Math.ceil(outcome.retryAfterMs / 1000));
  const whose = outcome.scope === 'key' ? "This API key's" : "Your account's";
  const when = WHEN[outcome.limit] ?? `retry in ${retryAfter} s`;
  throw new KilnError(
    outcome.code,
    `${whose} ${LIMIT_TEXT[outcome.limit]} (${outcome.limit}) is reached; ${when}. This submit was not queued.`,
    retryAfter,
  );
}
