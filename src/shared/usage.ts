// The usage counters as the ledger keeps them and the reports (GET /v1/usage, the CLI) give them:
// one list, so the API, its documents and the CLI name them alike. Pure types and constants only.

/** What the ledger counts per owner, model and UTC day, but for the upstream time (kept in ms, reported in s). */
export const TASK_COUNTERS = [
  'submitted',
  'succeeded',
  'failed',
  'canceled',
  'uncertain',
  'released',
  'units',
] as const;

/** A report row's counters, in the order the JSON and the CSV give them. */
export const COUNTERS = [...TASK_COUNTERS, 'upstream_seconds'] as const;
export type Counter = (typeof COUNTERS)[number];
export type Counters = Record<Counter, number>;

export interface UsageRow extends Counters {
  date?: string;
  owner?: string;
  model?: string;
}
