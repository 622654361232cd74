// The usage reports (GET /v1/usage, GET /admin/v1/usage): the date range asked for, the ledger's
// counters (store.ts) grouped by day, model (and owner, for operators), and the same rows as CSV.
// Pure functions of the ledger: the routes (routes.ts) read it and answer what these return.
import { KilnError } from '../shared/errors.js';
import { COUNTERS, type Counters, type UsageRow } from '../shared/usage.js';
import { emptyCounts, isoDay, LEDGER_FIELDS, type LedgerCounts } from './store.js';

export const GROUPINGS = ['day', 'model', 'day,model'] as const;
export type GroupBy = (typeof GROUPINGS)[number];

/** The longest range one report covers, in days (both ends included); the ledger keeps as many. */
export const MAX_RANGE_DAYS = 400;
/** The range without `from`: the 30 days up to `to`. */
export const DEFAULT_RANGE_DAYS = 30;

const DAY_MS = 86_400_000;

export const DATE_FORMAT = /^\d{4}-\d{2}-\d{2}$/;

/** Epoch ms of a YYYY-MM-DD day's start (UTC), or null when no such day exists (2026-02-30). */
export function dayStart(date: string): number | null {
  if (!DATE_FORMAT.test(date)) return null;
  const [y, m, d] = date.split('-').map(Number);
  const ms = Date.UTC(y, m - 1, d);
  // Date.UTC rolls over (Feb 30 -> Mar 2; years below 100 -> 19xx): only a day that reads back is one.
  return new Date(ms).toISOString().slice(0, 10) === date ? ms : null;
}

const isoOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

export interface UsageRange {
  from: string;
  to: string;
  /** Start of `from`, epoch ms. */
  fromMs: number;
  /** Every day of the range as the ledger names them (YYYYMMDD), oldest first. */
  days: string[];
}

/**
 * The range a report covers: `to` defaults to today (UTC), `from` to 29 days before `to`. Both are
 * checked days (the query schema checks their form); refused when `from` is after `to` or the
 * range is longer than MAX_RANGE_DAYS.
 */
export function usageRange(q: { from?: string; to?: string }, nowMs = Date.now()): UsageRange {
  const at = (name: 'from' | 'to', v: string) => {
    const ms = dayStart(v);
    if (ms === null) throw new KilnError('invalid_request', `query.${name}: "${v}" is not a day of the calendar.`);
    return ms;
  };
  const toMs = q.to === undefined ? Date.UTC(...ymd(nowMs)) : at('to', q.to);
  const fromMs = q.from === undefined ? toMs - (DEFAULT_RANGE_DAYS - 1) * DAY_MS : at('from', q.from);
  const from = isoOf(fromMs);
  const to = isoOf(toMs);
  if (fromMs > toMs)
    throw new KilnError(
      'invalid_request',
      `query.from: ${from} is after query.to (${to}${q.to === undefined ? ', today' : ''}): from must be on or before to.`,
    );
  const n = Math.round((toMs - fromMs) / DAY_MS) + 1;
  if (n > MAX_RANGE_DAYS)
    throw new KilnError(
      'invalid_request',
      `query: ${from} to ${to} is ${n} days; a report covers at most ${MAX_RANGE_DAYS} days (both ends included).`,
    );
  const days = Array.from({ length: n }, (_, i) => isoOf(fromMs + i * DAY_MS).replaceAll('-', ''));
  return { from, to, fromMs, days };
}

function ymd(ms: number): [number, number, number] {
  const d = new Date(ms);
  return [d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()];
}

/** One owner's ledger (QuotaStore.usage): day (YYYYMMDD) -> model -> counts. */
export type Ledger = Map<string, Map<string, LedgerCounts>>;

function add(into: LedgerCounts, c: LedgerCounts) {
  for (const f of LEDGER_FIELDS) into[f] += c[f];
}

function counters(c: LedgerCounts): Counters {
  return {
    submitted: c.submitted,
    succeeded: c.succeeded,
    failed: c.failed,
    canceled: c.canceled,
    uncertain: c.uncertain,
    released: c.released,
    units: c.units,
    upstream_seconds: c.upstream_ms / 1000,
  };
}

const compare = (a?: string, b?: string) => ((a ?? '') < (b ?? '') ? -1 : (a ?? '') > (b ?? '') ? 1 : 0);

/**
 * The rows of a report: the ledgers summed per date and/or model (and per owner, when the ledgers
 * name one), only rows with a counter that is not zero, sorted by date, owner, model; and the total
 * of every counter over the whole range.
 */
export function usageRows(
  ledgers: readonly { owner?: string; ledger: Ledger }[],
  groupBy: GroupBy,
): { data: UsageRow[]; total: Counters } {
  const byDay = groupBy !== 'model';
  const byModel = groupBy !== 'day';
  const groups = new Map<string, { date?: string; owner?: string; model?: string; c: LedgerCounts }>();
  const total = emptyCounts();
  for (const { owner, ledger } of ledgers) {
    for (const [day, models] of ledger) {
      for (const [model, c] of models) {
        const key = { date: byDay ? isoDay(day) : undefined, owner, model: byModel ? model : undefined };
        const id = JSON.stringify([key.date, key.owner, key.model]);
        let g = groups.get(id);
        if (!g) groups.set(id, (g = { ...key, c: emptyCounts() }));
        add(g.c, c);
        add(total, c);
      }
    }
  }
  const data = [...groups.values()]
    .filter((g) => LEDGER_FIELDS.some((f) => g.c[f] !== 0))
    .sort((a, b) => compare(a.date, b.date) || compare(a.owner, b.owner) || compare(a.model, b.model))
    .map((g) => ({
      ...(g.date !== undefined ? { date: g.date } : {}),
      ...(g.owner !== undefined ? { owner: g.owner } : {}),
      ...(g.model !== undefined ? { model: g.model } : {}),
      ...counters(g.c),
    }));
  return { data, total: counters(total) };
}

/** The CSV columns of a report: date, owner, model (those the grouping has; owner always), then the counters. */
export function csvColumns(groupBy: GroupBy): string[] {
  return [...(groupBy !== 'model' ? ['date'] : []), 'owner', ...(groupBy !== 'day' ? ['model'] : []), ...COUNTERS];
}

/** RFC 4180: a field with a comma, a double quote or a line break is quoted, its quotes doubled. */
export const csvField = (v: string | number | undefined): string => {
  const s = v === undefined ? '' : String(v);
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
};

/** The rows as CSV (RFC 4180, CRLF line ends): a header line, then one line per row. */
export function usageCsv(rows: readonly UsageRow[], groupBy: GroupBy): string {
  const columns = csvColumns(groupBy);
  const lines = [columns.join(',')];
  for (const r of rows) lines.push(columns.map((c) => csvField(r[c as keyof UsageRow])).join(','));
  return `${lines.join('\r\n')}\r\n`;
}
