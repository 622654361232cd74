// Failure drills on the production-shaped stack: 2 API processes (src/api/main.ts, one PID each on
// its own port) and 2 worker processes (src/worker/main.ts) against the real Temporal server on
// PostgreSQL, Redis (cluster, or single with KILN_PRODUCTION_REDIS=single) and S3 (moto).
// Each drill shows: no task lost (every accepted task ends terminal, Redis agrees with Temporal),
// no upstream call repeated for a non-idempotent model, 5xx answers no longer than the outage,
// and /readyz naming what is down.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../src/config/env.js';
import { ownerOfKey } from '../../src/infra/callers.js';
import { SEARCH_ATTRIBUTES } from '../../src/shared/task.js';
import { dataConverter } from '../../src/temporal/client.js';
import { startKilnDeployment, type KilnDeployment } from '../../scripts/production/kiln.js';
import { delayed, ok } from '../integration/providers/gemini/fake-gemini.js';
import { DRILL_OPERATOR_TOKEN, REBUILD_DRILL_ENV, rebuildDrill } from './rebuild-drill.js';
import {
  call,
  control,
  pidOfClientPort,
  poller,
  sleep,
  submit,
  submitBody,
  TracingGemini,
  waitAllTerminal,
  waitTerminal,
} from './support.js';

let fake: TracingGemini;
let k: KilnDeployment;
let client: Client;
let connection: Connection;
let bases: string[];
/** Prompts sent to the non-idempotent model: each may reach the upstream at most once. */
const nonIdempotentPrompts: string[] = [];

const newKey = () => `prod-${randomBytes(8).toString('hex')}`;
const ownerOf = (key: string) => ownerOfKey(loadConfig(k.env).ownerKey, key);
const uniq = (what: string) => `${what} ${randomBytes(6).toString('hex')}`;

async function accepted(base: string, key: string, model: string, prompt: string): Promise<string> {
  const r = await submit(base, key, model, prompt);
  expect(r.status, r.text).toBe(202);
  return r.json.id as string;
}

/** Temporal's view of every workflow of an owner: id -> execution status. */
async function workflowsOf(owner: string): Promise<Map<string, string>> {
  const m = new Map<string, string>();
  for await (const wf of client.workflow.list({ query: `${SEARCH_ATTRIBUTES.owner} = '${owner}'` }))
    m.set(wf.workflowId, wf.status.name);
  return m;
}

/** Every workflow of the owner closed, and its Redis record terminal and matching the workflow's result. */
async function convergedOwner(key: string, timeoutMs = 90_000): Promise<Map<string, string>> {
  const owner = ownerOf(key);
  const deadline = Date.now() + timeoutMs;
  let wfs = await workflowsOf(owner);
  while ([...wfs.values()].some((s) => s === 'RUNNING') && Date.now() < deadline) {
    await sleep(500);
    wfs = await workflowsOf(owner);
  }
  expect([...wfs.entries()].filter(([, s]) => s === 'RUNNING')).toEqual([]);
  const records = await waitAllTerminal(bases, key, [...wfs.keys()], 30_000);
  for (const r of records) {
    const result = await client.workflow.getHandle(r.id).result();
    expect(r.status).toBe((result as { status: string }).status);
  }
  return wfs;
}

async function readyz(base: string) {
  const r = await call(base, 'none', '/readyz', { timeoutMs: 5000 });
  return { status: r.status, checks: r.json?.checks as Record<string, { ok: boolean; detail?: string }> | undefined };
}

