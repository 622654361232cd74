// `npm run bench:profile`: where the API's CPU goes on the read paths and the submit. For each
// scenario an API process runs under `node --cpu-prof` against records seeded straight into Redis
// (no worker, no upstream: submitted tasks wait in Temporal), autocannon loads it, and the profile
// is summarised: CPU µs per request and the top frames by self time. Results go to stdout as Markdown (BENCHMARKS.md quotes them). The last
// scenario is the reference: bench/bare-koa.ts answering the poll's bytes, profiled the same way.
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { loadConfig } from '../src/config/env.js';
import { ownerOfKey } from '../src/infra/callers.js';
import { createTaskStore } from '../src/tasks/store/create.js';
import type { ImageTaskRecord } from '../src/shared/image-task.js';
import type { VideoTaskRecord } from '../src/shared/video-task.js';
import { freePort } from '../scripts/services.js';
import { fmt, load, rssMiB, sleep, spawnApi, spawnTs, startBenchStack, waitHttp, type LoadResult } from './lib.js';
import { summarise, type ProfileSummary } from './profile-summary.js';

/** CPU time a process has used so far (user + system), from /proc, in ms. */
function cpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
}

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const KEY = 'bench-key-owner-0000000000';

interface Scenario {
  name: string;
  connections: number;
  url: string;
  method?: 'GET' | 'POST';
  body?: string;
  /** The reference: bench/bare-koa.ts answering the poll's body, profiled the same way. */
  bare?: boolean;
}

