// Several API processes sharing one port (node:cluster). The primary only supervises: it forks the
// processes, replaces one that dies after it started, forwards SIGTERM for a graceful stop, and
// answers /metrics requests with the sum of every process's metrics, since a scrape lands on any
// one process.
import cluster from 'node:cluster';
import type { Logger } from 'pino';
import { AggregatorRegistry } from 'prom-client';

type Msg = { type?: string; id?: number; body?: string; error?: string };
const LISTENING = 'kiln:listening';
const METRICS_REQ = 'kiln:metrics-req';
const METRICS_RES = 'kiln:metrics-res';

export const inClusterWorker = () => cluster.isWorker && typeof process.send === 'function';

/** Runs in the primary process until every API process has stopped. */
export function superviseApiProcesses(count: number, log: Logger, graceMs: number): void {
  const aggregator = new AggregatorRegistry();
  const started = new Set<number>();
  let stopping = false;
  let exitCode = 0;

  const stop = (code: number) => {
    if (stopping) return;
    stopping = true;
    exitCode = code;
    const workers = Object.values(cluster.workers ?? {});
    if (workers.length === 0) process.exit(code);
    for (const w of workers) w?.process.kill('SIGTERM');
    setTimeout(() => {
      log.warn('API processes still running after the shutdown grace time; exiting');
      process.exit(1);
    }, graceMs + 5000).unref();
  };

  cluster.on('message', (worker, msg: Msg) => {
    if (msg?.type === LISTENING) started.add(worker.id);
    if (msg?.type === METRICS_REQ) {
      aggregator.clusterMetrics().then(
        (body) => worker.send({ type: METRICS_RES, id: msg.id, body }),
        (err: Error) => worker.send({ type: METRICS_RES, id: msg.id, error: err.message }),
      );
    }
  });
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(exitCode);
      return;
    }
    // A process that never listened failed its start-up (Redis or Temporal unreachable, port
    // taken): forking again would only loop, so the whole API stops and says so.
    if (!started.has(worker.id)) {
      log.error({ pid: worker.process.pid, code, signal }, 'an API process failed during start-up; stopping');
      stop(1);
      return;
    }
    log.warn({ pid: worker.process.pid, code, signal }, 'API process exited; starting another');
    cluster.fork();
  });
  process.once('SIGTERM', () => stop(0));
  process.once('SIGINT', () => stop(0));
  for (let i = 0; i < count; i++) cluster.fork();
  log.info({ processes: count }, 'kiln api supervisor started');
}

/** In an API process: tell the supervisor this process serves requests now. */
export function reportListening(): void {
  if (inClusterWorker()) process.send!({ type: LISTENING });
}

let nextId = 0;
let answersWired = false;
const pending = new Map<number, { resolve: (s: string) => void; reject: (e: Error) => void }>();

/** In an API process: the metrics of every API process, summed by the supervisor. */
export function clusterMetrics(timeoutMs = 5000): Promise<string> {
  if (!answersWired) {
    answersWired = true;
    process.on('message', (msg: Msg) => {
      if (msg?.type !== METRICS_RES || msg.id === undefined) return;
      const p = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error !== undefined) p?.reject(new Error(msg.error));
      else p?.resolve(msg.body ?? '');
    });
  }
  const id = nextId++;
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      pending.delete(id);
      reject(new Error('the API supervisor did not answer the metrics request'));
    }, timeoutMs);
    pending.set(id, {
      resolve: (s) => {
        clearTimeout(t);
        resolve(s);
      },
      reject: (e) => {
        clearTimeout(t);
        reject(e);
      },
    });
    process.send!({ type: METRICS_REQ, id });
  });
}
