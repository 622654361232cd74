// Prometheus text (format 0.0.4) for the series Kiln writes itself rather than through prom-client
// (src/ops/request-series.ts, src/channels/metrics.ts), written as prom-client's registry writes a
// metric, so a scrape reads as one exposition.

/** One sample: `name` when it is not the metric's own (a histogram's `_bucket`, `_sum`, `_count`). */
export interface Sample {
  name?: string;
  labels: Readonly<Record<string, string | number>>;
  value: number;
}

/** HELP and TYPE lines, then one line per sample, its labels in their object's order. No trailing newline. */
export function metricText(name: string, help: string, type: string, samples: readonly Sample[]): string {
  const lines = [`# HELP ${escape(name)} ${escape(help)}`, `# TYPE ${escape(name)} ${type}`];
  for (const s of samples) {
    const labels = Object.entries(s.labels).map(([k, v]) => `${k}="${typeof v === 'string' ? labelValue(v) : v}"`);
    lines.push(`${s.name ?? escape(name)}${labels.length ? `{${labels.join(',')}}` : ''} ${number(s.value)}`);
  }
  return lines.join('\n');
}

/** An exposition with `text` (metrics, no trailing newline) after its metrics, as prom-client separates them. */
export function withMoreText(exposition: string, text: string): string {
  const head = exposition.trimEnd();
  return head === '' ? `${text}\n` : `${head}\n\n${text}\n`;
}

export const escape = (s: string) => s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
export const labelValue = (s: string) => escape(s).replace(/"/g, '\\"');
/** As prom-client writes a sample's value. */
export const number = (v: number) => (Number.isNaN(v) ? 'Nan' : Number.isFinite(v) ? `${v}` : v < 0 ? '-Inf' : '+Inf');