async function main() {
  // No worker runs: submitted tasks wait in Temporal, so the submit scenario measures the API alone.
  const stack = await startBenchStack('profile', {
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
    API_PROCESSES: '1',
    MAX_UNFINISHED_TASKS: '1000000',
  });
  const { dir, redis: redisSvc, temporal, base, env } = stack;
  const config = loadConfig({ ...process.env, ...env });
  const redis = new Redis(redisSvc.url);
  const store = createTaskStore(redis, { prefix: config.redisPrefix, retentionSeconds: config.retentionSeconds });
  const owner = ownerOfKey(config.ownerKey, KEY);
  const now = Math.floor(Date.now() / 1000);
  const image = (i: number): ImageTaskRecord => ({
    id: `task_${randomBytes(16).toString('hex')}`,
    kind: 'image',
    owner,
    model: 'bench-image',
    status: 'succeeded',
    created_at: now - i,
    finished_at: now,
    response_id: 'resp',
    model_version: 'bench',
    candidates: [
      {
        content: {
          role: 'model',
          parts: [
            { inlineData: { mimeType: 'image/png', data: `${base}/v1/files/${randomBytes(16).toString('hex')}.png` } },
          ],
        },
        finishReason: 'STOP',
        index: 0,
      },
    ],
    error: null,
  });
  // The list owner has 2,000 tasks, as in the peer comparison.
  const records = Array.from({ length: 2000 }, (_, i) => image(i));
  for (let i = 0; i < records.length; i += 200)
    await Promise.all(records.slice(i, i + 200).map((r) => store.transition(r)));
  const video: VideoTaskRecord = {
    id: `video_${randomBytes(16).toString('hex')}`,
    kind: 'video',
    owner,
    model: 'bench-video',
    status: 'succeeded',
    progress: 100,
    prompt: 'bench',
    seconds: '4',
    size: '720x1280',
    created_at: now,
    completed_at: now,
    video_url: `${base}/v1/files/x.mp4`,
    error: null,
  };
  await store.transition(video);
  const ids = records.slice(0, 100).map((r) => r.id);

  const scenarios: Scenario[] = [
    { name: 'poll one finished task', connections: 32, url: `/v1/tasks/${ids[0]}` },
    { name: 'poll one finished video', connections: 32, url: `/v1/videos/${video.id}` },
    {
      name: 'batch-get of 100 ids',
      connections: 32,
      url: '/v1/tasks/batch-get',
      method: 'POST',
      body: JSON.stringify({ ids }),
    },
    { name: 'list limit=100 (owner with 2,000 tasks)', connections: 16, url: '/v1/tasks?limit=100' },
    {
      name: 'submit one image task (no worker: the task waits in Temporal)',
      connections: 8,
      url: '/v1beta/models/bench-image:generateContent',
      method: 'POST',
      body: JSON.stringify({
        contents: [{ role: 'user', parts: [{ text: 'bench' }] }],
        generationConfig: { imageConfig: { aspectRatio: '99:1', output: 'url' } },
      }),
    },
    { name: "bare Koa handler, the poll's body (the reference)", connections: 32, url: '/', bare: true },
  ];
  const startKiln = async (nodeArgs: string[]) => {
    const api = spawnApi(env, nodeArgs, join(dir, 'api.log'));
    await waitHttp(`${base}/healthz`);
    return { api, target: base };
  };
  // Bare Koa answers the very bytes Kiln's poll answers; a SIGTERM ends it with exit 0, so the
  // profiler writes its file as it does for the API.
  const startBare = async (headers: Record<string, string>, nodeArgs: string[]) => {
    const kiln = await startKiln([]);
    const pollBody = await (await fetch(`${base}/v1/tasks/${ids[0]}`, { headers })).text();
    const stopped = new Promise((res) => kiln.api.once('exit', res));
    kiln.api.kill('SIGTERM');
    await stopped;
    const port = await freePort();
    const api = spawnTs('bench/bare-koa.ts', { PORT: String(port), BARE_BODY: pollBody }, nodeArgs);
    await waitHttp(`http://127.0.0.1:${port}/`);
    return { api, target: `http://127.0.0.1:${port}` };
  };
  // BENCH_SCENARIOS=poll,batch picks scenarios by a word of their name.
  const pick = process.env.BENCH_SCENARIOS?.split(',');
  if (pick) scenarios.splice(0, scenarios.length, ...scenarios.filter((s) => pick.some((w) => s.name.includes(w))));
  const out: { s: Scenario; load: LoadResult; cpuUs: number; prof: ProfileSummary }[] = [];
  for (const s of scenarios) {
    const profDir = join(dir, `prof-${out.length}`);
    const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
    const profArgs = ['--cpu-prof', `--cpu-prof-dir=${profDir}`];
    const { api, target } = s.bare ? await startBare(headers, profArgs) : await startKiln(profArgs);
    const run = (seconds: number) =>
      load({ url: target + s.url, method: s.method, headers, body: s.body, connections: s.connections, seconds });
    await run(2); // warm-up: JIT and connections, left out of the figures
    const cpuBefore = cpuMs(api.pid!);
    const t0 = performance.now();
    const r = await run(SECONDS);
    const cpu = cpuMs(api.pid!) - cpuBefore;
    console.error(`${s.name}: API RSS after the load ${fmt(rssMiB(api.pid!))} MiB`);
    const exited = new Promise((res) => api.once('exit', res));
    api.kill('SIGTERM');
    await exited;
    const windowMs = performance.now() - t0;
    await sleep(200);
    // The main thread's profile (thread id 0): tsx's loader thread writes one of its own.
    const file = readdirSync(profDir).find((f) => /\.0\.\d+\.cpuprofile$/.test(f));
    if (!file) throw new Error(`no CPU profile written for ${s.name}`);
    const requests = Math.round(r.rps * SECONDS);
    // Only samples of the measured load (start-up and warm-up cut off by time from the profile's end).
    out.push({
      s,
      load: r,
      cpuUs: (cpu * 1000) / requests,
      prof: summarise(JSON.parse(readFileSync(join(profDir, file), 'utf8')), requests, windowMs),
    });
  }

  console.log(
    `# API read-path profile (${new Date().toISOString().slice(0, 10)}, ${SECONDS} s ` +
      `per scenario, LOG_LEVEL=${env.LOG_LEVEL})\n`,
  );
  for (const { s, load: l, cpuUs, prof } of out) {
    console.log(
      `## ${s.name} (${s.connections} connections): ${l.rps.toFixed(0)} req/s, p50 ${l.p50} ms, p99 ${l.p99} ms`,
    );
    console.log(
      `CPU per request: **${cpuUs.toFixed(0)} µs** (user + system, ` +
        `/proc); profiled busy ${prof.usPerRequest.toFixed(0)} µs/req\n`,
    );
    console.log('| self µs/req | share | frame |\n|---:|---:|---|');
    for (const f of prof.top)
      console.log(`| ${f.usPerRequest.toFixed(1)} | ${(f.share * 100).toFixed(1)} % | ${f.name} |`);
    console.log('\n| by area | µs/req |\n|---|---:|');
    for (const [area, us] of prof.areas) console.log(`| ${area} | ${us.toFixed(1)} |`);
    console.log('');
  }
  await redis.quit();
  await Promise.all([redisSvc.stop(), temporal.stop()]);
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
