// `npm run bench`'s reads: poll, video poll, batch-get and list against a bare Koa handler that
// answers the same bytes (and Koa + one Redis read), then list pages from owners of every size.
import { randomBytes } from 'node:crypto';
import { freePort } from '../../scripts/services.js';
import { ownerOfKey } from '../../src/infra/callers.js';
import type { ImageTaskRecord } from '../../src/shared/image-task.js';
import { load, loop, spawnTs, waitHttp, type LoadResult } from '../lib.js';
import { OTHER_KEY, ROUNDS, SECONDS, WARMUP_SECONDS, type RunContext } from './context.js';
import { median, roundRatios, roundsText } from './report.js';

/** The seeded owners whose lists are read: 10,000, 100 and 10 tasks. */
type ListOwners = Record<'big' | 'mid' | 'small', Record<string, string>>;

/** 2–4. The reads against bare Koa. Answers the owners it seeded, whose lists `listFlatnessRows` reads. */
export async function readRows(ctx: RunContext): Promise<ListOwners> {
  const { config, store, redis, auth, submitOne, drain, rows, tally } = ctx;
  const { base, env } = ctx.stack;
  const barePort = await freePort();
  // Records to read: own finished tasks, another owner's, and well-formed ids that do not exist.
  const own: string[] = [];
  for (let i = 0; i < 100; i++) own.push((await submitOne()).id);
  const others: string[] = [];
  for (let i = 0; i < 30; i++) others.push((await submitOne(OTHER_KEY)).id);
  const video = (await (
    await fetch(`${base}/v1/videos`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ model: 'bench-video', prompt: 'bench' }),
    })
  ).json()) as { id: string };
  tally.submitted += 131;
  await drain();
  const ghosts = Array.from({ length: 30 }, () => `task_${randomBytes(16).toString('hex')}`);

  // Owners to list: one with 10,000 tasks, the peer's 2,000, 100 and 10.
  const now = Math.floor(Date.now() / 1000);
  const seed = async (name: string, n: number) => {
    const o = ownerOfKey(config.ownerKey, name);
    for (let i = 0; i < n; i += 500) {
      await Promise.all(
        Array.from({ length: Math.min(500, n - i) }, (_, j) => {
          const r: ImageTaskRecord = {
            id: `task_${randomBytes(16).toString('hex')}`,
            kind: 'image',
            owner: o,
            model: 'bench-image',
            status: 'succeeded',
            created_at: now - ((i + j) % 86400),
            finished_at: now,
            candidates: [],
            error: null,
          };
          return store.transition(r);
        }),
      );
    }
    return { authorization: `Bearer ${name}` };
  };
  const big = await seed('bench-owner-10000-xxxxxxxx', 10_000);
  const peerSized = await seed('bench-owner-2000-xxxxxxxxx', 2_000);
  const mid = await seed('bench-owner-100-xxxxxxxxxx', 100);
  const small = await seed('bench-owner-10-xxxxxxxxxxx', 10);

  // The baselines: a bare Koa handler answering the same body as a poll, and Koa + one ioredis read
  // of the same record.
  const pollUrl = `${base}/v1/tasks/${own[0]}`;
  const pollBody = await (await fetch(pollUrl, { headers: auth })).text();
  const bare = spawnTs('bench/bare-koa.ts', { PORT: String(barePort), BARE_BODY: pollBody });
  const koaRedisPort = await freePort();
  const bareRedis = spawnTs('bench/bare-koa.ts', {
    PORT: String(koaRedisPort),
    // The same way to Redis as Kiln's (its Unix socket): the baseline pays what Kiln's reads pay.
    BARE_REDIS_URL: env.REDIS_URL!,
    BARE_KEY: store.taskKey(own[0]),
  });
  await waitHttp(`http://127.0.0.1:${barePort}/`);
  await waitHttp(`http://127.0.0.1:${koaRedisPort}/`);
  const batchBody = JSON.stringify({ ids: [...own.slice(0, 40), ...others, ...ghosts] });
  // Unknown ids are asked of Temporal once; this first batch takes that cost out of the measurement.
  await fetch(`${base}/v1/tasks/batch-get`, { method: 'POST', headers: auth, body: batchBody });

  // 2–4. The reads against bare Koa, in BENCH_ROUNDS alternating rounds: this machine's host is
  // noisy (bare Koa alone moved between 24k and 41k req/s from one run to the next), so each ratio
  // is the median of the ratios within a round, where both sides met the same conditions.
  let cursor = Math.floor(Date.now() / 1000) + 86400;
  const reads: { what: string; opts: Omit<Parameters<typeof load>[0], 'seconds'> }[] = [
    { what: 'bare Koa handler (32 connections)', opts: { url: `http://127.0.0.1:${barePort}/`, connections: 32 } },
    {
      what: 'Koa + one ioredis HGET + JSON.parse/stringify of the record',
      opts: { url: `http://127.0.0.1:${koaRedisPort}/`, connections: 32 },
    },
    { what: 'single poll (32 connections)', opts: { url: pollUrl, headers: auth, connections: 32 } },
    {
      what: 'video poll (32 connections)',
      opts: { url: `${base}/v1/videos/${video.id}`, headers: auth, connections: 32 },
    },
    {
      what: 'batch-get of 100 own ids (32 connections)',
      opts: {
        url: `${base}/v1/tasks/batch-get`,
        method: 'POST',
        headers: auth,
        body: JSON.stringify({ ids: own }),
        connections: 32,
      },
    },
    {
      what: "batch-get of 100 ids: 40 own, 30 another owner's, 30 unknown",
      opts: { url: `${base}/v1/tasks/batch-get`, method: 'POST', headers: auth, body: batchBody, connections: 32 },
    },
    {
      what: 'list limit=100, owner with 2,000 tasks (16 connections)',
      opts: { url: `${base}/v1/tasks?limit=100`, headers: peerSized, connections: 16 },
    },
    {
      // The same page, but every request names a cursor of its own (after every task), so no API
      // process has it kept: what a page costs when it is made (src/tasks/store/list-pages.ts).
      what: 'list limit=100, owner with 2,000 tasks, a new cursor each page (16 connections)',
      opts: {
        url: `${base}/v1/tasks?limit=100`,
        headers: peerSized,
        connections: 16,
        requests: [{ setupRequest: (req) => ({ ...req, path: `/v1/tasks?limit=100&before_created_at=${cursor++}` }) }],
      },
    },
  ];
  const rounds = reads.map((): LoadResult[] => []);
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, r] of reads.entries())
      rounds[i].push(await load({ ...r.opts, seconds: SECONDS, warmupSeconds: WARMUP_SECONDS }));
  }
  bare.kill();
  bareRedis.kill();
  const koa = rounds[0];
  for (const [i, r] of reads.entries()) {
    if (i === 0) {
      rows.push({ what: r.what, kiln: median(koa), note: `the baseline of the ratios below; ${roundsText(koa)}` });
      continue;
    }
    rows.push({
      what: r.what,
      kiln: median(rounds[i]),
      base: median(koa),
      baseName: 'bare Koa handler, same body',
      ratioText: roundRatios(rounds[i], koa),
    });
    if (i === 2) {
      const redisRead = await loop(32, SECONDS, () => redis.hget(store.taskKey(own[0]), 'j'));
      rows.push({
        what: '  the same record, raw ioredis HGET (32 in flight)',
        kiln: redisRead,
        note: 'no HTTP, no JSON: the floor of one Redis round trip',
      });
    }
  }
  return { big, mid, small };
}

