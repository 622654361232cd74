// The S3 blob store against a real S3-compatible server (moto in server mode, installed by
// scripts/bootstrap.sh): direct round trips, presigned and public URLs, and a whole task whose
// image lands in the bucket.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreateBucketCommand, GetObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { loadConfig } from '../../../src/config/env.js';
import { S3BlobStore, createBlobs } from '../../../src/blobs/stores.js';
import { ok, startFakeGemini, TINY_PNG, type FakeGemini } from '../providers/gemini/fake-gemini.js';
import { startMoto } from '../../support/moto.js';
import { startKiln, http, submitBody, waitForStatus, KEY_A, type Kiln } from '../../support/kiln.js';

const S3_ENV = {
  S3_REGION: 'us-east-1',
  S3_ACCESS_KEY_ID: 'test-access-key',
  S3_SECRET_ACCESS_KEY: 'test-secret-key-3f9a',
  S3_PREFIX: 'kiln/',
};

let moto: Awaited<ReturnType<typeof startMoto>>;
let endpoint: string;

beforeAll(async () => {
  moto = await startMoto();
  endpoint = moto.endpoint;
});
afterAll(() => {
  moto?.stop();
});

function store(bucket: string, extra: Record<string, string> = {}): S3BlobStore {
  const config = loadConfig({
    KILN_SECRET: 'x'.repeat(32),
    BLOB_STORE: 's3',
    S3_BUCKET: bucket,
    S3_ENDPOINT: endpoint,
    ...S3_ENV,
    ...extra,
  });
  const { blobs } = createBlobs(config);
  expect(blobs).toBeInstanceOf(S3BlobStore);
  return blobs as S3BlobStore;
}

async function bucket(name: string): Promise<string> {
  await store(name).client.send(new CreateBucketCommand({ Bucket: name }));
  return name;
}

describe('S3 blob store', () => {
  it('puts an object with its content type and returns a presigned URL that serves it', async () => {
    const s = store(await bucket('kiln-presigned'));
    const url = await s.put(TINY_PNG, 'image/png');
    const u = new URL(url);
    expect(`${u.protocol}//${u.host}`).toBe(endpoint);
    expect(u.pathname).toMatch(/^\/kiln-presigned\/kiln\/[a-f0-9]{32}\.png$/); // path-style, with the key prefix
    expect(u.searchParams.get('X-Amz-Expires')).toBe('604800');
    expect(u.searchParams.get('X-Amz-Signature')).toMatch(/^[a-f0-9]{64}$/);
    expect(url).not.toContain(S3_ENV.S3_SECRET_ACCESS_KEY);
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await res.arrayBuffer()).equals(TINY_PNG)).toBe(true);
    // Read back through the SDK as well, and through read(url) (the direct form's base64 path).
    const key = u.pathname.slice('/kiln-presigned/'.length);
    const obj = await s.client.send(new GetObjectCommand({ Bucket: 'kiln-presigned', Key: key }));
    expect(obj.CacheControl).toContain('immutable');
    expect(Buffer.from(await obj.Body!.transformToByteArray()).equals(TINY_PNG)).toBe(true);
    expect(await s.read(url)).toEqual({ data: TINY_PNG, mimeType: 'image/png' });
    expect(await s.read('https://elsewhere.example.test/kiln/0123456789abcdef0123456789abcdef.png')).toBeNull();
  });

  it('returns public-base URLs when S3_PUBLIC_BASE_URL is set, and honours S3_PRESIGN_SECONDS otherwise', async () => {
    const name = await bucket('kiln-public');
    const pub = store(name, { S3_PUBLIC_BASE_URL: `${endpoint}/${name}/` });
    const url = await pub.put(Buffer.from([0xff, 0xd8, 0xff, 0xd9]), 'image/jpeg');
    expect(url).toMatch(new RegExp(`^${endpoint}/${name}/kiln/[a-f0-9]{32}\\.jpg$`));
    expect((await pub.read(url))?.mimeType).toBe('image/jpeg');
    const short = store(name, { S3_PRESIGN_SECONDS: '60' });
    expect(new URL(await short.put(TINY_PNG, 'image/png')).searchParams.get('X-Amz-Expires')).toBe('60');
  });

  it('refuses an incomplete configuration with a message that names what to set', () => {
    expect(() => loadConfig({ KILN_SECRET: 'x'.repeat(32), BLOB_STORE: 's3' })).toThrow(/S3_BUCKET/);
    expect(() =>
      loadConfig({ KILN_SECRET: 'x'.repeat(32), BLOB_STORE: 's3', S3_BUCKET: 'b', S3_ACCESS_KEY_ID: 'a' }),
    ).toThrow(/S3_SECRET_ACCESS_KEY/);
    expect(() =>
      loadConfig({ KILN_SECRET: 'x'.repeat(32), BLOB_STORE: 's3', S3_BUCKET: 'b', S3_PRESIGN_SECONDS: '604801' }),
    ).toThrow(/604800/);
    expect(loadConfig({ KILN_SECRET: 'x'.repeat(32) }).blobStore).toEqual({ kind: 'fs' });
  });
});

describe('a task with BLOB_STORE=s3', () => {
  let fake: FakeGemini;
  let kiln: Kiln;
  beforeAll(async () => {
    fake = await startFakeGemini();
    const name = await bucket('kiln-tasks');
    kiln = await startKiln({
      env: { BLOB_STORE: 's3', S3_BUCKET: name, S3_ENDPOINT: endpoint, ...S3_ENV },
      models: [
        { id: 'g', provider: 'gemini', baseUrl: fake.baseUrl, timeoutMs: 5000 },
        { id: 'g-direct', provider: 'gemini', form: 'direct', baseUrl: fake.baseUrl, timeoutMs: 5000 },
      ],
    });
  });
  afterAll(async () => {
    await kiln?.stop();
    await fake?.close();
  });

  it('stores the generated image in the bucket; the task and the content redirect point at it', async () => {
    const api = http(kiln.baseUrl, KEY_A);
    const res = await api('/v1beta/models/g:generateContent', { method: 'POST', json: submitBody() });
    const task = await waitForStatus(
      () => api(`/v1/tasks/${res.json.id}`),
      (s) => s === 'succeeded' || s === 'failed',
    );
    expect(task.status).toBe('succeeded');
    const url: string = task.candidates[0].content.parts[0].inlineData.data;
    expect(url.startsWith(`${endpoint}/kiln-tasks/kiln/`)).toBe(true);
    expect((await api(`/v1/tasks/${res.json.id}/content`)).headers.get('location')).toBe(url);
    expect(Buffer.from(await (await fetch(url)).arrayBuffer()).equals(TINY_PNG)).toBe(true);
    const listed = await store('kiln-tasks').client.send(new ListObjectsV2Command({ Bucket: 'kiln-tasks' }));
    expect(listed.Contents?.map((o) => o.Key)).toContain(new URL(url).pathname.slice('/kiln-tasks/'.length));
  });

  it('direct form asking for base64 reads the image back from the bucket', async () => {
    fake.enqueue(ok([{ inlineData: { mimeType: 'image/png', data: TINY_PNG.toString('base64') } }]));
    const res = await http(kiln.baseUrl, KEY_A)('/v1beta/models/g-direct:generateContent', {
      method: 'POST',
      json: { contents: [{ parts: [{ text: 'a fox' }] }] },
    });
    expect(res.status, res.text).toBe(200);
    expect(Buffer.from(res.json.candidates[0].content.parts[0].inlineData.data, 'base64').equals(TINY_PNG)).toBe(true);
  });
});
