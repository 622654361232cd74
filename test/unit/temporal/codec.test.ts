// The payload codec: what it writes is AES-256-GCM under the configured key, whichever way the key
// is held in the process (a KeyObject since s24; before, the raw Buffer on every call).
import { createCipheriv, randomBytes } from 'node:crypto';
import { METADATA_ENCODING_KEY, type Payload } from '@temporalio/common';
import proto from '@temporalio/proto';
import { describe, expect, it } from 'vitest';
import { AesGcmCodec } from '../../../src/temporal/codec.js';

const key = Buffer.alloc(32, 3);
const json = (v: unknown): Payload => ({
  metadata: { [METADATA_ENCODING_KEY]: Buffer.from('json/plain') },
  data: Buffer.from(JSON.stringify(v)),
});
const text = (p: Payload) => Buffer.from(p.data ?? []).toString();

describe('AesGcmCodec', () => {
  it('round-trips a payload and leaves nothing of it readable', async () => {
    const codec = new AesGcmCodec(key);
    const secret = { apiKey: 'sk-live-do-not-log', prompt: 'a kiln' };
    const [sealed] = await codec.encode([json(secret)]);
    expect(text(sealed)).not.toContain('sk-live');
    expect(Buffer.from(sealed.metadata![METADATA_ENCODING_KEY]).toString()).toBe('binary/encrypted');
    const [opened] = await codec.decode([sealed]);
    expect(JSON.parse(text(opened))).toEqual(secret);
  });

  it('opens a payload sealed the way earlier releases did (the raw key per call)', async () => {
    const codec = new AesGcmCodec(key);
    const [reference] = await codec.encode([json('x'.repeat(300))]); // for its key id
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    const plain = proto.temporal.api.common.v1.Payload.encode(json({ n: 42 })).finish();
    const body = Buffer.concat([cipher.update(plain), cipher.final()]);
    const old: Payload = { metadata: reference.metadata, data: Buffer.concat([iv, cipher.getAuthTag(), body]) };
    const [opened] = await codec.decode([old]);
    expect(JSON.parse(text(opened))).toEqual({ n: 42 });
  });

  it('refuses a payload altered in transit and one sealed under another key', async () => {
    const [sealed] = await new AesGcmCodec(key).encode([json({ a: 1 })]);
    const altered = Buffer.from(sealed.data!);
    altered[altered.length - 1] ^= 1;
    await expect(new AesGcmCodec(key).decode([{ ...sealed, data: altered }])).rejects.toThrow();
    await expect(new AesGcmCodec(Buffer.alloc(32, 4)).decode([sealed])).rejects.toThrow(/another key/);
  });

  it('leaves a short bare string readable (a Web UI summary) and refuses a key of the wrong size', async () => {
    const summary = json('bench-image: a kiln');
    expect(await new AesGcmCodec(key).encode([summary])).toEqual([summary]);
    expect(() => new AesGcmCodec(Buffer.alloc(31))).toThrow(/32 bytes/);
    expect(() => new AesGcmCodec(Buffer.alloc(33))).toThrow(/32 bytes/);
    expect(() => new AesGcmCodec(Buffer.alloc(32))).not.toThrow();
  });
});