/** List flatness, over the owners `readRows` seeded. */
export async function listFlatnessRows(
  { rows, stack: { base } }: RunContext,
  { big, mid, small }: ListOwners,
): Promise<void> {
  // List flatness: the same page size from owners with 10,000, 100 and 10 tasks, in alternating
  // rounds too (one round each moved the 10,000-vs-100 ratio between 0.86 and 1.03 across runs).
  const listPage = (headers: Record<string, string>) =>
    load({
      url: `${base}/v1/tasks?limit=100`,
      headers,
      connections: 32,
      seconds: SECONDS,
      warmupSeconds: WARMUP_SECONDS,
    });
  const [bigs, mids, smalls]: LoadResult[][] = [[], [], []];
  for (let round = 0; round < ROUNDS; round++) {
    bigs.push(await listPage(big));
    mids.push(await listPage(mid));
    smalls.push(await listPage(small));
  }
  const listSmall = median(smalls);
  rows.push({
    what: 'list limit=100, owner with 10,000 tasks',
    kiln: median(bigs),
    base: median(mids),
    baseName: 'owner with 100 tasks (same page size)',
    ratioText: roundRatios(bigs, mids),
  });
  rows.push({ what: 'list limit=100, owner with 10 tasks', kiln: listSmall, note: 'page of 10 items' });
}
