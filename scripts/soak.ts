// `npm run soak`: SOAK_CLIENTS (default 200) simulated clients against a whole Kiln started here
// (own Redis, Temporal dev server, worker, API; local image model), for SOAK_SECONDS (default 60).
// Each client is its own owner (its own API key) and behaves as the contract's polling guidance
// says: it submits, waits, then polls only its unfinished ids in batches (at most 100 per request,
// all batches of a cycle together), never sooner than `next_poll_after_ms`, and waits out
// `Retry-After` on a 429. It keeps SOAK_INFLIGHT (default 2) tasks unfinished at a time (a closed
// loop: the offered load follows what the system sustains). After SOAK_SECONDS no new task is
// submitted; polling goes on until every task is terminal or SOAK_DRAIN_SECONDS (default 180) pass.
// The service runs with POLL_AFTER_SECONDS=1 and RATE_LIMIT_BATCH_MS=500 so that a minute holds
// many polling cycles. Exits non-zero on a lost task, a 5xx or a transport error.
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { cpus, totalmem } from 'node:os';
import { writeFileSync } from 'node:fs';
import { binary } from './services.js';
import { startStack } from './stack.js';

const CLIENTS = Number(process.env.SOAK_CLIENTS ?? 200);
const SECONDS = Number(process.env.SOAK_SECONDS ?? 60);
const INFLIGHT = Number(process.env.SOAK_INFLIGHT ?? 2);
const DRAIN_SECONDS = Number(process.env.SOAK_DRAIN_SECONDS ?? 180);
// Long enough that a task is usually seen unfinished by a poll or two.
const LATENCY_MS = Number(process.env.SOAK_LATENCY_MS ?? 2000);
const MODEL = 'soak-image';
const TERMINAL = new Set(['succeeded', 'failed', 'uncertain']);
// A 1024×10 picture: rendering costs next to nothing, so Kiln and Temporal are what is loaded.
const SUBMIT_BODY = JSON.stringify({
  contents: [{ role: 'user', parts: [{ text: 'soak' }] }],
  generationConfig: { responseModalities: ['IMAGE'], imageConfig: { aspectRatio: '99:1', output: 'url' } },
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Stats {
  submitMs: number[];
  pollMs: number[];
  status: Map<number, number>;
  transport: number;
  submitted: number;
  // Per task id: its last seen status (undefined until a poll saw it).
  tasks: Map<string, string | undefined>;
}

const stats: Stats = { submitMs: [], pollMs: [], status: new Map(), transport: 0, submitted: 0, tasks: new Map() };

interface Answer {
  id: string;
  next_poll_after_ms: number;
  items: { id: string; status: string }[];
}

async function call(
  url: string,
  init: RequestInit,
): Promise<{ status: number; body: Answer; retryAfter: number; ms: number } | null> {
  const t = performance.now();
  try {
    const res = await fetch(url, { ...init, signal: AbortSignal.timeout(30_000) });
    // Only 2xx bodies are read as answers; others count by status.
    const body = (res.headers.get('content-type')?.includes('json') ? await res.json() : {}) as Answer;
    stats.status.set(res.status, (stats.status.get(res.status) ?? 0) + 1);
    return {
      status: res.status,
      body,
      retryAfter: Number(res.headers.get('retry-after') ?? 0),
      ms: performance.now() - t,
    };
  } catch {
    stats.transport++;
    return null;
  }
}

async function client(i: number, base: string, submitUntil: number, drainUntil: number): Promise<void> {
  const headers = {
    authorization: `Bearer soak-client-${i}-${randomBytes(8).toString('hex')}`,
    'content-type': 'application/json',
  };
  const pending = new Set<string>();
  let nextPoll = Infinity;
  // Spread the clients' first submissions over the first second instead of one burst.
  await sleep(Math.random() * 1000);
  for (let round = 0; round < 100_000; round++) {
    const now = Date.now();
    if (now >= drainUntil || (now >= submitUntil && pending.size === 0)) return;
    while (now < submitUntil && pending.size < INFLIGHT) {
      const r = await call(`${base}/v1beta/models/${MODEL}:generateContent`, {
        method: 'POST',
        headers,
        body: SUBMIT_BODY,
      });
      if (!r || r.status !== 202) {
        // Refused (429/503) or unreachable: back off as told, then go on polling what exists.
        await sleep(Math.max(1, r?.retryAfter ?? 1) * 1000);
        break;
      }
      stats.submitMs.push(r.ms);
      stats.submitted++;
      stats.tasks.set(r.body.id, undefined);
      pending.add(r.body.id);
      // The contract: wait after submit before the first poll (here the service's 1 s interval).
      nextPoll = Math.max(nextPoll === Infinity ? 0 : nextPoll, Date.now() + 1000);
    }
    if (pending.size === 0) continue; // the submission was refused and backed off: try again
    if (Date.now() < nextPoll) {
      await sleep(nextPoll - Date.now());
      continue;
    }
    // One polling cycle: every batch of at most 100 of this client's unfinished ids, together.
    const ids = [...pending];
    const batches = Array.from({ length: Math.ceil(ids.length / 100) }, (_, k) => ids.slice(k * 100, k * 100 + 100));
    const answers = await Promise.all(
      batches.map((b) =>
        call(`${base}/v1/tasks/batch-get`, { method: 'POST', headers, body: JSON.stringify({ ids: b }) }),
      ),
    );
    let wait = 1000;
    for (const r of answers) {
      if (!r) continue;
      if (r.status === 429) {
        wait = Math.max(wait, r.retryAfter * 1000);
        continue;
      }
      if (r.status !== 200) continue;
      stats.pollMs.push(r.ms);
      wait = Math.max(wait, r.body.next_poll_after_ms);
      for (const item of r.body.items) {
        stats.tasks.set(item.id, item.status);
        if (TERMINAL.has(item.status) || item.status === 'not_found') pending.delete(item.id);
      }
    }
    nextPoll = Date.now() + wait;
  }
}

function pct(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

async function main() {
  const stack = await startStack({
    name: 'soak',
    models: [{ id: MODEL, provider: 'local', latencyMs: LATENCY_MS, idempotent: true, concurrency: 64 }],
    env: { POLL_AFTER_SECONDS: '1', RATE_LIMIT_BATCH_MS: '500', RATE_LIMIT_TASK_MS: '1000', LOG_LEVEL: 'warn' },
  });
  console.log(
    `[soak] Kiln at ${stack.base}; ${CLIENTS} clients for ${SECONDS} s ` +
      `(${INFLIGHT} unfinished tasks each), then up to ${DRAIN_SECONDS} s to drain`,
  );
  const t0 = Date.now();
  const submitUntil = t0 + SECONDS * 1000;
  const drainUntil = submitUntil + DRAIN_SECONDS * 1000;
  const progress = setInterval(() => {
    const done = [...stats.tasks.values()].filter((s) => s && TERMINAL.has(s)).length;
    console.log(`[soak] ${Math.round((Date.now() - t0) / 1000)} s: ${stats.submitted} submitted, ${done} terminal`);
  }, 10_000);
  await Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i, stack.base, submitUntil, drainUntil)));
  clearInterval(progress);
  const elapsed = (Date.now() - t0) / 1000;

  const count = (s: string) => [...stats.tasks.values()].filter((v) => v === s).length;
  const lost = [...stats.tasks.values()].filter((v) => v === undefined || v === 'not_found' || !TERMINAL.has(v)).length;
  const fivexx = [...stats.status].filter(([s]) => s >= 500).reduce((a, [, n]) => a + n, 0);
  const requests = [...stats.status.values()].reduce((a, n) => a + n, 0);
  const f = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : 'n/a');
  const temporalVersion = execFileSync(binary('temporal', 'TEMPORAL_BIN'), ['--version'])
    .toString()
    .trim()
    .split('\n')[0];
  const lines = [
    `Run: \`SOAK_SECONDS=${SECONDS} npm run soak\` (${CLIENTS} clients, ${INFLIGHT} unfinished ` +
      `tasks each, local model latency ${LATENCY_MS} ms; ` +
      'service: POLL_AFTER_SECONDS=1, RATE_LIMIT_BATCH_MS=500) on ' +
      new Date().toISOString(),
    `Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${f(totalmem() / 2 ** 30)} GiB; ` +
      `Node ${process.version}; ${temporalVersion}. Clients, API, ` +
      `worker, Temporal dev server and Redis share those cores.`,
    '',
    '| Measure | Value |',
    '|---|---|',
    `| tasks submitted (202) | ${stats.submitted} (${f(stats.submitted / SECONDS)} tasks/s ` +
      `over the ${SECONDS} s of submissions) |`,
    `| succeeded / failed / uncertain | ${count('succeeded')} / ${count('failed')} / ${count('uncertain')} |`,
    `| lost (never terminal, or not_found) | ${lost} |`,
    `| finished tasks per second | ${f((stats.submitted - lost) / elapsed)} (over the whole ${f(elapsed)} s) |`,
    `| HTTP requests | ${requests} (${[...stats.status]
      .sort(([a], [b]) => a - b)
      .map(([s, n]) => `${s}: ${n}`)
      .join(', ')}) |`,
    `| 5xx | ${fivexx} |`,
    `| 429 | ${stats.status.get(429) ?? 0} |`,
    `| transport errors (no HTTP status) | ${stats.transport} |`,
    `| submit latency | p50 ${f(pct(stats.submitMs, 50))} ms · ` +
      `p99 ${f(pct(stats.submitMs, 99))} ms (${stats.submitMs.length} calls) |`,
    `| batch-poll latency | p50 ${f(pct(stats.pollMs, 50))} ms · ` +
      `p99 ${f(pct(stats.pollMs, 99))} ms (${stats.pollMs.length} calls) |`,
    `| wall time until every task was terminal | ${f(elapsed)} s |`,
  ];
  const text = lines.join('\n');
  console.log(`\n${text}\n`);
  if (process.env.SOAK_OUT) writeFileSync(process.env.SOAK_OUT, `${text}\n`);
  await stack.stop();
  const ok = lost === 0 && fivexx === 0 && stats.transport === 0 && stats.submitted > 0;
  process.exit(ok ? 0 : 1);
}

main().catch((err) => {
  console.error(`[soak] ${err instanceof Error ? err.message : err}`);
  process.exit(1);
});
