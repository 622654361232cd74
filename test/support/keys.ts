// Helpers of the managed-keys tests (test/integration/keys/keys-admin.test.ts): the admin API with the
// operator token, the `kiln` CLI, and every key and value a Kiln instance holds in Redis.
import { execFile } from 'node:child_process';
import { FRESH_MS } from '../../src/keys/key-auth.js';
import type { RedisClient } from '../../src/tasks/store/task-store.js';
import { http, type Kiln } from './kiln.js';

export const OPERATOR_TOKEN = 'keys-admin-operator-token-0123456789abcdef';

/** The admin API of `kiln` (or another Kiln's base URL) with the operator token (or another token). */
export const admin = (baseUrl: string, token: string | null = OPERATOR_TOKEN) => http(baseUrl, token);

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  json: any;
}

/** `node bin/kiln.js …args` with the environment given (from source: the built CLI may be stale). */
export function runCli(args: string[], env: Record<string, string>): Promise<CliRun> {
  const all = { ...process.env, KILN_CLI_FROM_SOURCE: '1', ...env };
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/kiln.js', ...args], { env: all, timeout: 45_000 }, (err, stdout, stderr) => {
      let json: any = null;
      try {
        json = JSON.parse(stdout);
      } catch {
        /* text output */
      }
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr, json });
    });
  });
}

/** Every key under the instance's prefix with its whole value, as text (all Redis types). */
export async function redisDump(kiln: Kiln): Promise<string[]> {
  const redis: RedisClient = kiln.api.redis;
  const out: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${kiln.config.redisPrefix}*`, 'COUNT', 500);
    cursor = next;
    for (const k of keys) {
      const type = await redis.type(k);
      const value =
        type === 'hash'
          ? await redis.hgetall(k)
          : type === 'zset'
            ? // Strings: ioredis 6.0.0 types zrange's stop argument as string only.
              await redis.zrange(k, '0', '-1', 'WITHSCORES')
            : type === 'set'
              ? await redis.smembers(k)
              : type === 'list'
                ? await redis.lrange(k, 0, -1)
                : type === 'stream'
                  ? await redis.xrange(k, '-', '+')
                  : await redis.get(k);
      out.push(`${k} ${JSON.stringify(value)}`);
    }
  } while (cursor !== '0');
  return out;
}

/**
 * What `probe` answers once a key's revoke or update, written (its call answered) at `writtenAt`, has
 * reached every API process: each trusts what it read of a key for FRESH_MS from when it asked
 * (src/keys/key-auth.ts), so from `writtenAt + FRESH_MS` on no process answers from an older reading,
 * however slow the machine. Probes meanwhile too, so a key in use (answered from memory, re-read in
 * the background) is what gets checked.
 */
export async function afterAuthCache<R>(probe: () => Promise<R>, writtenAt: number): Promise<R> {
  const due = writtenAt + FRESH_MS;
  while (Date.now() <= due) {
    await probe();
    await new Promise((res) => setTimeout(res, 20));
  }
  return probe();
}
