// The Usage page: what the signed-in key's owner submitted and was charged, per UTC day and model,
// from GET /v1/usage (any auth mode), over the last 7, 30 or 90 days: a chart of units per day
// stacked per model, and a table of the same rows with the range's total.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { AuthenticationError, type Kiln } from '../../src/client/index.js';
import { COUNTERS, type Counter } from '../../src/shared/usage.js';
import { UsageChart } from './usage-chart.js';
import {
  byDayThenModel,
  count,
  daysBetween,
  DEFAULT_RANGE,
  duration,
  RANGES,
  rangeOf,
  type RangeDays,
  type UsageAnswer,
  type UsageCounts,
} from './usage-data.js';
import { ErrorBox, Field, TableWrap, describeError, type ApiError } from './ui.js';

const LABELS: Record<Counter, string> = {
  submitted: 'Submitted',
  succeeded: 'Succeeded',
  failed: 'Failed',
  canceled: 'Canceled',
  uncertain: 'Uncertain',
  released: 'Released',
  units: 'Units',
  upstream_seconds: 'Upstream time',
};

/** A row's counter cells, in the columns' order: a day and model's, or the total's. */
function CounterCells({ counts }: { counts: UsageCounts }) {
  return (
    <>
      {COUNTERS.map((id) => (
        <td key={id} class="num" data-counter={id}>
          {id === 'upstream_seconds' ? duration(counts.upstream_seconds) : count(counts[id])}
        </td>
      ))}
    </>
  );
}

export function UsagePanel({ client, onUnauthorized }: { client: Kiln; onUnauthorized: () => void }) {
  const [days, setDays] = useState<RangeDays>(DEFAULT_RANGE);
  const [answer, setAnswer] = useState<UsageAnswer | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [loading, setLoading] = useState(false);
  const [asked, setAsked] = useState(0);

  useEffect(() => {
    const stop = new AbortController();
    const { from, to } = rangeOf(days);
    setLoading(true);
    client
      .request<UsageAnswer>('GET', '/v1/usage', { query: { from, to, group_by: 'day,model' }, signal: stop.signal })
      .then(({ data }) => {
        setAnswer(data);
        setError(null);
      })
      .catch((err) => {
        if (stop.signal.aborted) return;
        if (err instanceof AuthenticationError) return onUnauthorized();
        setError(describeError(err));
      })
      .finally(() => !stop.signal.aborted && setLoading(false));
    // A newer range (or leaving the page) makes this answer moot.
    return () => stop.abort();
  }, [client, days, asked]);

  // The chart redraws only when the answer changes, not on every render.
  const axis = useMemo(() => (answer ? daysBetween(answer.from, answer.to) : []), [answer]);
  const rows = useMemo(() => (answer ? [...answer.data].sort(byDayThenModel) : []), [answer]);

  return (
    <section class="card usage" aria-labelledby="usage-title" aria-busy={loading}>
      <div class="section-head">
        <h2 id="usage-title">Usage</h2>
        <div class="usage-controls">
          <Field id="usage-range" label="Range">
            {(c) => (
              <select
                {...c}
                value={String(days)}
                onChange={(e) => setDays(Number((e.target as HTMLSelectElement).value) as RangeDays)}
              >
                {RANGES.map((d) => (
                  <option key={d} value={d}>
                    Last {d} days
                  </option>
                ))}
              </select>
            )}
          </Field>
          <button type="button" class="secondary" onClick={() => setAsked((n) => n + 1)} disabled={loading}>
            Refresh
          </button>
        </div>
      </div>
      <p class="hint">
        Tasks submitted by this key&apos;s owner (every key of an owner sees the same) and the units charged, by the UTC
        day they were submitted. Uncertain tasks hold their units until an operator releases them (Released).
      </p>
      <ErrorBox error={error} />
      {!answer ? (
        !error && <p class="hint">Loading…</p>
      ) : answer.data.length === 0 ? (
        <p class="empty" id="usage-empty">
          No usage from {answer.from} to {answer.to}: tasks this key&apos;s owner submits show up here.
        </p>
      ) : (
        <>
          <p class="usage-total" id="usage-summary">
            <strong>{count(answer.total.units)}</strong> units · {count(answer.total.submitted)} tasks submitted ·{' '}
            {count(answer.total.succeeded)} succeeded · {answer.from} to {answer.to} (UTC)
          </p>
          <UsageChart days={axis} rows={rows} />
          <h3 id="usage-table-title">By day and model</h3>
          <TableWrap labelledBy="usage-table-title" class="data-table usage-table">
            <thead>
              <tr>
                <th scope="col">Day</th>
                <th scope="col">Model</th>
                {COUNTERS.map((id) => (
                  <th key={id} scope="col" class="num">
                    {LABELS[id]}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr key={`${r.date} ${r.model}`} data-date={r.date} data-model={r.model}>
                  <th scope="row" class="num">
                    {r.date}
                  </th>
                  <td class="model">{r.model}</td>
                  <CounterCells counts={r} />
                </tr>
              ))}
            </tbody>
            <tfoot>
              <tr class="usage-total-row">
                <th scope="row" colSpan={2}>
                  Total
                </th>
                <CounterCells counts={answer.total} />
              </tr>
            </tfoot>
          </TableWrap>
        </>
      )}
    </section>
  );
}
