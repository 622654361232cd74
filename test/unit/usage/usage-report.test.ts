// The usage reports' pure rules (src/usage/report.ts): the date range with its defaults and edges,
// the rows grouped, filtered and sorted, and RFC 4180 CSV. Over HTTP: test/integration/usage/usage-api.test.ts.
import { describe, expect, it } from 'vitest';
import { KilnError } from '../../../src/shared/errors.js';
import { csvColumns, csvField, dayStart, usageCsv, usageRange, usageRows } from '../../../src/usage/report.js';
import { emptyCounts, type LedgerCounts } from '../../../src/usage/store.js';

const NOW = Date.UTC(2026, 2, 1, 23, 59, 59); // 2026-03-01, just before midnight UTC

const refusal = (f: () => unknown): string => {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(KilnError);
    expect((err as KilnError).code).toBe('invalid_request');
    return (err as Error).message;
  }
  throw new Error('not refused');
};

describe('usageRange', () => {
  it('defaults to the 30 days up to today (UTC); `to` alone moves the window', () => {
    const r = usageRange({}, NOW);
    expect([r.from, r.to, r.days.length, r.days[0], r.days[29]]).toEqual([
      '2026-01-31',
      '2026-03-01',
      30,
      '20260131',
      '20260301',
    ]);
    expect(r.fromMs).toBe(Date.UTC(2026, 0, 31));
    expect(usageRange({ to: '2024-03-01' }, NOW).from).toBe('2024-02-01'); // a leap year
    expect(usageRange({ from: '2026-03-01' }, NOW).days).toEqual(['20260301']);
  });

  it('takes 400 days (both ends included) and refuses 401, an inverted range and impossible days', () => {
    expect(usageRange({ from: '2025-01-01', to: '2026-02-04' }, NOW).days.length).toBe(400);
    expect(refusal(() => usageRange({ from: '2025-01-01', to: '2026-02-05' }, NOW))).toBe(
      'query: 2025-01-01 to 2026-02-05 is 401 days; a report covers at most 400 days (both ends included).',
    );
    expect(refusal(() => usageRange({ from: '2026-03-02' }, NOW))).toMatch(
      /^query\.from: 2026-03-02 is after query\.to \(2026-03-01, today\)/,
    );
    expect(refusal(() => usageRange({ to: '2026-02-29' }, NOW))).toMatch(/^query\.to: "2026-02-29" is not a day/);
    expect(dayStart('2024-02-29')).toBe(Date.UTC(2024, 1, 29));
    for (const d of ['2025-02-29', '2026-04-31', '2026-00-10', '2026-1-1', '0099-01-01'])
      expect(dayStart(d), d).toBe(null);
  });
});

const counts = (c: Partial<LedgerCounts>): LedgerCounts => ({ ...emptyCounts(), ...c });

describe('usageRows and usageCsv', () => {
  const ledger = new Map([
    [
      '20260302',
      new Map([
        ['b', counts({ submitted: 1, units: 2, upstream_ms: 1500 })],
        ['a', counts({ submitted: 2, succeeded: 2, units: 4 })],
      ]),
    ],
    ['20260301', new Map([['b', counts({ submitted: 1, failed: 1 })]])],
    // A day whose counters came back to zero (a voided submit) gives no row.
    ['20260228', new Map([['a', counts({})]])],
  ]);

  it('sums per day and/or model, keeps rows with a count, sorts by date, owner, model', () => {
    const { data, total } = usageRows([{ ledger }], 'day,model');
    expect(data.map((r) => [r.date, r.model])).toEqual([
      ['2026-03-01', 'b'],
      ['2026-03-02', 'a'],
      ['2026-03-02', 'b'],
    ]);
    expect(data[2]).toStrictEqual({
      date: '2026-03-02',
      model: 'b',
      ...{ submitted: 1, succeeded: 0, failed: 0, canceled: 0, uncertain: 0, released: 0, units: 2 },
      upstream_seconds: 1.5,
    });
    expect(total).toMatchObject({ submitted: 4, succeeded: 2, failed: 1, units: 6, upstream_seconds: 1.5 });
    expect(usageRows([{ ledger }], 'model').data.map((r) => [r.model, r.submitted])).toEqual([
      ['a', 2],
      ['b', 2],
    ]);
    const byOwner = usageRows(
      [
        { owner: 'z', ledger },
        { owner: 'acme', ledger },
      ],
      'day',
    ).data;
    expect(byOwner.map((r) => [r.date, r.owner])).toEqual([
      ['2026-03-01', 'acme'],
      ['2026-03-01', 'z'],
      ['2026-03-02', 'acme'],
      ['2026-03-02', 'z'],
    ]);
    expect(Object.keys(byOwner[0])).toEqual(['date', 'owner', ...Object.keys(usageRows([], 'day').total)]);
  });

  it('writes RFC 4180 CSV: quoted fields with doubled quotes, CRLF line ends, the columns of the grouping', () => {
    expect(csvField('plain')).toBe('plain');
    expect(csvField('a,b')).toBe('"a,b"');
    expect(csvField('say "hi"')).toBe('"say ""hi"""');
    expect(csvField('two\nlines')).toBe('"two\nlines"');
    expect(csvField(1.5)).toBe('1.5');
    expect(csvColumns('model').slice(0, 3)).toEqual(['owner', 'model', 'submitted']);
    const { data } = usageRows([{ owner: 'x,"y"', ledger }], 'model');
    expect(usageCsv(data, 'model')).toBe(
      'owner,model,submitted,succeeded,failed,canceled,uncertain,released,units,upstream_seconds\r\n' +
        '"x,""y""",a,2,2,0,0,0,0,4,0\r\n' +
        '"x,""y""",b,2,0,1,0,0,0,2,1.5\r\n',
    );
    expect(usageCsv([], 'day')).toBe(`${csvColumns('day').join(',')}\r\n`);
  });
});
