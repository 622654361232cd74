// One reading of `Retry-After` for every client of an HTTP server: Kiln's upstream calls and the SDK.
// Pure module: safe to value-import from workflow code.

/** `Retry-After` in seconds (delta-seconds or an HTTP date, never negative); undefined when absent or unusable. */
export function parseRetryAfter(value: string | null | undefined, now = Date.now()): number | undefined {
  if (!value) return undefined;
  const s = value.trim();
  if (/^\d+(\.\d+)?$/.test(s)) return Number(s);
  const at = Date.parse(s);
  return Number.isNaN(at) ? undefined : Math.max(0, (at - now) / 1000);
}
