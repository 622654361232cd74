// `npm run bench:server-ops`: what one task asks of the Temporal server, counted, not timed. The
// dev server's own Prometheus counters (`--metrics-port`) are read before and after each kind's
// batch: RPCs by operation, persistence calls by operation (UpdateWorkflowExecution is a write of
// a workflow's state), visibility writes and server task executions, per task. Kinds: the minimal
// one-activity workflow (bench/minimal), the same started with Kiln's owner and model search
// attributes, with its Web UI summary, and with both (as Kiln starts a task), a Kiln task (`bench-image`, through the API),
// a Kiln inline task, a Kiln task whose call lasts (BENCH_LONG_CALL_MS, 5 s: its heartbeats) and a video whose job lasts 20 s
// (its check loop). Counts do not
// move with the machine's noise, so a lever that saves the server work shows here exactly, where
// bench:levers' times cannot tell it from noise. Each batch is followed by a pause (SETTLE_MS), so
// the server's timeout timers count with their own kind. BENCH_BATCH (200 tasks a kind),
// BENCH_SETTLE_SECONDS (150), BENCH_KINDS (a comma list of parts of kinds' names: those only). Unpinned: the server's CPU per task over each batch is the one timed figure.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { Redis } from 'ioredis';
import { freePort, ROOT, temporalCounters } from '../scripts/services.js';
import { startBackingServices } from '../scripts/stack.js';
import { loadConfig } from '../src/config/env.js';
import { ownerOfKey } from '../src/infra/callers.js';
import { connectTemporal } from '../src/temporal/client.js';
import { createTaskStore } from '../src/tasks/store/create.js';
import {
  benchOperatorView,
  fanOut,
  BENCH_MODELS,
  SUBMIT_BODY,
  cpuByRole,
  drainTasks,
  fmt,
  sleep,
  spawnApi,
  spawnTs,
  spawnWorker,
  waitHttp,
  type CpuRole,
} from './lib.js';

const BATCH = Number(process.env.BENCH_BATCH ?? 200);
const KEY = 'bench-key-owner-0000000000';
/**
 * The pause after each batch: longer than the timeout timers a task leaves behind (they fire after
 * it ended, and cost the server a look at the closed workflow): the workflow task's (10 s), the
 * minimal's activity (1 min) and Kiln's (its model's timeout, 120 s here). Shorter, each kind's
 * counts take in the timers of the kinds before it.
 */
const SETTLE_MS = Number(process.env.BENCH_SETTLE_SECONDS ?? 150) * 1000;
/**
 * A model whose call lasts as a real upstream's does (LONG_CALL_MS, 5 s; gpt-image and Gemini's
 * image models answer in 5-60 s): what the attempt's heartbeats cost the server while it waits.
 */
const LONG_CALL_MS = Number(process.env.BENCH_LONG_CALL_MS ?? 5000);
const SLOW_MODEL = {
  id: 'bench-image-slow',
  provider: 'local',
  latencyMs: LONG_CALL_MS,
  idempotent: true,
  concurrency: 256,
};
/** A video whose upstream job lasts 20 s, checked every 2 s: what its check loop costs the server. */
const SLOW_VIDEO = {
  id: 'bench-video-slow',
  kind: 'video',
  provider: 'local',
  latencyMs: 20_000,
  pollIntervalMs: 2000,
  concurrency: 256,
};
/** BENCH_KINDS=minimal,slow,…: the kinds whose name contains one of these (all by default). */
const PICKED = process.env.BENCH_KINDS?.split(',').filter(Boolean);
/** The counters read, by family: `<family> <service> <operation>` keys. */
const FAMILIES = ['service_requests', 'persistence_requests', 'visibility_persistence_requests', 'task_requests'];

