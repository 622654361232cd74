// The Chart.js part of the Usage chart (usage-chart.tsx loads this module when it first draws, so
// Chart.js is a chunk of its own): a stacked bar chart of units per day, one colour per model. Only
// the parts a bar chart needs are registered, so the rest of Chart.js is left out of the bundle.
import { BarController, BarElement, CategoryScale, Chart, Legend, LinearScale, Tooltip } from 'chart.js';
import { dayLabel, type UsageRow } from './usage-data.js';

/** One colour per model, models in the order of their ids; the console's accent first. */
const COLOURS = ['#b4471f', '#1a5fb4', '#2e7d32', '#8e44ad', '#b7791f', '#00838f', '#6b625a', '#c2185b'];

Chart.register(BarController, BarElement, CategoryScale, LinearScale, Legend, Tooltip);

/** Draws the bars of `rows` on `canvas`, one bar per day of `days`; destroy() the chart to redraw. */
export function drawUnits(canvas: HTMLCanvasElement, days: string[], rows: UsageRow[]): Chart {
  const models = [...new Set(rows.map((r) => r.model))].sort();
  const units = new Map(rows.map((r) => [`${r.date} ${r.model}`, r.units]));
  const still = matchMedia('(prefers-reduced-motion: reduce)').matches;
  const ink = getComputedStyle(document.documentElement).getPropertyValue('--muted').trim() || '#6b625a';
  return new Chart(canvas, {
    type: 'bar',
    data: {
      labels: days.map(dayLabel),
      datasets: models.map((m, i) => ({
        label: m,
        data: days.map((d) => units.get(`${d} ${m}`) ?? 0),
        backgroundColor: COLOURS[i % COLOURS.length],
        maxBarThickness: 28,
      })),
    },
    options: {
      responsive: true,
      maintainAspectRatio: false,
      animation: still ? false : { duration: 250 },
      color: ink,
      font: { family: 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif' },
      scales: {
        x: { stacked: true, grid: { display: false }, ticks: { color: ink, autoSkip: true, maxRotation: 0 } },
        y: {
          stacked: true,
          beginAtZero: true,
          ticks: { color: ink, precision: 0 },
          title: { display: true, text: 'Units', color: ink },
        },
      },
      plugins: {
        legend: { position: 'bottom', labels: { color: ink, boxWidth: 12 } },
        tooltip: { mode: 'index', intersect: false },
      },
    },
  });
}
