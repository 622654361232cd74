// Baselines for the read benchmarks. Without BARE_REDIS_URL: a bare Koa handler answering a fixed
// JSON body of the same size as a task poll. With it: the same handler doing what a naive poll does
// at the least, one ioredis HGET of the record plus JSON.parse and JSON.stringify.
import Koa from 'koa';
import { Redis } from 'ioredis';

const body = process.env.BARE_BODY ?? '{}';
const app = new Koa();
if (process.env.BARE_REDIS_URL) {
  const redis = new Redis(process.env.BARE_REDIS_URL);
  const key = process.env.BARE_KEY!;
  app.use(async (ctx) => {
    const j = await redis.hget(key, 'j');
    ctx.body = JSON.parse(j ?? '{}');
  });
} else {
  app.use((ctx) => {
    ctx.type = 'application/json';
    ctx.body = body;
  });
}
app.listen(Number(process.env.PORT), '127.0.0.1');
// A clean exit on SIGTERM, so `node --cpu-prof` writes its profile (bench/profile.ts).
process.once('SIGTERM', () => process.exit(0));
