// Kiln on the production-shaped stack (scripts/production/): submit rate and end-to-end time of a
// burst of tasks at 1 and 2 API/worker processes, for each history shard count (a fresh stack per
// count), an optional sustained run, and the per-task cost an operator sizes a cluster with:
// Temporal history events and state transitions, PostgreSQL transactions, Redis commands.
//
//   npm run bench:production -- [--tasks 200] [--shards 4,16] [--procs 1,2] [--sustain 60] [--json FILE]
//
// Completion is read from Temporal (visibility by the run's KilnOwner, close times), not by
// polling Kiln, so the Redis command counts are the submit and the workflow's own writes only.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode } from '@temporalio/worker';
import proto from '@temporalio/proto';
import { loadConfig } from '../src/config/env.js';
import { ownerOfKey } from '../src/infra/callers.js';
import { SEARCH_ATTRIBUTES } from '../src/shared/task.js';
import { WORKFLOWS_PATH } from '../src/worker/start.js';
import { ROOT } from '../scripts/services.js';
import { nodeCommand } from '../scripts/production/redis-cluster.js';
import { startBacking, startKilnDeployment, type Backing, type KilnDeployment } from '../scripts/production/kiln.js';

const argv = process.argv.slice(2);
const arg = (name: string, def: string) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : def;
};
const TASKS = Number(arg('--tasks', '200'));
const SHARDS = arg('--shards', '4,16').split(',').map(Number);
const PROCS = arg('--procs', '1,2').split(',').map(Number);
const SUSTAIN_S = Number(arg('--sustain', '60'));
const CONCURRENCY = 32;
const MODEL = 'bench-local';
const MODELS = [{ id: MODEL, provider: 'local', latencyMs: 0, idempotent: true, concurrency: 64 }];
const { EventType } = proto.temporal.api.enums.v1;
const say = (l: string) => console.error(`[bench:production] ${l}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const body = (prompt: string) =>
  JSON.stringify({
    contents: [{ role: 'user', parts: [{ text: prompt }] }],
    generationConfig: { responseModalities: ['IMAGE'], imageConfig: { aspectRatio: '1:1', output: 'url' } },
  });

async function submit(url: string, key: string, prompt: string): Promise<string> {
  const res = await fetch(`${url}/v1beta/models/${MODEL}:generateContent`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body(prompt),
  });
  const text = await res.text();
  if (res.status !== 202) throw new Error(`submit answered ${res.status}: ${text.slice(0, 200)}`);
  return JSON.parse(text).id as string;
}

async function commandStats(ports: number[]): Promise<Map<string, number>> {
  const m = new Map<string, number>();
  for (const port of ports) {
    const text = await nodeCommand(port, 'INFO', 'commandstats').catch(() => '');
    for (const [, cmd, calls] of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
      m.set(cmd, (m.get(cmd) ?? 0) + Number(calls));
  }
  return m;
}

const pgXacts = async (b: Backing) =>
  Number(
    (
      await b.stack.postgres.sql(
        'postgres',
        "SELECT sum(xact_commit + xact_rollback) FROM pg_stat_database WHERE datname LIKE 'temporal%'",
      )
    ).trim(),
  );

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : NaN;
};

interface Closed {
  id: string;
  start: number;
  close: number;
  status: string;
}

async function closedOf(client: Client, owner: string): Promise<Closed[]> {
  const out: Closed[] = [];
  for await (const wf of client.workflow.list({ query: `${SEARCH_ATTRIBUTES.owner} = '${owner}'` }))
    out.push({
      id: wf.workflowId,
      start: wf.startTime.getTime(),
      close: wf.closeTime?.getTime() ?? NaN,
      status: wf.status.name,
    });
  return out;
}

async function waitAllClosed(client: Client, owner: string, n: number, timeoutMs: number): Promise<Closed[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { count } = await client.workflow.count(
      `${SEARCH_ATTRIBUTES.owner} = '${owner}' AND ExecutionStatus != 'Running'`,
    );
    if (count >= n) return closedOf(client, owner);
    if (Date.now() > deadline) throw new Error(`${count} of ${n} workflows closed after ${timeoutMs} ms`);
    await sleep(200);
  }
}

interface BurstResult {
  shards: number;
  procs: number;
  tasks: number;
  submitPerS: number;
  e2eS: number;
  throughputPerS: number;
  latencyP50Ms: number;
  latencyP95Ms: number;
  failed: number;
}

async function burst(
  b: Backing,
  k: KilnDeployment,
  client: Client,
  shards: number,
  procs: number,
  n: number,
): Promise<{ result: BurstResult; owner: string; ids: string[] }> {
  const key = `bench-${randomBytes(8).toString('hex')}`;
  const owner = ownerOfKey(loadConfig(k.env).ownerKey, key);
  const ids: string[] = [];
  let next = 0;
  const t0 = Date.now();
  let lastAccepted = t0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < n) {
        const i = next++;
        ids.push(await submit(k.apis[i % k.apis.length].url, key, `bench ${i}`));
        lastAccepted = Date.now();
      }
    }),
  );
  const closed = await waitAllClosed(client, owner, n, 600_000);
  const end = Math.max(...closed.map((c) => c.close));
  const lat = closed.map((c) => c.close - c.start);
  return {
    owner,
    ids: closed.map((c) => c.id),
    result: {
      shards,
      procs,
      tasks: n,
      submitPerS: n / ((lastAccepted - t0) / 1000),
      e2eS: (end - t0) / 1000,
      throughputPerS: n / ((end - t0) / 1000),
      latencyP50Ms: pct(lat, 50),
      latencyP95Ms: pct(lat, 95),
      failed: closed.filter((c) => c.status !== 'COMPLETED').length,
    },
  };
}

interface Cost {
  historyEvents: number;
  stateTransitions: number;
  eventTypes: Record<string, number>;
  pgTransactions: number;
  idleRedisPerS: number;
  idlePgPerS: number;
  redisCommands: number;
  redisByCommand: Record<string, number>;
}

/** Per-task cost of a burst: history of a sample, Postgres and Redis counters over the whole burst. */
async function cost(
  b: Backing,
  k: KilnDeployment,
  client: Client,
  n: number,
): Promise<{ cost: Cost; run: Awaited<ReturnType<typeof burst>> }> {
  // Idle first: what the processes do per second with no task (worker beacons, Temporal's own
  // bookkeeping), subtracted from the burst so the figures are per task.
  await sleep(11_000); // PostgreSQL flushes idle backends' statistics every 10 s
  const ports = await b.redisPorts();
  const [idleRedis0, idlePg0, idle0] = [await commandStats(ports), await pgXacts(b), Date.now()];
  await sleep(20_000);
  const [redis0, pg0, t0] = [await commandStats(ports), await pgXacts(b), Date.now()];
  const idleS = (t0 - idle0) / 1000;
  const run = await burst(b, k, client, 0, 0, n);
  await sleep(11_000);
  const [redis1, pg1, t1] = [await commandStats(ports), await pgXacts(b), Date.now()];
  const busyS = (t1 - t0) / 1000;
  const idleRate = (now: Map<string, number>, before: Map<string, number>, c: string) =>
    ((now.get(c) ?? 0) - (before.get(c) ?? 0)) / idleS;
  const sample = run.ids.slice(0, 10);
  let events = 0;
  let transitions = 0;
  const types: Record<string, number> = {};
  for (const id of sample) {
    if (!id) throw new Error(`no workflow id in ${JSON.stringify(run.ids.slice(0, 3))}`);
    const h = client.workflow.getHandle(id);
    const history = await h.fetchHistory();
    events += history.events?.length ?? 0;
    for (const e of history.events ?? []) {
      const t = String(EventType[e.eventType ?? 0] ?? e.eventType).replace('EVENT_TYPE_', '');
      types[t] = (types[t] ?? 0) + 1 / sample.length;
    }
    transitions += Number((await h.describe()).raw.workflowExecutionInfo?.stateTransitionCount ?? 0);
  }
  const byCmd: Record<string, number> = {};
  let total = 0;
  for (const [c, v] of redis1) {
    const d = v - (redis0.get(c) ?? 0) - idleRate(redis0, idleRedis0, c) * busyS;
    // INFO itself and the cluster's own bookkeeping are not Kiln's.
    if (d <= 0.5 || c === 'info' || c === 'replconf' || c.startsWith('cluster')) continue;
    byCmd[c] = d / n;
    total += d;
  }
  return {
    run,
    cost: {
      historyEvents: events / sample.length,
      stateTransitions: transitions / sample.length,
      eventTypes: types,
      pgTransactions: (pg1 - pg0 - ((pg0 - idlePg0) / idleS) * busyS) / n,
      idleRedisPerS: [...redis0].reduce((sum, [c]) => sum + Math.max(0, idleRate(redis0, idleRedis0, c)), 0),
      idlePgPerS: (pg0 - idlePg0) / idleS,
      redisCommands: total / n,
      redisByCommand: byCmd,
    },
  };
}

interface Sustained {
  seconds: number;
  targetPerS: number;
  submitted: number;
  completedPerS: number;
  latencyP50Ms: number;
  latencyP95Ms: number;
  latencyP99Ms: number;
  maxRunning: number;
  submitErrors: number;
}

async function sustained(k: KilnDeployment, client: Client, ratePerS: number, seconds: number): Promise<Sustained> {
  const key = `bench-sustain-${randomBytes(8).toString('hex')}`;
  const owner = ownerOfKey(loadConfig(k.env).ownerKey, key);
  const t0 = Date.now();
  let submitted = 0;
  let errors = 0;
  let maxRunning = 0;
  const inflight: Promise<unknown>[] = [];
  const sampler = (async () => {
    while (Date.now() - t0 < seconds * 1000) {
      await sleep(5000);
      const { count } = await client.workflow.count(
        `${SEARCH_ATTRIBUTES.owner} = '${owner}' AND ExecutionStatus = 'Running'`,
      );
      maxRunning = Math.max(maxRunning, count);
    }
  })();
  while (Date.now() - t0 < seconds * 1000) {
    const due = Math.floor(((Date.now() - t0) / 1000) * ratePerS);
    while (submitted < due) {
      const i = submitted++;
      inflight.push(submit(k.apis[i % k.apis.length].url, key, `sustain ${i}`).catch(() => errors++));
    }
    await sleep(20);
  }
  await Promise.all(inflight);
  await sampler;
  const closed = await waitAllClosed(client, owner, submitted - errors, 600_000);
  const lat = closed.map((c) => c.close - c.start);
  const end = Math.max(...closed.map((c) => c.close));
  return {
    seconds,
    targetPerS: ratePerS,
    submitted,
    completedPerS: closed.length / ((end - t0) / 1000),
    latencyP50Ms: pct(lat, 50),
    latencyP95Ms: pct(lat, 95),
    latencyP99Ms: pct(lat, 99),
    maxRunning,
    submitErrors: errors,
  };
}

async function main() {
  const results: BurstResult[] = [];
  let costs: (Cost & { shards: number; procs: number; redis: string }) | undefined;
  let sustain: (Sustained & { shards: number; procs: number }) | undefined;
  const startup: Record<string, Record<string, number>> = {};
  const file = arg('--json', '');
  const save = () => {
    const out = {
      date: new Date().toISOString(),
      machine: `${cpus().length} × ${cpus()[0]?.model}, ${Math.round(totalmem() / 2 ** 30)} GiB, load ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')} at the end`,
      tasks: TASKS,
      redis: costs?.redis,
      results,
      costs,
      sustain,
      startup,
    };
    if (file) writeFileSync(file, JSON.stringify(out, null, 2));
    return out;
  };
  // Bundled once: every worker start loads it (the same startWorkers as src/worker/main.ts, which
  // would bundle again at each start, minutes on a loaded 2-core machine).
  const bundlePath = join(ROOT, '.data', 'bench-production-bundle.js');
  // A fresh clone has no .data yet (the stacks below make their own directories in it).
  mkdirSync(dirname(bundlePath), { recursive: true });
  const bundle = await bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: console.error },
  });
  writeFileSync(bundlePath, bundle.code);
  for (const shards of SHARDS) {
    // Under the repo (like the stack's default): PostgreSQL runs as its own user and needs to reach it.
    const dir = join(ROOT, '.data', `bench-production-${shards}`);
    rmSync(dir, { recursive: true, force: true });
    say(`fresh stack with ${shards} history shards in ${dir}`);
    const b = await startBacking({ dir: join(dir, 'stack'), fresh: true, numHistoryShards: shards });
    startup[`${shards} shards`] = b.stack.timings;
    const connection = await Connection.connect({ address: b.stack.temporal.address });
    const client = new Client({ connection, namespace: b.stack.temporal.namespace });
    try {
      for (const procs of PROCS) {
        say(`${procs} API + ${procs} worker processes (redis ${b.mode})`);
        const k = await startKilnDeployment({
          stackEnv: b.stack.env,
          redis: b.redis,
          dir: join(dir, `kiln-${procs}`),
          models: MODELS,
          apis: procs,
          workers: procs,
          workflowBundle: bundlePath,
        });
        try {
          await burst(b, k, client, shards, procs, 20); // warm-up: connections, JIT, first S3 writes
          const { result } = await burst(b, k, client, shards, procs, TASKS);
          results.push(result);
          say(JSON.stringify(result));
          save();
          if (shards === SHARDS[0] && procs === PROCS[PROCS.length - 1]) {
            const c = await cost(b, k, client, TASKS);
            costs = { ...c.cost, shards, procs, redis: b.mode };
            say(`cost per task: ${JSON.stringify(costs)}`);
            save();
            if (SUSTAIN_S > 0) {
              const rate = Math.max(1, Math.floor(result.throughputPerS * 0.7));
              say(`sustained ${SUSTAIN_S} s at ${rate} tasks/s`);
              sustain = { ...(await sustained(k, client, rate, SUSTAIN_S)), shards, procs };
              say(JSON.stringify(sustain));
              save();
            }
          }
        } finally {
          await k.stop();
        }
      }
    } finally {
      await connection.close();
      await b.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }
  console.log(JSON.stringify(save(), null, 2));
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`[bench:production] FAILED: ${err instanceof Error ? err.stack : err}`);
    process.exit(1);
  },
);
