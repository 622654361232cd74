// The Usage page's chart: units per day, one stacked bar per model, drawn by Chart.js (MIT) on a
// canvas (usage-bars.ts), loaded only when the chart is first shown. Chart.js styles its canvas
// through the CSSOM, which the console's CSP (style-src 'self') allows. The canvas is one labelled
// image; the table under it has the same numbers for screen readers.
import type { Chart } from 'chart.js';
import { useEffect, useRef } from 'preact/hooks';
import { count, dayLabel, type UsageRow } from './usage-data.js';

export function UsageChart({ days, rows }: { days: string[]; rows: UsageRow[] }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  useEffect(() => {
    let chart: Chart | undefined;
    let gone = false;
    import('./usage-bars.js').then(
      // The range changed (or the page went) while Chart.js loaded: nothing to draw then.
      ({ drawUnits }) => void (gone || (chart = drawUnits(canvas.current!, days, rows))),
      // Its chunk did not load (a deploy replaced it): the table below still has every number.
      () => undefined,
    );
    return () => {
      gone = true;
      chart?.destroy();
    };
  }, [days, rows]);
  const total = rows.reduce((a, r) => a + r.units, 0);
  const models = new Set(rows.map((r) => r.model)).size;
  return (
    <div class="usage-chart">
      <canvas
        ref={canvas}
        id="usage-chart"
        role="img"
        aria-label={
          `Units per day from ${dayLabel(days[0])} to ${dayLabel(days[days.length - 1])}, stacked by model: ` +
          `${count(total)} units over ${models} ${models === 1 ? 'model' : 'models'}. The table below has the numbers.`
        }
      />
    </div>
  );
}
