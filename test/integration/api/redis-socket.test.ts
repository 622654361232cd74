// Kiln over Redis's Unix socket (REDIS_URL=/path/redis.sock), as the stacks Kiln starts on one
// machine run it (npm run dev, the benchmarks): every process's commands take the socket, tasks go
// through to the image, and a Redis restart, which makes the socket file anew, is ridden out.
import { mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startRedis, type RedisService } from '../../../scripts/services.js';
import { eventually, imageSteps, startKiln, type Kiln } from '../../support/kiln.js';

let redis: RedisService;
let kiln: Kiln;
let tcp: Redis;
const steps = imageSteps(() => kiln.baseUrl);

beforeAll(async () => {
  redis = await startRedis({ dir: mkdtempSync(join(inject('tmpRoot'), 'redis-sock-')) });
  if (!redis.socket) throw new Error(`no socket: the test dir's path is too long (${inject('tmpRoot')})`);
  kiln = await startKiln({
    redisUrl: redis.socket,
    models: [{ id: 'sock-image', provider: 'local', latencyMs: 0, idempotent: true }],
  });
  // The test's own look at Redis goes over TCP, so it can tell the socket's clients from its own.
  tcp = new Redis(redis.url);
});
afterAll(async () => {
  tcp?.disconnect();
  await kiln?.stop();
  await redis?.stop();
});

/** Clients connected through the socket: Redis names their address after its path. */
async function socketClients(): Promise<number> {
  const list = (await tcp.client('LIST')) as string;
  return list.split('\n').filter((l) => l.includes(`addr=${redis.socket}:`)).length;
}

describe('Redis over its Unix socket', () => {
  it('runs a task end to end with every Kiln connection on the socket', async () => {
    const id = await steps.submit('sock-image');
    const done = await steps.finish(id);
    expect(done.status).toBe('succeeded');
    const location = await steps.contentLocation(id);
    expect(location).toBeTruthy();
    const png = await fetch(new URL(location!, kiln.baseUrl));
    expect(png.headers.get('content-type')).toBe('image/png');
    // The API and the worker each hold at least one; the only TCP client is this test's.
    expect(await socketClients()).toBeGreaterThanOrEqual(2);
    const tcpClients = ((await tcp.client('LIST')) as string).split('\n').filter((l) => l.includes('addr=127.0.0.1:'));
    expect(tcpClients).toHaveLength(1);
    const ready = await fetch(`${kiln.baseUrl}/readyz`);
    expect(ready.status).toBe(200);
  });

  it('rides out a Redis restart: the socket comes back and the next task succeeds', async () => {
    tcp.disconnect();
    await redis.stop();
    await redis.start();
    tcp = new Redis(redis.url);
    // The API fails fast while it reconnects (a submit answers 503 service_unavailable, as over
    // TCP): the next task goes in once /readyz sees Redis again.
    const ready = await eventually(
      () => fetch(`${kiln.baseUrl}/readyz`).then((r) => r.status),
      (s) => s === 200,
      15_000,
    );
    expect(ready).toBe(200);
    const id = await steps.submit('sock-image');
    expect((await steps.finish(id)).status).toBe('succeeded');
    expect(await socketClients()).toBeGreaterThanOrEqual(2);
  });
});
