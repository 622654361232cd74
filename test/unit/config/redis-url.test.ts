// REDIS_URL at start: a redis:// or rediss:// URL, or the absolute path of Redis's Unix socket (a
// Redis on the same host); anything else stops the process with a message that says what to set,
// and never repeats the value (it may hold Redis's password).
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/env.js';
import { connectRedis, ready } from '../../../src/infra/redis.js';
import { MAX_SOCKET_PATH, redisSocketIn } from '../../../scripts/services.js';

const base = { KILN_SECRET: 'x'.repeat(32) };
const redisUrl = (REDIS_URL?: string) =>
  loadConfig({ ...base, ...(REDIS_URL === undefined ? {} : { REDIS_URL }) }).redisUrl;
const refusal = (REDIS_URL: string) => {
  try {
    loadConfig({ ...base, REDIS_URL });
  } catch (err) {
    return (err as Error).message;
  }
  return expect.unreachable(`REDIS_URL=${REDIS_URL} was accepted`);
};

describe('REDIS_URL', () => {
  it('defaults to loopback TCP, also when set empty', () => {
    expect(redisUrl()).toBe('redis://127.0.0.1:6379');
    expect(redisUrl('')).toBe('redis://127.0.0.1:6379');
  });

  it('takes redis:// and rediss:// URLs, with a password and a database', () => {
    for (const u of ['redis://redis:6379', 'rediss://:pw@cache.example:6380/2', 'REDIS://10.0.0.1:6379'])
      expect(redisUrl(u)).toBe(u);
  });

  it("takes the absolute path of Redis's Unix socket, with ioredis's query options", () => {
    for (const u of ['/run/redis/redis.sock', '/tmp/r.sock?db=2']) expect(redisUrl(u)).toBe(u);
  });

  it('refuses what ioredis would read as something else, naming the forms it takes', () => {
    // A relative path or a bare host:port would become a host name; a directory is no socket.
    for (const u of ['redis.sock', 'localhost:6379', 'unix:///run/redis.sock', 'redis://', '/run/redis/', '/']) {
      const message = refusal(u);
      expect(message).toMatch(/REDIS_URL is redis:\/\/host:port, rediss:\/\/host:port or the absolute path/);
    }
  });

  it('does not repeat a refused value, which may hold a password', () => {
    expect(refusal('redis:/:s3cret-pass@host:6379')).not.toContain('s3cret-pass');
  });

  it('names where Redis was sought when it cannot be reached at start, without the password', async () => {
    // Port 1 on loopback: nothing listens, the connection is refused at once.
    const config = loadConfig({ ...base, REDIS_URL: 'redis://kiln:s3cret-pass@127.0.0.1:1' });
    const redis = connectRedis(config, true);
    redis.on('error', () => undefined); // the refusal is read from ready()'s error
    const err = await ready(redis, config).then(
      () => expect.unreachable('connected to port 1'),
      (e: Error) => e,
    );
    expect(err.message).toMatch(/^cannot reach Redis at redis:\/\/127\.0\.0\.1:1 \(.*\); set REDIS_URL$/);
    expect(err.message).not.toContain('s3cret-pass');
  });

  it("the stacks' Redis socket exists only where its path fits a socket address (107 bytes)", () => {
    const dirOf = (total: number) => '/' + 'd'.repeat(total - '/'.length - '/redis.sock'.length);
    expect(redisSocketIn(dirOf(MAX_SOCKET_PATH))).toHaveLength(MAX_SOCKET_PATH);
    expect(redisSocketIn(dirOf(MAX_SOCKET_PATH + 1))).toBeUndefined();
  });
});
