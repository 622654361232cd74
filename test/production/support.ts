// Helpers of the production drills: HTTP against Kiln's API processes, a poller that measures 5xx
// answers, waits for terminal states, and who holds a TCP connection (to find the worker process
// that is in an upstream call).
import { execFileSync } from 'node:child_process';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { inject } from 'vitest';
import { FakeGemini } from '../integration/providers/gemini/fake-gemini.js';

export const TERMINAL = ['succeeded', 'failed', 'uncertain'];
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Answer {
  status: number;
  json: any;
  text: string;
}

/** One request; a refused or reset connection answers status 0. */
export async function call(
  base: string,
  key: string,
  path: string,
  init: { method?: string; json?: unknown; timeoutMs?: number } = {},
): Promise<Answer> {
  try {
    const res = await fetch(`${base}${path}`, {
      method: init.method ?? (init.json === undefined ? 'GET' : 'POST'),
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: init.json === undefined ? undefined : JSON.stringify(init.json),
      signal: AbortSignal.timeout(init.timeoutMs ?? 30_000),
    });
    const text = await res.text();
    let json: any = null;
    try {
      json = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, json, text };
  } catch (err) {
    return { status: 0, json: null, text: (err as Error).message };
  }
}

export const submitBody = (prompt: string) => ({
  contents: [{ role: 'user', parts: [{ text: prompt }] }],
  generationConfig: { responseModalities: ['IMAGE'], imageConfig: { aspectRatio: '1:1', output: 'url' } },
});

export const submit = (base: string, key: string, model: string, prompt: string) =>
  call(base, key, `/v1beta/models/${model}:generateContent`, { json: submitBody(prompt) });

/** Polls a task until it is terminal (through any of `bases`, the first that answers). */
export async function waitTerminal(bases: string[], key: string, id: string, timeoutMs = 90_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  let last: Answer | undefined;
  while (Date.now() < deadline) {
    for (const base of bases) {
      last = await call(base, key, `/v1/tasks/${id}`);
      if (last.status === 200) break;
    }
    if (last?.status === 200 && TERMINAL.includes(last.json.status)) return last.json;
    await sleep(250);
  }
  throw new Error(`task ${id} not terminal after ${timeoutMs} ms; last: ${last?.status} ${last?.text.slice(0, 300)}`);
}

export async function waitAllTerminal(bases: string[], key: string, ids: string[], timeoutMs = 120_000) {
  const out: any[] = [];
  // A few at a time: the drills must not turn into a load test of the poll path.
  for (let i = 0; i < ids.length; i += 10)
    out.push(...(await Promise.all(ids.slice(i, i + 10).map((id) => waitTerminal(bases, key, id, timeoutMs)))));
  return out;
}

export interface PollStats {
  total: number;
  fiveXX: number;
  /** Requests that got no HTTP answer at all (connection refused/reset). */
  noAnswer: number;
  /** Longest run of consecutive 5xx (or unanswered) requests, first to first good answer after it. */
  longestBadMs: number;
  statuses: Record<string, number>;
}

/** GETs `path` every `everyMs` until stopped; `bad` decides which answers count as an outage. */
export function poller(base: string, key: string, path: () => string, everyMs = 100) {
  let stopped = false;
  const stats: PollStats = { total: 0, fiveXX: 0, noAnswer: 0, longestBadMs: 0, statuses: {} };
  let badSince: number | null = null;
  const done = (async () => {
    while (!stopped) {
      const t = Date.now();
      const r = await call(base, key, path(), { timeoutMs: 5000 });
      stats.total++;
      stats.statuses[r.status] = (stats.statuses[r.status] ?? 0) + 1;
      const bad = r.status === 0 || r.status >= 500;
      if (r.status >= 500) stats.fiveXX++;
      if (r.status === 0) stats.noAnswer++;
      if (bad && badSince === null) badSince = t;
      if (!bad && badSince !== null) {
        stats.longestBadMs = Math.max(stats.longestBadMs, Date.now() - badSince);
        badSince = null;
      }
      await sleep(Math.max(0, everyMs - (Date.now() - t)));
    }
    if (badSince !== null) stats.longestBadMs = Math.max(stats.longestBadMs, Date.now() - badSince);
  })();
  return {
    stats,
    async stop(): Promise<PollStats> {
      stopped = true;
      await done;
      return stats;
    },
  };
}

/** The stack's failures, through the global setup's control endpoint. */
export async function control(action: string, arg: Record<string, unknown> = {}): Promise<any> {
  const res = await fetch(`${inject('controlUrl')}/${action}`, { method: 'POST', body: JSON.stringify(arg) });
  const text = await res.text();
  if (!res.ok) throw new Error(`control ${action}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** The PID that owns the client end of a loopback TCP connection whose local port is `port`. */
export function pidOfClientPort(port: number): number | undefined {
  const out = execFileSync('ss', ['-tnpH', 'state', 'established', `( sport = :${port} )`], { encoding: 'utf8' });
  const m = /pid=(\d+)/.exec(out);
  return m ? Number(m[1]) : undefined;
}

/** FakeGemini that also keeps each request's client port (to find the process that sent it). */
export class TracingGemini extends FakeGemini {
  protected handle(req: IncomingMessage, res: ServerResponse): void {
    // The recorded call keeps req.headers: the client's port travels with it.
    req.headers['x-client-port'] = String(req.socket.remotePort ?? 0);
    super.handle(req, res);
  }
  /** Calls whose body holds `prompt`. */
  callsFor(prompt: string) {
    return this.requests.filter((r) => r.raw.includes(prompt));
  }
  /** Client port of the first call whose body holds `prompt`. */
  clientPortFor(prompt: string): number | undefined {
    const r = this.requests.find((x) => x.raw.includes(prompt));
    return r ? Number(r.headers['x-client-port']) : undefined;
  }
}