beforeAll(async () => {
  fake = (await new TracingGemini().start()) as TracingGemini;
  const gemini = {
    provider: 'gemini',
    baseUrl: fake.baseUrl,
    credential: 'passthrough',
    timeoutMs: 30_000,
    // A lost worker is noticed after this long. Not shorter: on a loaded 2-core machine a live
    // worker's heartbeats can lag a second or more, and a false alarm would end a task uncertain.
    heartbeatTimeoutMs: 5000,
    maxAttempts: 3,
  };
  k = await startKilnDeployment({
    stackEnv: inject('stackEnv'),
    redis: inject('redis'),
    dir: join(inject('stackDir'), `kiln-${randomBytes(3).toString('hex')}`),
    workflowBundle: inject('workflowBundle'),
    models: [
      { ...gemini, id: 'g-once', idempotent: false },
      { ...gemini, id: 'g-idem', idempotent: true },
      { id: 'kiln-image-1', provider: 'local', latencyMs: 300, idempotent: true, heartbeatTimeoutMs: 5000 },
      // The rebuild drill's tasks in flight: all under way at once, on a queue of their own.
      {
        id: 'kiln-image-slow',
        provider: 'local',
        latencyMs: 45_000,
        idempotent: true,
        heartbeatTimeoutMs: 5000,
        timeoutMs: 120_000,
        concurrency: 64,
      },
    ],
    env: { KILN_OPERATOR_TOKEN: DRILL_OPERATOR_TOKEN, ...REBUILD_DRILL_ENV },
  });
  bases = k.apis.map((a) => a.url);
  connection = await Connection.connect({ address: inject('stackEnv').TEMPORAL_ADDRESS });
  // Kiln encrypts payloads: reading a workflow's result needs its data converter.
  client = new Client({
    connection,
    namespace: inject('stackEnv').TEMPORAL_NAMESPACE,
    dataConverter: dataConverter(loadConfig(k.env)),
  });
}, 300_000);

afterAll(async () => {
  // Whatever drill ran, no call of a non-idempotent model reached the upstream twice.
  if (fake) for (const p of nonIdempotentPrompts) expect(fake.callsFor(p).length, p).toBeLessThanOrEqual(1);
  await connection?.close();
  await k?.stop();
  await fake?.close();
});

/** Every API and worker process running (a failed drill may have left one down) and both APIs ready. */
beforeEach(async () => {
  for (const p of [...k.apis, ...k.workers]) if (!p.pid()) await p.start();
  for (const base of bases)
    await expect.poll(async () => (await readyz(base)).status, { timeout: 90_000, interval: 500 }).toBe(200);
});

