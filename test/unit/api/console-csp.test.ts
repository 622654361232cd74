// The console's Content-Security-Policy lets result images and videos load from the S3 store's origin,
// and only from it: the origin Kiln computes must be the one the AWS SDK presigns for, whatever the
// endpoint and addressing style. And GET /v1/models says what each model accepts.
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/env.js';
import { DEFAULT_MODELS } from '../../../src/config/default-models.js';
import { blobOrigin, consoleCsp, consoleOptions } from '../../../src/api/console.js';
import { modelList } from '../../../src/infra/models.js';

const s3 = (env: Record<string, string | undefined>) =>
  loadConfig({
    KILN_SECRET: 'x'.repeat(32),
    BLOB_STORE: 's3',
    S3_ACCESS_KEY_ID: 'a',
    S3_SECRET_ACCESS_KEY: 'b',
    ...env,
  });

describe('blobOrigin', () => {
  it.each([
    { S3_BUCKET: 'kiln', S3_REGION: 'eu-west-1', S3_FORCE_PATH_STYLE: 'false' },
    { S3_BUCKET: 'kiln', S3_REGION: 'eu-west-1', S3_FORCE_PATH_STYLE: 'true' },
    { S3_BUCKET: 'my.bucket', S3_REGION: 'eu-west-1', S3_FORCE_PATH_STYLE: 'false' },
    { S3_BUCKET: 'kiln', S3_ENDPOINT: 'http://127.0.0.1:9000', S3_FORCE_PATH_STYLE: 'false' },
    { S3_BUCKET: 'kiln', S3_ENDPOINT: 'http://minio:9000', S3_FORCE_PATH_STYLE: 'false' },
    { S3_BUCKET: 'kiln', S3_ENDPOINT: 'http://minio:9000', S3_FORCE_PATH_STYLE: 'true' },
    { S3_BUCKET: 'my.bucket', S3_ENDPOINT: 'https://minio.example:9443/', S3_FORCE_PATH_STYLE: 'false' },
  ])('is the origin the SDK presigns for: %o', async (env) => {
    const cfg = s3(env).blobStore;
    if (cfg.kind !== 's3') throw new Error('not s3');
    const client = new S3Client({
      region: cfg.region,
      credentials: cfg.credentials,
      forcePathStyle: cfg.forcePathStyle,
      ...(cfg.endpoint ? { endpoint: cfg.endpoint } : {}),
    });
    const url = await getSignedUrl(client, new GetObjectCommand({ Bucket: cfg.bucket, Key: 'k/x.png' }), {
      expiresIn: 60,
    });
    expect(blobOrigin(cfg)).toBe(new URL(url).origin);
  });

  it('is the public base URL origin when one is set, and none for the filesystem store', () => {
    const cfg = s3({ S3_BUCKET: 'kiln', S3_PUBLIC_BASE_URL: 'https://cdn.example.com/kiln/' }).blobStore;
    expect(blobOrigin(cfg)).toBe('https://cdn.example.com');
    expect(blobOrigin(loadConfig({ KILN_SECRET: 'x'.repeat(32) }).blobStore)).toBeNull();
  });
});

describe('consoleCsp', () => {
  it('adds the S3 origin to img-src and media-src only, and nothing loose', () => {
    const csp = consoleCsp(
      consoleOptions(s3({ S3_BUCKET: 'kiln', S3_ENDPOINT: 'http://127.0.0.1:9000' })).mediaOrigins,
    );
    const dirs = Object.fromEntries(csp.split('; ').map((d) => [d.split(' ')[0], d.split(' ').slice(1)]));
    expect(dirs['img-src']).toEqual(["'self'", 'http://127.0.0.1:9000', 'data:', 'blob:']);
    expect(dirs['media-src']).toEqual(["'self'", 'http://127.0.0.1:9000', 'blob:']);
    expect(dirs['connect-src']).toEqual(["'self'"]);
    expect(dirs['script-src']).toEqual(["'self'"]);
    expect(csp).not.toMatch(/unsafe-|\*/);
    const fs = consoleCsp(consoleOptions(loadConfig({ KILN_SECRET: 'x'.repeat(32) })).mediaOrigins);
    expect(fs).toContain("img-src 'self' data: blob:; media-src 'self' blob:;");
  });

  it('links the Temporal Web UI only when TEMPORAL_UI_URL is set', () => {
    const base = { KILN_SECRET: 'x'.repeat(32), TEMPORAL_NAMESPACE: 'prod ns' };
    expect(consoleOptions(loadConfig(base)).settings?.temporal_workflow_url).toBeNull();
    expect(
      consoleOptions(loadConfig({ ...base, TEMPORAL_UI_URL: 'http://ui.example:8080/' })).settings
        ?.temporal_workflow_url,
    ).toBe('http://ui.example:8080/namespaces/prod%20ns/workflows/');
  });

  it("tells the page PUBLIC_BASE_URL (its file URLs load through the page's own origin), not the CSP", () => {
    const cfg = loadConfig({ KILN_SECRET: 'x'.repeat(32), PUBLIC_BASE_URL: 'https://kiln.example.com:8443/' });
    const opts = consoleOptions(cfg);
    // As the file URLs are built: `${PUBLIC_BASE_URL}/v1/files/<name>`, no trailing slash.
    expect(opts.settings).toEqual({ temporal_workflow_url: null, public_base_url: 'https://kiln.example.com:8443' });
    expect(opts.mediaOrigins).toEqual([]);
    expect(consoleCsp(opts.mediaOrigins)).not.toContain('kiln.example.com');
  });
});

describe('GET /v1/models catalogue', () => {
  it("says each model's kind, form and the values it accepts", () => {
    const byId = Object.fromEntries(modelList(DEFAULT_MODELS).data.map((m) => [m.id, m]));
    expect(byId['kiln-image-1']).toMatchObject({ kind: 'image', form: 'task', image_sizes: ['1K', '2K', '4K'] });
    expect(byId['kiln-video-pro']).toMatchObject({
      kind: 'video',
      form: 'video',
      seconds: ['10', '15', '25'],
      sizes: ['1792x1024', '1024x1792'],
    });
    expect(byId['kiln-video-1']).toMatchObject({ seconds: ['4', '8', '10', '12'], sizes: ['720x1280', '1280x720'] });
    expect(byId['kiln-video-node']).toMatchObject({ kind: 'video', form: 'workflow-node' });
    expect(Object.keys(byId['kiln-chat-1']!).sort()).toEqual(
      ['created', 'description', 'id', 'kind', 'object', 'owned_by'].sort(),
    );
  });
});
