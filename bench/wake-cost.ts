// `npx tsx bench/wake-cost.ts`: what waking an idle process costs this machine in CPU, the figure
// that explains why a lightly loaded Kiln process spends more CPU per request than a saturated one
// (BENCHMARKS.md). Three measurements, each the process's own CPU (user + system) per event:
// - a timer every 2 ms that does nothing: each tick wakes the process from idle;
// - one Redis GET at a time (each reply wakes it) against eight in flight (replies come in batches);
// - a chain of setImmediate callbacks, for reference: events that never let the process go idle.
import { spawn } from 'node:child_process';
import { Redis } from 'ioredis';
import { binary, freePort } from '../scripts/services.js';
import { sleep } from './lib.js';

const cpuUs = () => {
  const c = process.cpuUsage();
  return c.user + c.system;
};

async function timerTicks(n: number): Promise<number> {
  const before = cpuUs();
  await new Promise<void>((done) => {
    let ticks = 0;
    const t = setInterval(() => {
      if (++ticks === n) {
        clearInterval(t);
        done();
      }
    }, 2);
  });
  return (cpuUs() - before) / n;
}

async function immediates(n: number): Promise<number> {
  const before = cpuUs();
  await new Promise<void>((done) => {
    let left = n;
    const next = () => (--left === 0 ? done() : setImmediate(next));
    setImmediate(next);
  });
  return (cpuUs() - before) / n;
}

async function gets(redis: Redis, n: number, inFlight: number): Promise<number> {
  const before = cpuUs();
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next++ < n) await redis.get('k');
    }),
  );
  return (cpuUs() - before) / n;
}

async function main() {
  const port = await freePort();
  const server = spawn(binary('redis-server', 'REDIS_SERVER_BIN'), ['--port', String(port), '--save', ''], {
    stdio: 'ignore',
  });
  await sleep(500);
  const redis = new Redis({ port, host: '127.0.0.1' });
  await redis.set('k', 'x'.repeat(300));
  await gets(redis, 2000, 8); // warm-up
  const rows: [string, number][] = [];
  for (let round = 0; round < 3; round++) {
    rows.push(['timer tick every 2 ms (wakes from idle)', await timerTicks(500)]);
    rows.push(['setImmediate chain (never idle)', await immediates(100_000)]);
    rows.push(['Redis GET, one at a time', await gets(redis, 5000, 1)]);
    rows.push(['Redis GET, 8 in flight', await gets(redis, 20000, 8)]);
    rows.push(['Redis GET, 64 in flight', await gets(redis, 20000, 64)]);
  }
  console.log('| event | CPU per event (µs, median of 3) |\n|---|---:|');
  for (const what of new Set(rows.map(([w]) => w))) {
    const v = rows
      .filter(([w]) => w === what)
      .map(([, us]) => us)
      .sort((a, b) => a - b);
    console.log(`| ${what} | ${v[1].toFixed(1)} |`);
  }
  redis.disconnect();
  server.kill();
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
