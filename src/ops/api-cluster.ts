// Several API processes sharing one port (node:cluster). The primary only supervises: it forks the
// processes, replaces one that dies after it started, forwards SIGTERM for a graceful stop, and
// answers /metrics requests with the sum of every process's metrics, since a scrape lands on any
// one process: prom-client's registries summed by its AggregatorRegistry (a metric may name another
// aggregator: kiln_queue_depth, read from Redis, keeps the largest copy), and the request series
// (src/ops/request-series.ts), which are Kiln's own, summed here. The channels' series, also read
// from Redis, never come here: the process answering the scrape adds them (src/channels/metrics.ts).
import cluster from 'node:cluster';
import type { Logger } from 'pino';
import { AggregatorRegistry } from 'prom-client';
import { mergeSnapshots, seriesText, withRegistryText, type SeriesSnapshot } from './request-series.js';

type Msg = { type?: string; id?: number; body?: string; error?: string; snapshot?: SeriesSnapshot };
const LISTENING = 'kiln:listening';
const METRICS_REQ = 'kiln:metrics-req';
const METRICS_RES = 'kiln:metrics-res';
const SERIES_REQ = 'kiln:series-req';
const SERIES_RES = 'kiln:series-res';
/** As long as prom-client waits for the processes' registries. */
const COLLECT_TIMEOUT_MS = 5000;

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
    if (msg?.type === SERIES_RES && msg.id !== undefined) replies.get(msg.id)?.(msg);
    if (msg?.type === METRICS_REQ) {
      Promise.all([aggregator.clusterMetrics(), collectSeries()]).then(
        ([registries, series]) =>
          worker.send({
            type: METRICS_RES,
            id: msg.id,
            body: series ? withRegistryText(seriesText(series), registries) : registries,
          }),
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
/** Requests this process sent and waits for answers to, by id (the supervisor's or an API process's). */
const replies = new Map<number, (msg: Msg) => void>();

/**
 * Sends a request `count` times (by `send(id)`) and resolves with the `count` answers to it, or
 * rejects when one is an error or when they are not all in after `timeoutMs`.
 */
function request(count: number, send: (id: number) => void, timeoutMs: number, late: string): Promise<Msg[]> {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    const got: Msg[] = [];
    const settle = (err?: Error) => {
      clearTimeout(t);
      replies.delete(id);
      if (err) reject(err);
      else resolve(got);
    };
    const t = setTimeout(() => settle(new Error(late)), timeoutMs);
    replies.set(id, (msg) => {
      if (msg.error !== undefined) return settle(new Error(msg.error));
      got.push(msg);
      if (got.length === count) settle();
    });
    send(id);
  });
}

/** In the supervisor: every API process's request series, summed (undefined when none runs). */
async function collectSeries(): Promise<SeriesSnapshot | undefined> {
  const workers = Object.values(cluster.workers ?? {}).filter((w) => w?.isConnected());
  if (workers.length === 0) return undefined;
  const answers = await request(
    workers.length,
    (id) => workers.forEach((w) => w!.send({ type: SERIES_REQ, id })),
    COLLECT_TIMEOUT_MS,
    'an API process did not send its request series',
  );
  return mergeSnapshots(answers.flatMap((a) => (a.snapshot ? [a.snapshot] : [])));
}

let seriesShared: (() => SeriesSnapshot) | undefined;

/** In an API process: what it answers when the supervisor collects the request series. */
export function shareRequestSeries(snapshot: () => SeriesSnapshot): void {
  if (!seriesShared) {
    process.on('message', (msg: Msg) => {
      if (msg?.type === SERIES_REQ) process.send!({ type: SERIES_RES, id: msg.id, snapshot: seriesShared!() });
    });
  }
  seriesShared = snapshot;
}

let answersWired = false;

/** In an API process: the metrics of every API process, summed by the supervisor. */
export async function clusterMetrics(timeoutMs = COLLECT_TIMEOUT_MS): Promise<string> {
  if (!answersWired) {
    answersWired = true;
    process.on('message', (msg: Msg) => {
      if (msg?.type === METRICS_RES && msg.id !== undefined) replies.get(msg.id)?.(msg);
    });
  }
  const [answer] = await request(
    1,
    (id) => process.send!({ type: METRICS_REQ, id }),
    timeoutMs,
    'the API supervisor did not answer the metrics request',
  );
  return answer.body ?? '';
}
