// The report of `npm run bench`: its rows, the ratios against each baseline, and the table it
// prints and writes to bench/last-run.md.
import { cpus, totalmem } from 'node:os';
import { readFileSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { binary, ROOT } from '../../scripts/services.js';
import { fmt, pct, rssMiB, type LoadResult } from '../lib.js';
import { ROUNDS, TOTAL_TASKS, type Row } from './context.js';

/** RSS of the API: the first process (which also supervises) and the others (or the one process). */
export function apiRss(pid: number): string {
  let children: number[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    /* gone */
  }
  const own = `${fmt(rssMiB(pid))} MiB`;
  return children.length ? `first ${own}, others ${children.map((c) => `${fmt(rssMiB(c))}`).join(' / ')} MiB` : own;
}

/** The median of each figure over the rounds. */
export function median(rs: LoadResult[]): LoadResult {
  const m = (f: (r: LoadResult) => number) => pct(rs.map(f), 50);
  return {
    rps: m((r) => r.rps),
    p50: m((r) => r.p50),
    p99: m((r) => r.p99),
    errors: rs.reduce((a, r) => a + r.errors, 0),
    non2xx: rs.reduce((a, r) => a + r.non2xx, 0),
  };
}

export const roundsText = (rs: LoadResult[]) => `rounds ${rs.map((r) => fmt(r.rps, 0)).join(', ')} req/s`;

/**
 * The ratio of the medians, and each round's own ratio (a round runs both kinds back to back, so
 * its ratio shares the machine's state of the moment): how far this machine's noise moves it.
 */
export function timeRatios(kiln: number[], base: number[]): string {
  const each = kiln.map((k, i) => k / base[i]);
  return (
    `time ${fmt(pct(kiln, 50) / pct(base, 50), 2)}× ` +
    `(by round ${each.map((x) => fmt(x, 2)).join(', ')}; their median ${fmt(pct(each, 50), 2)}×)`
  );
}

/** Throughput and p50 against the baseline: the median of the per-round ratios, and each round's. */
export function roundRatios(kiln: LoadResult[], base: LoadResult[]): string {
  const rps = kiln.map((k, i) => k.rps / base[i].rps);
  const p50 = kiln.map((k, i) => k.p50 / base[i].p50);
  return (
    `throughput ${fmt(pct(rps, 50), 2)}× (rounds ${rps.map((x) => fmt(x, 2)).join(', ')}) · ` +
    `p50 ${fmt(pct(p50, 50), 2)}×`
  );
}

export function report(rows: Row[], o: { seconds: number; layout: 'pinned' | 'apart' | undefined }) {
  const cell = (r?: LoadResult | string) =>
    r === undefined
      ? ''
      : typeof r === 'string'
        ? r
        : `${fmt(r.rps, 0)} req/s · p50 ${fmt(r.p50)} ms · ` +
          `p99 ${fmt(r.p99)} ms${r.errors + r.non2xx ? ` · ${r.errors + r.non2xx} errors` : ''}`;
  const ratio = (a: LoadResult | string, b?: LoadResult | string) => {
    if (typeof a === 'string' || b === undefined || typeof b === 'string') return '';
    return Number.isFinite(a.rps) && Number.isFinite(b.rps)
      ? `throughput ${fmt(a.rps / b.rps, 2)}× · p50 ${fmt(a.p50 / b.p50, 2)}×`
      : `p50 ${fmt(a.p50 / b.p50, 2)}× · p99 ${fmt(a.p99 / b.p99, 2)}×`;
  };
  const temporalVersion = execFileSync(binary('temporal', 'TEMPORAL_BIN'), ['--version']).toString().trim();
  const redisVersion = execFileSync(binary('redis-server', 'REDIS_SERVER_BIN'), ['--version'])
    .toString()
    .match(/v=(\S+)/)?.[1];
  const lines = [
    `Run: \`npm run bench\` (BENCH_SECONDS=${o.seconds}, BENCH_ROUNDS=${ROUNDS}, BENCH_TASKS=${TOTAL_TASKS}${process.env.BENCH_ONLY ? `, BENCH_ONLY=${process.env.BENCH_ONLY}` : ''}) on ${new Date().toISOString()}`,
    `Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${fmt(totalmem() / 2 ** 30)} GiB; ` +
      `Node ${process.version}; ${temporalVersion}; redis-server ${redisVersion}`,
    o.layout === 'pinned'
      ? 'Pinned (BENCH_PIN=1): Temporal dev server (SQLite), workers and Redis on CPU 0; API and load generator on CPU 1.'
      : o.layout === 'apart'
        ? 'Pinned apart (BENCH_PIN=apart): Temporal dev server (SQLite) and Redis on CPU 0; workers, API and load generator on CPU 1.'
        : 'Load generator, API, worker, Temporal dev server (SQLite) and Redis all share those cores.',
    '',
    '| Scenario | Kiln | Baseline | Kiln / baseline |',
    '|---|---|---|---|',
    ...rows.map((r) => {
      const baseline = r.baseName ? `${r.baseName}: ${cell(r.base)}` : (r.note ?? '');
      return `| ${r.what} | ${cell(r.kiln)} | ${baseline} | ${r.ratioText ?? ratio(r.kiln, r.base)} |`;
    }),
  ];
  const text = lines.join('\n');
  writeFileSync(join(ROOT, 'bench', 'last-run.md'), `${text}\n`);
  console.log(text);
}
