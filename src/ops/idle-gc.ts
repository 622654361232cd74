// One full garbage collection when a process that has been busy goes quiet.
//
// Why: V8 collects its old generation only when that generation grows past a limit it raises after
// each collection, and it frees a dead Buffer's memory (list pages, Redis replies, image bytes) only
// in such a collection. A browser runs one in idle time; Node never does, so an API process that
// stops after a burst keeps the burst's high-water mark for as long as it stays idle. A collection
// costs tens of milliseconds, taken when nothing is waiting. The worker runs it too: its workflow
// cache makes V8 collect during a burst, but what the burst leaves is otherwise freed only when V8's
// memory reducer gets to it, up to ~30 s later. The RSS figures: BENCHMARKS.md (API and worker RSS).
//
// It needs node's --expose-gc (bin/kiln-run passes it); without it this does nothing.
import type { Logger } from 'pino';

export interface IdleGcOptions {
  /** How often the process's CPU time is sampled. */
  everyMs?: number;
  /** CPU time since the last collection that counts as a burst worth collecting after. */
  busyCpuMs?: number;
  /** CPU time within one sample below which the process counts as idle. */
  idleCpuMs?: number;
  /**
   * Count start-up as a burst: the first idle sample collects what loading the modules and building
   * the app left (default). Without it a process that then sees little traffic kept that garbage:
   * ~18 MiB per API process after 50 tasks (bench/stack-memory.ts, issue 42).
   */
  afterStartUp?: boolean;
  log?: Logger;
  /** Tests: the collector and the CPU clock. */
  gc?: () => unknown;
  cpuMicros?: () => number;
}

type GcFn = (opts?: { type?: 'major'; execution?: 'sync' | 'async'; flavor?: 'regular' | 'last-resort' }) => unknown;

// 'last-resort': V8's collection that also shrinks the heap. On Node 24 (V8 13.6) a regular major
// collection frees the burst's objects but keeps the old generation's pages committed; this one
// gives them back, at a few times a regular collection's cost, once per burst, when nothing waits.
const exposedGc = (): (() => unknown) | undefined => {
  const gc = (globalThis as { gc?: GcFn }).gc;
  return gc ? () => gc({ type: 'major', execution: 'async', flavor: 'last-resort' }) : undefined;
};

const processCpuMicros = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

/** Starts the sampler (an unref'd timer); `stop` ends it. `check` runs one sample (tests). */
export function startIdleGc(opts: IdleGcOptions = {}) {
  const gc = opts.gc ?? exposedGc();
  const cpu = opts.cpuMicros ?? processCpuMicros;
  const everyMs = opts.everyMs ?? 2000;
  const busyMicros = (opts.busyCpuMs ?? 1000) * 1000;
  const idleMicros = (opts.idleCpuMs ?? everyMs / 50) * 1000;
  let last = cpu();
  let sinceCollection = opts.afterStartUp === false ? 0 : busyMicros;
  let collections = 0;
  const check = () => {
    const now = cpu();
    const used = now - last;
    last = now;
    sinceCollection += used;
    if (!gc || used >= idleMicros || sinceCollection < busyMicros) return false;
    opts.log?.debug({ busyCpuMs: Math.round(sinceCollection / 1000) }, 'idle after a burst: collecting garbage');
    sinceCollection = 0;
    collections++;
    void Promise.resolve(gc()).catch(() => undefined);
    return true;
  };
  const timer = gc ? setInterval(check, everyMs).unref() : undefined;
  return {
    enabled: !!gc,
    check,
    collections: () => collections,
    stop: () => timer && clearInterval(timer),
  };
}
