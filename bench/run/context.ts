// What the parts of `npm run bench` (bench/run.ts) share: its settings, the stack it started, the
// clients it measures with, and the rows of its report.
import type { ChildProcess } from 'node:child_process';
import type { Redis } from 'ioredis';
import type { Config } from '../../src/config/env.js';
import type { connectTemporal } from '../../src/temporal/client.js';
import type { TaskStore } from '../../src/tasks/store/task-store.js';
import type { benchTaskInput, CpuRole, LoadResult, startBenchStack } from '../lib.js';

export const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
export const TOTAL_TASKS = Number(process.env.BENCH_TASKS ?? 10_000);
/** Tasks per round of the batch comparison with the minimal workflow. */
export const BATCH = Number(process.env.BENCH_BATCH ?? 200);
/** Unmeasured load before each read scenario, on Kiln and on the baselines alike (`load`). */
export const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 1);
/** Alternating rounds of the read scenarios against bare Koa (their ratios are medians over rounds). */
export const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
/** How long after the last load the settled memory is read. */
export const SETTLE_SECONDS = Number(process.env.BENCH_SETTLE_SECONDS ?? 30);
/** BENCH_ONLY=reads: only the read scenarios (poll, batch-get, list) with their baselines, and memory. */
export const READS_ONLY = process.env.BENCH_ONLY === 'reads';
/** BENCH_ONLY=batch: only the 200-task rounds against the minimal workflow (and their CPU), and memory. */
export const BATCH_ONLY = process.env.BENCH_ONLY === 'batch';
/** Measured rounds of each kind in the 200-task comparison (medians are reported). */
export const BATCH_ROUNDS = Math.max(1, Number(process.env.BENCH_BATCH_ROUNDS ?? 3));
export const KEY = 'bench-key-owner-0000000000';
export const OTHER_KEY = 'bench-key-other-0000000000';

/** A row of the report: a scenario, Kiln's figure and its baseline's (bench/run/report.ts). */
export interface Row {
  what: string;
  kiln: LoadResult | string;
  base?: LoadResult | string;
  baseName?: string;
  note?: string;
  /** The last column when the cells are not load results. */
  ratioText?: string;
}

export interface RunContext {
  stack: Awaited<ReturnType<typeof startBenchStack>>;
  config: Config;
  client: Awaited<ReturnType<typeof connectTemporal>>['client'];
  store: TaskStore;
  redis: Redis;
  /** The owner of KEY, and the headers that authenticate as it. */
  owner: string;
  auth: Record<string, string>;
  api: ChildProcess;
  worker: ChildProcess;
  /** The Temporal dev server's and Redis's processes (bench/lib.ts `cpuByRole`). */
  serverRole: CpuRole;
  redisRole: CpuRole;
  /** BENCH_PIN took: each role on its core (bench/run.ts). */
  pinned: boolean;
  /** The core the workers (Kiln's and the minimal's) are pinned to: 0 with the server, 1 apart. */
  workerCpu: number;
  rows: Row[];
  /** Tasks submitted so far, of every kind (the memory rows name the count). */
  tally: { submitted: number };
  submitOne(key?: string, model?: string): Promise<{ id: string }>;
  /** Until no task is unfinished in the read model and no task workflow runs. */
  drain(): Promise<void>;
  /** A task's workflow input, as Kiln starts it: the raw starts of the submit rounds and end to end. */
  input(id: string): ReturnType<typeof benchTaskInput>;
}
