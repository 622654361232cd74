// The Usage page's data: GET /v1/usage's answer, the date range asked for (UTC days, as the ledger
// counts them), and the numbers in words. No DOM here, so the chart and the table share it.
import type { Counters } from '../../src/shared/usage.js';

/** The ledger's counters of one day and model, or of the whole range (`total`). */
export type UsageCounts = Counters;

export interface UsageRow extends UsageCounts {
  /** YYYY-MM-DD, the UTC day the tasks were submitted. */
  date: string;
  model: string;
}

export interface UsageAnswer {
  object: 'usage';
  from: string;
  to: string;
  group_by: string[] | string;
  data: UsageRow[];
  total: UsageCounts;
}

/** The ranges offered, in days ending today (UTC); the first page shows the middle one. */
export const RANGES = [7, 30, 90] as const;
export type RangeDays = (typeof RANGES)[number];
export const DEFAULT_RANGE: RangeDays = 30;

const DAY_MS = 86_400_000;
const isoDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** `from` and `to` (both included) of the last `days` UTC days, today the last of them. */
export function rangeOf(days: number, nowMs = Date.now()): { from: string; to: string } {
  return { from: isoDay(nowMs - (days - 1) * DAY_MS), to: isoDay(nowMs) };
}

/** Every day from `from` to `to`, both included: the chart's axis has the days without usage too. */
export function daysBetween(from: string, to: string): string[] {
  const out: string[] = [];
  for (let t = Date.parse(`${from}T00:00:00Z`); t <= Date.parse(`${to}T00:00:00Z`); t += DAY_MS) out.push(isoDay(t));
  return out;
}

/** "Mar 5": a UTC day, short. */
export const dayLabel = (d: string) =>
  new Date(`${d}T00:00:00Z`).toLocaleDateString('en', { month: 'short', day: 'numeric', timeZone: 'UTC' });

export const count = (n: number) => n.toLocaleString('en');

/** Upstream time: "12.5 s", "4 min 3 s", "2 h 5 min". */
export function duration(seconds: number): string {
  if (seconds < 60) return `${Math.round(seconds * 10) / 10} s`;
  const s = Math.round(seconds);
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/** Newest day first, then by model: the table's order. */
export const byDayThenModel = (a: UsageRow, b: UsageRow) =>
  a.date === b.date ? a.model.localeCompare(b.model) : a.date < b.date ? 1 : -1;
