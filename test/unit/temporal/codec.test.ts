// The payload codec: what it writes is AES-256-GCM under the configured key, whichever way the key
// is held in the process (a KeyObject since s24; before, the raw Buffer on every call).
import { createCipheriv, randomBytes } from 'node:crypto';
import { METADATA_ENCODING_KEY, type Payload } from '@temporalio/common';
import proto from '@temporalio/proto';
import { describe, expect, it } from 'vitest';
import { AesGcmCodec, COMPRESS_FROM_BYTES } from '../../../src/temporal/codec.js';

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

  it('deflates a payload from COMPRESS_FROM_BYTES on, sealed all the same, and opens it', async () => {
    const codec = new AesGcmCodec(key);
    const sizeOf = (p: Payload) => proto.temporal.api.common.v1.Payload.encode(p).finish().length;
    // The largest payload left as it is, and the smallest one deflated.
    const frame = sizeOf(json({ t: 'k'.repeat(1000) })) - 1000; // what surrounds the text at this size
    const under = json({ t: 'k'.repeat(COMPRESS_FROM_BYTES - 1 - frame) });
    const at = json({ t: 'k'.repeat(COMPRESS_FROM_BYTES - frame) });
    expect([sizeOf(under), sizeOf(at)]).toEqual([COMPRESS_FROM_BYTES - 1, COMPRESS_FROM_BYTES]);
    const [u, a] = await codec.encode([under, at]);
    expect(u.metadata!['kiln-compression']).toBeUndefined();
    expect(Buffer.from(a.metadata!['kiln-compression']!).toString()).toBe('deflate-raw');
    expect(a.data!.length).toBeLessThan(1000);
    expect(text(a)).not.toContain('kkkk');
    expect(await codec.decode([u, a])).toEqual([under, at].map((p) => expect.objectContaining({ data: p.data })));
    // Incompressible text (random base64, 2 MiB) does not grow past its size plus deflate's framing.
    const noise = json({ t: randomBytes(1536 * 1024).toString('base64') });
    const [n] = await codec.encode([noise]);
    expect(n.data!.length).toBeLessThan(sizeOf(noise));
    expect(JSON.parse(text((await codec.decode([n]))[0]!))).toEqual(JSON.parse(text(noise)));
  });

  it('refuses a payload marked with a compression it does not know', async () => {
    const codec = new AesGcmCodec(key);
    const [sealed] = await codec.encode([json({ t: 'k'.repeat(COMPRESS_FROM_BYTES) })]);
    const marked = { ...sealed, metadata: { ...sealed.metadata, 'kiln-compression': Buffer.from('zstd') } };
    await expect(codec.decode([marked])).rejects.toThrow(/compressed as zstd/);
  });
});