describe(`production drills (redis ${inject('redisMode')})`, () => {
  it('FLUSHALL of the read model: the rebuild restores every task and list while tasks keep finishing', async () => {
    const keys = await rebuildDrill(k, 'kiln-image-slow');
    for (const key of keys) await convergedOwner(key);
  });

  it('serves on 2 API and 2 worker processes', async () => {
    expect(new Set([...k.apis, ...k.workers].map((p) => p.pid())).size).toBe(4);
    const key = newKey();
    const ids = await Promise.all(bases.map((b, i) => accepted(b, key, 'kiln-image-1', `hello ${i}`)));
    const done = await waitAllTerminal(bases, key, ids);
    expect(done.map((t) => t.status)).toEqual(['succeeded', 'succeeded']);
  });

  it(
    'kill -9 of a worker mid upstream call: non-idempotent ends uncertain (1 call), ' +
      'idempotent is retried once and succeeds (2 calls); the other worker carries on',
    async () => {
      fake.setDefault(delayed(4000, ok()));
      const key = newKey();
      const killWorkerRunning = async (prompt: string) => {
        await expect.poll(() => fake.callsFor(prompt).length, { timeout: 60_000 }).toBe(1);
        const pid = pidOfClientPort(fake.clientPortFor(prompt)!);
        const victim = k.workers.find((w) => w.pid() === pid);
        expect(victim, `the process of pid ${pid} is one of the workers`).toBeDefined();
        await victim!.kill();
        return victim!;
      };
      const probe = await accepted(bases[0], key, 'kiln-image-1', 'probe');
      const poll = poller(bases[0], key, () => `/v1/tasks/${probe}`);

      // Non-idempotent: the call may have reached the upstream, so it is never sent again.
      const once = uniq('non-idempotent');
      nonIdempotentPrompts.push(once);
      const onceId = await accepted(bases[0], key, 'g-once', once);
      const first = await killWorkerRunning(once);
      // The other worker carries on with new work meanwhile.
      const during = await Promise.all(
        [0, 1, 2].map((i) => accepted(bases[i % 2], key, 'kiln-image-1', `during ${i}`)),
      );
      const [onceTask, ...duringTasks] = await waitAllTerminal(bases, key, [onceId, ...during], 60_000);
      expect(onceTask.status).toBe('uncertain');
      expect(typeof onceTask.uncertain_reason).toBe('string');
      expect(duringTasks.map((t) => t.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
      expect(fake.callsFor(once)).toHaveLength(1);
      await first.start();

      // Idempotent: the retry is safe (same idempotency key), so it runs again and succeeds.
      const idem = uniq('idempotent');
      const idemId = await accepted(bases[1], key, 'g-idem', idem);
      const second = await killWorkerRunning(idem);
      const idemTask = await waitTerminal(bases, key, idemId, 60_000);
      expect(idemTask.status).toBe('succeeded');
      const calls = fake.callsFor(idem);
      expect(calls).toHaveLength(2);
      expect(calls[0].headers['idempotency-key']).toBe(idemId);
      expect(calls[1].headers['idempotency-key']).toBe(idemId);
      await second.start();

      const stats = await poll.stop();
      // A worker's death is nothing the API answers differently for.
      expect(stats.fiveXX, JSON.stringify(stats)).toBe(0);
      await convergedOwner(key);
      fake.setDefault(ok());
    },
  );

  it(
    'terminate in the upstream call (as from the Web UI): within 60 s a non-idempotent task ends ' +
      'uncertain (1 call), an idempotent one failed / canceled, naming the operator',
    async () => {
      fake.setDefault(delayed(60_000, ok()));
      const key = newKey();
      const once = uniq('terminate non-idempotent');
      nonIdempotentPrompts.push(once);
      const idem = uniq('terminate idempotent');
      const onceId = await accepted(bases[0], key, 'g-once', once);
      const idemId = await accepted(bases[1], key, 'g-idem', idem);
      await expect.poll(() => fake.callsFor(once).length + fake.callsFor(idem).length, { timeout: 60_000 }).toBe(2);
      const t0 = Date.now();
      for (const id of [onceId, idemId]) await client.workflow.getHandle(id).terminate('production drill: terminate');
      const [onceTask, idemTask] = await waitAllTerminal(bases, key, [onceId, idemId], 60_000);
      // The reconciliation round (every 15 s) comes after the 10 s grace a new task gets.
      expect(Date.now() - t0).toBeLessThan(60_000);
      expect(onceTask.status).toBe('uncertain');
      expect(onceTask.uncertain_reason).toMatch(/^Terminated by an operator \(.*production drill: terminate\) after/);
      expect(idemTask.status).toBe('failed');
      expect(idemTask.error.code).toBe('canceled');
      expect(idemTask.error.message).toMatch(/^Terminated by an operator .* idempotent/);
      expect(fake.callsFor(once)).toHaveLength(1);
      fake.setDefault(ok());
    },
  );

  it(
    'kill -9 of an API process with 100 submits in flight: every ' +
      '202 ends terminal, no workflow is left running or accepted',
    async () => {
      const key = newKey();
      const [victim, survivor] = k.apis;
      const probe = await accepted(survivor.url, key, 'kiln-image-1', 'probe');
      const poll = poller(survivor.url, key, () => `/v1/tasks/${probe}`);
      let killedAt = 0;
      let firstFromVictim!: () => void;
      const victimAnswered = new Promise<void>((r) => (firstFromVictim = r));
      const submits = Array.from({ length: 100 }, async (_, i) => {
        const base = i % 2 === 0 ? victim.url : survivor.url;
        const r = await call(base, key, '/v1beta/models/kiln-image-1:generateContent', {
          json: submitBody(`in flight ${i}`),
          timeoutMs: 120_000,
        });
        if (base === victim.url && r.status === 202) firstFromVictim();
        return r;
      });
      await Promise.race([victimAnswered, sleep(10_000)]);
      await victim.kill();
      killedAt = Date.now();
      const answers = await Promise.all(submits);
      const ids = answers.filter((a) => a.status === 202).map((a) => a.json.id as string);
      // The survivor answered all of its half: 202, or a retryable 503 when its Redis calls overran
      // their deadline under this burst on a loaded machine (a workflow started for one is checked below).
      const survivorAnswers = answers.filter((_, i) => i % 2 === 1);
      const overloaded = answers.filter((a) => a.status === 503);
      expect(
        survivorAnswers
          .filter((a) => a.status !== 202 && !(a.status === 503 && a.json?.error?.code === 'service_unavailable'))
          .map((a) => `${a.status} ${a.text.slice(0, 200)}`),
      ).toEqual([]);
      // The victim's unanswered ones got no HTTP answer at all: no 5xx other than that same retryable 503.
      expect(
        answers
          .filter((_, i) => i % 2 === 0)
          .filter(
            (a) =>
              a.status !== 202 &&
              a.status !== 0 &&
              !(a.status === 503 && a.json?.error?.code === 'service_unavailable'),
          )
          .map((a) => `${a.status} ${a.text.slice(0, 200)}`),
      ).toEqual([]);

      const tasks = await waitAllTerminal([survivor.url], key, ids);
      expect(tasks.every((t) => t.status === 'succeeded')).toBe(true);
      // Workflows whose id no client got (the process died before answering) run to the end too.
      const wfs = await convergedOwner(key);
      const orphans = [...wfs.keys()].filter((id) => !ids.includes(id) && id !== probe);
      console.info(
        `[drill api kill] ${ids.length} accepted, ${answers.filter((a) => a.status === 0).length} cut ` +
          `off by the kill, ${overloaded.length} answered ` +
          `a retryable 503 (Redis deadline under the ` +
          `burst), ${orphans.length} workflow(s) no client got an id for; all terminal`,
      );
      // And no record is left `accepted` in the read model (what GET /v1/tasks lists).
      const listed: { id: string; status: string; created_at: number }[] = [];
      for (let cursor = ''; ;) {
        const page = await call(survivor.url, key, `/v1/tasks?limit=100${cursor}`);
        expect(page.status, page.text).toBe(200);
        listed.push(...page.json.items);
        if (page.json.items.length < 100) break;
        const last = listed[listed.length - 1];
        cursor = `&before_created_at=${last.created_at}&before_id=${last.id}`;
      }
      expect(listed.length).toBeGreaterThanOrEqual(ids.length);
      expect(listed.filter((t) => t.status !== 'succeeded')).toEqual([]);

      const stats = await poll.stop();
      expect(stats.fiveXX, JSON.stringify(stats)).toBe(0);
      expect(killedAt).toBeGreaterThan(0);
      await victim.start();
    },
  );

  const clusterMode = inject('redisMode') === 'cluster';
  it.skipIf(!clusterMode)(
    'kill -9 of a Redis primary: the cluster fails over, polls recover within 15 s, no transition lost',
    async () => {
      const key = newKey();
      const probe = await accepted(bases[0], key, 'kiln-image-1', 'probe');
      await waitTerminal(bases, key, probe);
      // A finished task's poll is answered from the API process's memory (its view never changes),
      // so it does not tell when Redis is back: the owner's task list is read from Redis every time.
      const LIST = '/v1/tasks?limit=5';
      const polls = bases.map((b) => poller(b, key, () => LIST));
      const ready: { at: number; status: number; checks?: Record<string, { ok: boolean; detail?: string }> }[] = [];
      let stop = false;
      const readyLoop = (async () => {
        while (!stop) {
          ready.push({ at: Date.now(), ...(await readyz(bases[1])) });
          await sleep(250);
        }
      })();
      // Work in flight across the failover.
      const ids: string[] = [];
      const submitted: { at: number; status: number }[] = [];
      const submitting = (async () => {
        for (let i = 0; i < 30 && !stop; i++) {
          const r = await submit(bases[i % 2], key, 'kiln-image-1', `failover ${i}`);
          submitted.push({ at: Date.now(), status: r.status });
          if (r.status === 202) ids.push(r.json.id);
          await sleep(300);
        }
      })();
      await sleep(2000);
      // The primary that holds the owner's task index (Kiln's key `{prefix}owner:{owner}:tasks`).
      const ownerIndex = `${k.env.REDIS_PREFIX}owner:{${ownerOf(key)}}:tasks`;
      const { port } = await control('redis/kill-primary', { key: ownerIndex });
      const killedAt = Date.now();
      // Reads that need that primary answer again within 15 s of the kill.
      let recoveredAt = 0;
      while (Date.now() - killedAt < 30_000) {
        const r = await call(bases[0], key, LIST, { timeoutMs: 2000 });
        if (r.status === 200 && Date.now() - killedAt > 500) {
          recoveredAt = Date.now();
          break;
        }
        await sleep(100);
      }
      await submitting;
      stop = true;
      await readyLoop;
      const stats = await Promise.all(polls.map((p) => p.stop()));
      await control('redis/start-node', { port });
      await control('redis/wait-healthy');
      expect(recoveredAt, 'polls answered again').toBeGreaterThan(0);
      expect(recoveredAt - killedAt).toBeLessThan(15_000);
      for (const s of stats) expect(s.longestBadMs, JSON.stringify(s)).toBeLessThan(15_000);
      // Whenever /readyz was unready, what it names is Redis: its redis check, or a check that
      // failed on a Redis Cluster error (the worker check reads the beacons from Redis).
      const redisError = /slot|cluster|redis|MOVED|ASK|TRYAGAIN|CLUSTERDOWN|ECONNREFUSED|no answer within/i;
      // Right after the failover the workers' beacons (written every 500 ms to Redis) may still be
      // stale for a beat: a worker check that says so within 3 s of Redis being down is Redis's too.
      const redisDownAt = ready.filter((x) => x.checks?.redis && !x.checks.redis.ok).map((x) => x.at);
      const afterRedis = (at: number) => redisDownAt.some((t) => t <= at && at - t <= 3000);
      for (const r of ready.filter((x) => x.status === 503)) {
        const failing = Object.entries(r.checks ?? {}).filter(([, c]) => !c.ok);
        const blamesRedis = ([name, c]: [string, { detail?: string }]) =>
          name === 'redis' ||
          redisError.test(c.detail ?? '') ||
          (name === 'worker' && /beacon/.test(c.detail ?? '') && afterRedis(r.at));
        expect(failing.length > 0 && failing.every(blamesRedis), JSON.stringify(r)).toBe(true);
      }
      const refused = submitted.filter((x) => x.status !== 202);
      // Submits are refused only around the failover, not after the polls are back.
      expect(refused.filter((x) => x.at > recoveredAt + 5000)).toEqual([]);
      console.info(
        `[drill redis failover] polls back ${recoveredAt - killedAt} ms after the kill; longest ` +
          `5xx run ${Math.max(...stats.map((s) => s.longestBadMs))} ms; ${ids.length} tasks ` +
          `accepted, ${refused.length} submits refused (${refused.map((x) => x.status).join(',')}); ` +
          `/readyz unready ${ready.filter((x) => x.status === 503).length} of ${ready.length} samples`,
      );
      // Every accepted task ends terminal and its record agrees with its workflow (no transition
      // lost). A task whose Redis write hit the failover may end failed: that is reported, not lost.
      const tasks = await waitAllTerminal(bases, key, ids);
      const notSucceeded = tasks.filter((t) => t.status !== 'succeeded');
      if (notSucceeded.length)
        console.warn(
          `[drill redis failover] ${notSucceeded.length} task(s) not ` +
            `succeeded: ${JSON.stringify(
              notSucceeded.map((t) => ({ id: t.id, status: t.status, error: t.error, reason: t.uncertain_reason })),
            )}`,
        );
      expect(notSucceeded.filter((t) => t.status === 'uncertain')).toEqual([]);
      await convergedOwner(key);
    },
  );
  if (!clusterMode)
    it.skip(
      'kill -9 of a Redis primary: needs KILN_PRODUCTION_REDIS=cluster ' +
        "(Kiln's REDIS_CLUSTER_NODES support); this run uses a single redis-server",
      () => {},
    );

  it(
    'stop and restart of the Temporal server mid-run: tasks continue, ' +
      'polls keep answering from Redis, /readyz names temporal',
    async () => {
      const key = newKey();
      const ids = await Promise.all(
        Array.from({ length: 10 }, (_, i) => accepted(bases[i % 2], key, 'kiln-image-1', `temporal ${i}`)),
      );
      const polls = ids.slice(0, 2).map((id, i) => poller(bases[i], key, () => `/v1/tasks/${id}`));
      const submits: { at: number; status: number }[] = [];
      const more: string[] = [];
      let stop = false;
      const submitting = (async () => {
        for (let i = 0; !stop; i++) {
          const r = await submit(bases[i % 2], key, 'kiln-image-1', `during outage ${i}`);
          submits.push({ at: Date.now(), status: r.status });
          if (r.status === 202) more.push(r.json.id);
          await sleep(250);
        }
      })();
      await sleep(1000);
      const downAt = Date.now();
      await control('temporal/stop');
      await sleep(1000);
      const during = await readyz(bases[0]);
      // Polls are answered from Redis while Temporal is away.
      const pollDuring = await call(bases[1], key, `/v1/tasks/${ids[5]}`);
      await sleep(3000);
      await control('temporal/start');
      const upAt = Date.now();
      // Back to ready (a worker polling again) before the outage is over for clients.
      await expect.poll(async () => (await readyz(bases[0])).status, { timeout: 60_000, interval: 500 }).toBe(200);
      await sleep(1000);
      stop = true;
      await submitting;
      const stats = await Promise.all(polls.map((p) => p.stop()));

      expect(during.status).toBe(503);
      expect(during.checks?.temporal.ok).toBe(false);
      expect(pollDuring.status).toBe(200);
      for (const s of stats) expect(s.fiveXX, JSON.stringify(s)).toBe(0);
      // Submits fail (503) only while Temporal is away: the longest run of 5xx is not longer than the outage.
      let longest = 0;
      let since: number | null = null;
      for (const s of submits) {
        if (s.status >= 500 && since === null) since = s.at;
        if (s.status < 500 && since !== null) {
          longest = Math.max(longest, s.at - since);
          since = null;
        }
      }
      expect(since, 'submits answer 202 again after the restart').toBeNull();
      // Slack for the clients' reconnect backoff after the server is back.
      expect(longest).toBeLessThanOrEqual(upAt - downAt + 5000);
      console.info(
        `[drill temporal restart] outage ${upAt - downAt} ms; longest run of 5xx submits ${longest} ms; ` +
          `${submits.filter((s) => s.status >= 500).length} of ${submits.length} submits refused`,
      );
      const tasks = await waitAllTerminal(bases, key, [...ids, ...more]);
      expect(tasks.every((t) => t.status === 'succeeded')).toBe(true);
      await convergedOwner(key);
    },
  );
});