async function main() {
  const started = new Date();
  const metricsPort = await freePort();
  const stack = await startBackingServices({
    name: 'server-ops',
    models: [...BENCH_MODELS, SLOW_MODEL, SLOW_VIDEO],
    env: { RATE_LIMIT_TASK_MS: '0', RATE_LIMIT_BATCH_MS: '0', MAX_UNFINISHED_TASKS: '1000000', LOG_LEVEL: 'warn' },
    temporalMetricsPort: metricsPort,
  });
  process.once('exit', () => void stack.stop());
  const { env, temporal, base } = stack;
  const config = loadConfig({ ...process.env, ...env });
  const worker = spawnWorker(env);
  const api = spawnApi({ ...env, API_PROCESSES: '2' });
  const minimalWorker = spawnTs('bench/minimal/worker.ts', {
    TEMPORAL_ADDRESS: temporal.url,
    MINIMAL_QUEUE: 'bench-min',
  });
  await waitHttp(`${base}/readyz`, 180_000);

  const redis = new Redis(stack.redis.url);
  const store = createTaskStore(redis, { prefix: config.redisPrefix, retentionSeconds: config.retentionSeconds });
  const { client } = await connectTemporal(config);
  const owner = ownerOfKey(config.ownerKey, KEY);
  const operatorView = benchOperatorView(owner, config.ops.summaryPromptChars);
  /** `view`: which of Kiln's start options for operators the start carries. */
  type View = 'none' | 'search attributes' | 'summary' | 'both';
  const startMinimal = (view: View) =>
    client.workflow.start('minimalBaselineWorkflow', {
      workflowId: `min_${randomBytes(16).toString('hex')}`,
      taskQueue: 'bench-min',
      args: ['bench-min.act'],
      ...(view === 'both' || view === 'search attributes'
        ? { typedSearchAttributes: operatorView.typedSearchAttributes }
        : {}),
      ...(view === 'both' || view === 'summary' ? { staticSummary: operatorView.staticSummary } : {}),
    });
  const submit = async (model: string) => {
    const r = await fetch(`${base}/v1beta/models/${model}:generateContent`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: SUBMIT_BODY,
    });
    if (r.status !== 202) throw new Error(`submit answered ${r.status}: ${await r.text()}`);
  };
  const minimalBatch = (view: View) => async () => {
    const handles = await fanOut(BATCH, 16, () => startMinimal(view));
    await Promise.all(handles.map((h) => h.result()));
  };
  const submitVideo = async () => {
    const r = await fetch(`${base}/v1/videos`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: SLOW_VIDEO.id, prompt: 'bench' }),
    });
    if (r.status !== 200 && r.status !== 202) throw new Error(`video submit answered ${r.status}: ${await r.text()}`);
  };
  const kilnBatch = (model: string) => async () => {
    await fanOut(BATCH, 16, () => (model === SLOW_VIDEO.id ? submitVideo() : submit(model)));
    while ((await store.unfinishedCount()) > 0) await sleep(5);
  };
  const kinds: Record<string, () => Promise<void>> = {
    minimal: minimalBatch('none'),
    'minimal + search attributes': minimalBatch('search attributes'),
    'minimal + summary': minimalBatch('summary'),
    "minimal + both (Kiln's start)": minimalBatch('both'),
    'Kiln (bench-image)': kilnBatch('bench-image'),
    'Kiln inline (bench-image-inline)': kilnBatch('bench-image-inline'),
    [`Kiln, a ${LONG_CALL_MS / 1000} s call (bench-image-slow)`]: kilnBatch('bench-image-slow'),
    'Kiln video, a 20 s job checked every 2 s (bench-video-slow)': kilnBatch(SLOW_VIDEO.id),
  };
  for (const name of Object.keys(kinds)) if (PICKED && !PICKED.some((p) => name.includes(p))) delete kinds[name];

  // Warm-up: every path once, then quiet.
  for (let i = 0; i < 20; i++) {
    await (await startMinimal('none')).result();
    await submit('bench-image');
    await submit('bench-image-inline');
  }
  await drainTasks(store, client, 'server-ops');
  await sleep(SETTLE_MS);

  const serverRole: CpuRole = { cmdline: (c) => /temporal/.test(c) && c.includes(`--port ${temporal.port} `) };
  const counts: Record<string, Map<string, number>> = {};
  const serverCpu: Record<string, number> = {};
  for (const [name, batch] of Object.entries(kinds)) {
    const before = await temporalCounters(metricsPort, FAMILIES);
    const cpuBefore = cpuByRole({ server: serverRole }).server;
    await batch();
    // The server's CPU over the batch alone: over the pause it would take in the server's idle upkeep.
    serverCpu[name] = (cpuByRole({ server: serverRole }).server - cpuBefore) / BATCH;
    await sleep(SETTLE_MS);
    const after = await temporalCounters(metricsPort, FAMILIES);
    counts[name] = new Map([...after].map(([k, v]) => [k, (v - (before.get(k) ?? 0)) / BATCH]));
    console.error(`server-ops: ${name} done`);
  }

  // Rows where some kind counts at least 0.05 a task; the background (shard and queue upkeep) is below.
  const names = Object.keys(kinds);
  const keys = [...new Set(names.flatMap((n) => [...counts[n].keys()]))]
    .filter((k) => names.some((n) => (counts[n].get(k) ?? 0) >= 0.05))
    .sort();
  const writes = (n: string) =>
    [...counts[n]].filter(([k]) => / (Create|Update|Append)\w*$/.test(k)).reduce((a, [, v]) => a + v, 0);
  const commit = execFileSync('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD']).toString().trim();
  const text = [
    `Run: \`npm run bench:server-ops\` (BENCH_BATCH=${BATCH}) ${started.toISOString()} → ${new Date().toISOString()}, commit ${commit}`,
    '',
    `| Per task | ${names.join(' | ')} |`,
    `|---|${names.map(() => '---:').join('|')}|`,
    ...keys.map((k) => `| ${k} | ${names.map((n) => fmt(counts[n].get(k) ?? 0, 2)).join(' | ')} |`),
    `| **persistence writes** (Create*, Update*, Append*) | ${names.map((n) => fmt(writes(n), 2)).join(' | ')} |`,
    `| **server CPU (ms)** | ${names.map((n) => fmt(serverCpu[n], 1)).join(' | ')} |`,
  ].join('\n');
  writeFileSync(join(ROOT, 'bench', 'last-server-ops.md'), `${text}\n`);
  console.log(text);
  worker.kill('SIGTERM');
  api.kill('SIGTERM');
  minimalWorker.kill('SIGTERM');
  redis.disconnect();
  await sleep(1000);
  await stack.stop();
  process.exit(0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
