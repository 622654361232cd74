// Several API processes sharing one port. The first process serves requests like the others and
// also supervises (issue 42: a supervisor of its own cost ~40 MiB for a process that served
// nobody). Each process listens with SO_REUSEPORT (`reusePort`), so the kernel spreads connections
// over their sockets and the first process hands out nothing. The first process forks the others
// (node:cluster, for its IPC), replaces one that dies after it started, forwards SIGTERM for a
// graceful stop, and answers /metrics with the sum of every process's metrics, since a scrape
// lands on any one process: prom-client's registries summed by AggregatorRegistry.aggregate (a
// metric may name another aggregator: kiln_queue_depth, read from Redis, keeps the largest copy),
// and the request series (src/ops/request-series.ts), which are Kiln's own, summed here. The
// channels' series, also read from Redis, never come here: the process answering the scrape adds
// them (src/channels/metrics.ts).
import cluster from 'node:cluster';
import type { Logger } from 'pino';
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import { mergeSnapshots, seriesText, withRegistryText, type SeriesSnapshot } from './request-series.js';

type RegistryJson = MetricObjectWithValues<MetricValue<string>>[];
/** What each process contributes to a scrape. */
export interface ProcessMetrics {
  registry: RegistryJson;
  snapshot: SeriesSnapshot;
}
type Msg = { type?: string; id?: number; body?: string; error?: string; metrics?: ProcessMetrics };
const LISTENING = 'kiln:listening';
const METRICS_REQ = 'kiln:metrics-req';
const METRICS_RES = 'kiln:metrics-res';
const SHARE_REQ = 'kiln:share-req';
const SHARE_RES = 'kiln:share-res';
/** How long the first process waits for the others' metrics. */
const COLLECT_TIMEOUT_MS = 5000;

export const inClusterWorker = () => cluster.isWorker && typeof process.send === 'function';

/** Whether this process is the first of several (it started the others). */
let supervising = false;
/** This process's own contribution to a scrape (src/ops/metrics.ts registers it). */
let ownMetrics: (() => Promise<ProcessMetrics>) | undefined;

export interface Siblings {
  /** SIGTERM to every other process; resolves when all have exited (or the grace time ran out). */
  stop(): Promise<void>;
}

/**
 * In the first process, once it listens: forks `count` more API processes and keeps them running.
 * `fatal` is called when one fails its start-up (forking again would only loop: Redis or Temporal
 * unreachable, port taken): the whole API stops and says so.
 */
export function startSiblings(count: number, log: Logger, graceMs: number, fatal: () => void): Siblings {
  supervising = true;
  // The count is the first process's: a sibling that worked it out again from its own CPU
  // affinity (changed since, by taskset or a cgroup) could see 1 and take the cluster's shared
  // handle instead of its own SO_REUSEPORT socket, failing with EADDRINUSE.
  const env = { API_PROCESSES: String(count + 1) };
  const started = new Set<number>();
  let stopping = false;
  const workers = () => Object.values(cluster.workers ?? {}).filter((w) => w !== undefined);

  cluster.on('message', (worker, msg: Msg) => {
    if (msg?.type === LISTENING) started.add(worker.id);
    if (msg?.type === SHARE_RES && msg.id !== undefined) replies.get(msg.id)?.(msg);
    if (msg?.type === METRICS_REQ)
      gatherMetrics().then(
        (body) => worker.send({ type: METRICS_RES, id: msg.id, body }),
        (err: Error) => worker.send({ type: METRICS_RES, id: msg.id, error: err.message }),
      );
  });
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) return;
    if (!started.has(worker.id)) {
      log.error({ pid: worker.process.pid, code, signal }, 'an API process failed during start-up; stopping');
      fatal();
      return;
    }
    log.warn({ pid: worker.process.pid, code, signal }, 'API process exited; starting another');
    cluster.fork(env);
  });
  for (let i = 0; i < count; i++) cluster.fork(env);
  log.info({ processes: count + 1 }, 'kiln api: this process serves and supervises the others');
  return {
    stop: () => {
      stopping = true;
      const left = workers();
      if (left.length === 0) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const t = setTimeout(resolve, graceMs + 5000);
        cluster.on('exit', () => {
          if (workers().length === 0) {
            clearTimeout(t);
            resolve();
          }
        });
        for (const w of left) w.process.kill('SIGTERM');
      });
    },
  };
}

/** In an API process: tell the first process this one serves requests now. */
export function reportListening(): void {
  if (inClusterWorker()) process.send!({ type: LISTENING });
}

let nextId = 0;
/** Requests this process sent and waits for answers to, by id. */
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
    if (count === 0) settle();
    else send(id);
  });
}

/** In the first process: every process's metrics (its own included), summed into one exposition. */
async function gatherMetrics(): Promise<string> {
  const others = Object.values(cluster.workers ?? {}).filter((w) => w?.isConnected());
  const [own, answers] = await Promise.all([
    ownMetrics!(),
    request(
      others.length,
      (id) => others.forEach((w) => w!.send({ type: SHARE_REQ, id })),
      COLLECT_TIMEOUT_MS,
      'an API process did not send its metrics',
    ),
  ]);
  const all = [own, ...answers.flatMap((a) => (a.metrics ? [a.metrics] : []))];
  const registries = await AggregatorRegistry.aggregate(all.map((m) => m.registry)).metrics();
  return withRegistryText(seriesText(mergeSnapshots(all.map((m) => m.snapshot))!), registries);
}

/**
 * In every API process: what it contributes to a scrape. The others answer the first process's
 * requests with it; the first process adds it to theirs.
 */
export function shareMetrics(metrics: () => Promise<ProcessMetrics>): void {
  if (inClusterWorker() && !ownMetrics) {
    process.on('message', (msg: Msg) => {
      if (msg?.type !== SHARE_REQ) return;
      ownMetrics!().then(
        (m) => process.send!({ type: SHARE_RES, id: msg.id, metrics: m }),
        (err: Error) => process.send!({ type: SHARE_RES, id: msg.id, error: err.message }),
      );
    });
  }
  ownMetrics = metrics;
}

let answersWired = false;

/**
 * The metrics of every API process, summed, or undefined when this process runs alone (it then
 * renders its own). In the first process they are gathered here; the others ask it.
 */
export async function clusterMetrics(timeoutMs = COLLECT_TIMEOUT_MS): Promise<string | undefined> {
  if (supervising) return gatherMetrics();
  if (!inClusterWorker()) return undefined;
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
    'the first API process did not answer the metrics request',
  );
  return answer.body ?? '';
}
