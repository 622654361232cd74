// `kiln usage`: the caller's usage (GET /v1/usage) as a table, with the API key like the other user
// commands. The operator's `kiln admin usage` (src/cli/admin-usage.ts) prints its rows the same way.
import type { Command } from 'commander';
import { COUNTERS, type Counters, type UsageRow } from '../shared/usage.js';
import type { Ctx } from './context.js';

type Make = (cmd: Command) => Ctx;

export interface UsageReport {
  object: 'usage';
  from: string;
  to: string;
  group_by: string;
  owner?: string | null;
  data: UsageRow[];
  total: Counters;
}

/** The report's query: only the options given (the server applies its defaults). */
export const usageQuery = (o: { from?: string; to?: string; groupBy?: string }) => ({
  from: o.from,
  to: o.to,
  group_by: o.groupBy,
});

const HEADER: Record<string, string> = { upstream_seconds: 'upstream_s' };
const num = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(1));

/** The rows as an aligned table, with a total line; the text columns those the grouping has. */
export function usageTable(r: UsageReport, withOwner = false): string {
  const text = [
    ...(r.group_by !== 'model' ? (['date'] as const) : []),
    ...(withOwner ? (['owner'] as const) : []),
    ...(r.group_by !== 'day' ? (['model'] as const) : []),
  ];
  const header = [...text, ...COUNTERS.map((c) => HEADER[c] ?? c)];
  const lines = r.data.map((row) => [...text.map((t) => row[t] ?? ''), ...COUNTERS.map((c) => num(row[c]))]);
  const total = [...text.map((_, i) => (i === 0 ? 'total' : '')), ...COUNTERS.map((c) => num(r.total[c]))];
  const all = [header, ...lines, total];
  const width = header.map((_, i) => Math.max(...all.map((l) => l[i].length)));
  const fmt = (l: string[]) =>
    l
      .map((v, i) => (i < text.length ? v.padEnd(width[i]) : v.padStart(width[i])))
      .join('  ')
      .trimEnd();
  return [fmt(header), ...lines.map(fmt), fmt(total)].join('\n');
}

/** The report's heading: its range and grouping. */
export const usageHeading = (r: UsageReport) =>
  `usage ${r.from} to ${r.to} by ${r.group_by}${r.owner ? ` of ${r.owner}` : ''}` +
  `${r.data.length ? '' : ': nothing counted'}`;

export const usageOptions = (cmd: Command) =>
  cmd
    .option('--from <date>', 'first day (UTC), YYYY-MM-DD (default: 29 days before --to)')
    .option('--to <date>', 'last day (UTC), YYYY-MM-DD (default: today); at most 400 days in all')
    .option('--group-by <g>', 'a row per day, model, or day,model (default: day)');

export function registerUsageCommands(program: Command, make: Make): void {
  usageOptions(program.command('usage'))
    .description(
      'your usage per UTC day and/or model: tasks submitted and how they ended, units charged, upstream time ' +
        '(all keys of your owner count; docs/usage.md)',
    )
    .action(async (o: { from?: string; to?: string; groupBy?: string }, cmd: Command) => {
      const ctx = make(cmd);
      const r = (
        await ctx.kiln.request<UsageReport>('GET', '/v1/usage', { query: usageQuery(o), signal: ctx.abort.signal })
      ).data;
      ctx.out(r);
      ctx.note(usageHeading(r));
      ctx.say(usageTable(r));
    });
}
