// The read-model rebuild (docs/operating.md, "Rebuilding the read model") on a single Redis of its
// own (the test flushes it): real Temporal, real workers, the HTTP calls and the CLI. Also the
// operator token's answers.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startRedis } from '../../../scripts/services.js';
import { http, KEY_A, startKiln, type Kiln } from '../../support/kiln.js';
import { describeRebuild, OPERATOR_TOKEN } from '../../support/rebuild.js';

describeRebuild('on a single Redis', async () => {
  const redis = await startRedis({ dir: join(inject('tmpRoot'), `redis-rebuild-${randomBytes(3).toString('hex')}`) });
  const client = new Redis(redis.url);
  return {
    env: { REDIS_URL: redis.url },
    flush: async () => void (await client.flushall()),
    stop: async () => {
      client.disconnect();
      await redis.stop();
    },
  };
});

describe('the admin calls', () => {
  let on: Kiln;
  let off: Kiln;
  beforeAll(async () => {
    [on, off] = await Promise.all([
      startKiln({ workers: false, env: { KILN_OPERATOR_TOKEN: OPERATOR_TOKEN } }),
      startKiln({ workers: false }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([on?.stop(), off?.stop()]);
  });
  const PATH = '/admin/v1/read-model/rebuild';

  it('need the operator token, and are off without one', async () => {
    for (const method of ['GET', 'POST']) {
      for (const key of [null, KEY_A, `${OPERATOR_TOKEN}x`]) {
        const r = await http(on.baseUrl, key)(PATH, { method });
        expect(r.status, `${method} ${key}`).toBe(401);
        expect(r.json.error.code).toBe('missing_api_key');
      }
      const r = await http(off.baseUrl, OPERATOR_TOKEN)(PATH, { method });
      expect(r.status).toBe(404);
      expect(r.json.error.code).toBe('not_found');
    }
    const none = await http(on.baseUrl, OPERATOR_TOKEN)(PATH);
    expect(none).toMatchObject({ status: 200, json: { state: 'none', active: false } });
  });

  it('refuse a bad body before starting anything', async () => {
    const api = http(on.baseUrl, OPERATOR_TOKEN);
    for (const json of [{ page_size: 0 }, { page_size: 5000 }, { restart: 'yes' }, { other: 1 }]) {
      const r = await api(PATH, { method: 'POST', json });
      expect(r.status, JSON.stringify(json)).toBe(400);
      expect(r.json.error.code).toBe('invalid_request');
    }
    const text = await api(PATH, { method: 'POST', body: 'x', headers: { 'content-type': 'text/plain' } });
    expect(text.status).toBe(415);
    expect((await api(PATH)).json.state).toBe('none');
  });

  it('are documented under their own tag', async () => {
    const doc = (await http(on.baseUrl, null)('/openapi.json')).json;
    const ops = doc.paths[PATH];
    expect(ops.post.tags).toEqual(['admin']);
    expect(ops.get.tags).toEqual(['admin']);
    expect(ops.post.security).toEqual([{ operatorToken: [] }]);
    const adminOps = Object.values(doc.paths).flatMap((p: any) =>
      Object.values(p).filter((o: any) => o.tags.includes('admin')),
    );
    // The rebuild's two, the channels' health (test/integration/channels/channels-admin.test.ts), the API
    // keys (test/integration/keys/keys-admin.test.ts) and usage and limits (usage-api.test.ts).
    expect(adminOps.map((o: any) => o.operationId).sort()).toEqual([
      'createApiKey',
      'getApiKey',
      'getOwnerLimits',
      'getOwnersUsage',
      'listApiKeys',
      'listChannelHealth',
      'readModelRebuildProgress',
      'rebuildReadModel',
      'releaseTaskUnits',
      'revokeApiKey',
      'updateApiKey',
      'updateOwnerLimits',
    ]);
  });
});
