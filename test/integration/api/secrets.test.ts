// The caller's key never reaches logs, Redis or Temporal history in plain text.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { startKiln, http, submitBody, waitForStatus, type Kiln } from '../../support/kiln.js';
import { AesGcmCodec } from '../../../src/temporal/codec.js';

const KEY = 'sk-live-SECRET-passthrough-key-4242424242';
const logLines: string[] = [];
const sink = new Writable({
  write(chunk, _enc, cb) {
    logLines.push(chunk.toString());
    cb();
  },
});
let kiln: Kiln;
beforeAll(async () => {
  kiln = await startKiln({
    log: pino({ level: 'trace' }, sink),
    models: [{ id: 'kiln-image-1', provider: 'local', latencyMs: 50 }],
  });
});
afterAll(async () => {
  await kiln?.stop();
});

describe('secrets', () => {
  it('keeps the passthrough key out of history, Redis and logs', async () => {
    const api = http(kiln.baseUrl, KEY);
    const sub = await api('/v1beta/models/kiln-image-1:generateContent', {
      method: 'POST',
      json: submitBody('secret test'),
    });
    expect(sub.status).toBe(202);
    await waitForStatus(() => api(`/v1/tasks/${sub.json.id}`), 'succeeded');
    // Some failing requests too, so error paths log.
    await api('/v1/tasks/task_nope');
    await http(kiln.baseUrl, `${KEY} extra`)('/v1/tasks');

    // Temporal history, read without the codec: every payload is encrypted, the key is nowhere.
    const raw = await kiln.api.client.workflowService.getWorkflowExecutionHistory({
      namespace: 'default',
      execution: { workflowId: sub.json.id },
    });
    const events = raw.history?.events ?? [];
    expect(events.length).toBeGreaterThan(0);
    const bytes = Buffer.from(JSON.stringify(events));
    expect(bytes.includes(KEY)).toBe(false);
    const started = events[0].workflowExecutionStartedEventAttributes!;
    const payload = started.input!.payloads![0];
    expect(Buffer.from(payload.metadata!.encoding!).toString()).toBe('binary/encrypted');
    expect(Buffer.from(payload.data!).includes(KEY)).toBe(false);
    // ...and the codec with the right key does get the key back: it is there, encrypted.
    const [decoded] = await new AesGcmCodec(kiln.config.payloadKey).decode([payload]);
    expect(Buffer.from(decoded.data!).toString()).toContain(KEY);
    await expect(new AesGcmCodec(Buffer.alloc(32, 7)).decode([payload])).rejects.toThrow(/another key/);

    // Redis: no key or value of this instance contains it.
    const keys = await kiln.api.redis.keys(`${kiln.config.redisPrefix}*`);
    expect(keys.length).toBeGreaterThan(0);
    for (const k of keys) {
      const type = await kiln.api.redis.type(k);
      const dump =
        type === 'hash'
          ? JSON.stringify(await kiln.api.redis.hgetall(k))
          : type === 'zset'
            ? JSON.stringify(await kiln.api.redis.zrange(k, '0', '-1'))
            : type === 'string'
              ? String(await kiln.api.redis.get(k))
              : '';
      expect(k.includes(KEY) || dump.includes(KEY)).toBe(false);
    }
    // Logs at trace level: requests were logged, the key never.
    expect(logLines.length).toBeGreaterThan(0);
    expect(logLines.join('').includes(KEY)).toBe(false);
  });
});
