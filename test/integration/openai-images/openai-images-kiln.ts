// Shared setup of the OpenAI Images test files: a real Kiln with local image models, an image model
// on a fake Gemini upstream, a chat and a video model, and helpers for the official openai SDK and
// for multipart bodies written by hand (exact to the byte).
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { ownerOfKey } from '../../../src/infra/callers.js';
import { createQuota } from '../../../src/usage/settlement.js';
import { fakeGeminiModel, startFakeGemini, TINY_PNG, type FakeGemini } from '../providers/gemini/fake-gemini.js';
import { http, KEY_A, startKiln, type Kiln } from '../../support/kiln.js';

export interface ImagesEnv {
  kiln: Kiln;
  fake: FakeGemini;
  quota: ReturnType<typeof createQuota>;
}

/** Starts the Kiln of one test file; `set` receives it once it runs. The fake forgets between tests. */
export function useImagesKiln(set: (env: ImagesEnv) => void): void {
  let env: ImagesEnv | undefined;
  beforeAll(async () => {
    const fake = await startFakeGemini();
    const kiln = await startKiln({
      models: [
        { id: 'img', provider: 'local', latencyMs: 20 },
        { id: 'slow', provider: 'local', latencyMs: 3000 },
        { id: 'gem', kind: 'image', ...fakeGeminiModel(fake, { credential: 'none', maxAttempts: 1 }) },
        {
          id: 'gem-inline',
          kind: 'image',
          ...fakeGeminiModel(fake, { credential: 'none', maxAttempts: 1, inlineReferences: true }),
        },
        { id: 'talk', kind: 'chat', provider: 'local' },
        { id: 'vid', kind: 'video', provider: 'local' },
      ],
    });
    env = { kiln, fake, quota: createQuota(kiln.config, kiln.api.redis) };
    set(env);
  }, 120_000);
  afterAll(async () => {
    await env?.kiln.stop();
    await env?.fake.close();
  });
  beforeEach(() => env?.fake.reset());
}

/** The official SDK, unmodified: only its base URL and key are set. */
export const sdkOf = (kiln: Kiln, key = KEY_A) => new OpenAI({ apiKey: key, baseURL: `${kiln.baseUrl}/v1` });
export const apiOf = (kiln: Kiln, key = KEY_A) => http(kiln.baseUrl, key);
export const ownerOf = (kiln: Kiln, key: string) => ownerOfKey(kiln.config.ownerKey, key);
/** The tasks behind an answer, in the order of its `data`. */
export const taskIds = (res: Response) => res.headers.get('x-kiln-task-id')!.split(',');

/** A PNG file of exactly `bytes` bytes (a real PNG's start, then zeros). */
export const pngOf = (bytes: number) =>
  Buffer.concat([TINY_PNG, Buffer.alloc(Math.max(0, bytes - TINY_PNG.length))]).subarray(0, bytes);
export const png = (bytes: number, name = 'ref.png') => toFile(pngOf(bytes), name, { type: 'image/png' });
export const JPEG = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 16, 0x4a, 0x46, 0x49, 0x46]);

/** The SDK's error for a call that must fail. */
export async function sdkError(p: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  try {
    await p;
  } catch (err) {
    if (err instanceof OpenAI.APIError) return err;
    throw err;
  }
  throw new Error('the call succeeded');
}

export interface FormPart {
  name: string;
  value: string | Buffer;
  file?: string;
  type?: string;
}

/** A multipart body written by hand. */
export function form(parts: FormPart[], boundary = 'kb0'): Buffer {
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const disposition = `form-data; name="${p.name}"${p.file ? `; filename="${p.file}"` : ''}`;
    const type = p.file ? `\r\nContent-Type: ${p.type ?? 'image/png'}` : '';
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}${type}\r\n\r\n`));
    chunks.push(Buffer.isBuffer(p.value) ? p.value : Buffer.from(p.value));
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(chunks);
}
