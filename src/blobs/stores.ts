// The blob store chosen by configuration (BLOB_STORE=fs|s3), plus reading a stored image back by its
// URL (the direct form answers with base64 when asked). The filesystem store is the default; the
// S3 store speaks to AWS S3 or any S3-compatible server (MinIO, Ceph, R2, moto).
import { createRequire } from 'node:module';
import type { S3Client } from '@aws-sdk/client-s3';
import type { BlobStoreConfig, Config } from '../config/env.js';
import { BLOB_NAME, blobName, FsBlobStore, type BlobStore } from './local.js';

export interface StoredBlob {
  data: Buffer;
  mimeType: string;
}

/** A blob store that can also read back what it stored, given the URL it returned. */
export interface Blobs extends BlobStore {
  /** The bytes behind a URL this store returned; null for any other URL. */
  read(url: string): Promise<StoredBlob | null>;
  /** The name (a BLOB_NAME) of what a URL this store returned points at; null for any other URL. */
  nameOf(url: string): string | null;
  /** A URL of the blob stored under `name`, or null when there is none. */
  urlOf(name: string): Promise<string | null>;
  /** Stores bytes under `name` (a file derived from another, found again by its name). */
  putAs(name: string, data: Buffer, mimeType: string): Promise<string>;
  /** Deletes the blob of that name; an absent one is no error. */
  remove(name: string): Promise<void>;
}

// Loaded only by the S3 store: the AWS SDK weighs megabytes per process, which the filesystem store
// (the default) does not need.
const require = createRequire(import.meta.url);
const sdk = () => require('@aws-sdk/client-s3') as typeof import('@aws-sdk/client-s3');
const presigner = () => require('@aws-sdk/s3-request-presigner') as typeof import('@aws-sdk/s3-request-presigner');

/** The HTTP status of an S3 error reply (undefined when no reply came: S3 unreachable). */
const statusOf = (err: unknown) => (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;

export class S3BlobStore implements Blobs {
  readonly client: S3Client;

  constructor(private readonly cfg: Extract<BlobStoreConfig, { kind: 's3' }>) {
    this.client = new (sdk().S3Client)({
      region: cfg.region,
      ...(cfg.endpoint ? { endpoint: cfg.endpoint } : {}),
      ...(cfg.credentials ? { credentials: cfg.credentials } : {}),
      forcePathStyle: cfg.forcePathStyle,
      // The SDK's default CRC checksums (since 3.729) are refused by many S3-compatible servers.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  put(data: Buffer, mimeType: string): Promise<string> {
    return this.putAs(blobName(mimeType), data, mimeType);
  }

  async putAs(name: string, data: Buffer, mimeType: string): Promise<string> {
    const key = `${this.cfg.prefix}${name}`;
    await this.client.send(
      new (sdk().PutObjectCommand)({
        Bucket: this.cfg.bucket,
        Key: key,
        Body: data,
        ContentType: mimeType,
        // Names are random and content never changes under a name.
        CacheControl: 'public, max-age=31536000, immutable',
      }),
    );
    return this.urlOfKey(key);
  }

  private urlOfKey(key: string): Promise<string> {
    if (this.cfg.publicBaseUrl) return Promise.resolve(`${this.cfg.publicBaseUrl}/${key}`);
    return presigner().getSignedUrl(this.client, new (sdk().GetObjectCommand)({ Bucket: this.cfg.bucket, Key: key }), {
      expiresIn: this.cfg.presignSeconds,
    });
  }

  nameOf(url: string): string | null {
    const key = this.keyOf(url);
    return key && key.slice(this.cfg.prefix.length);
  }

  async urlOf(name: string): Promise<string | null> {
    if (!BLOB_NAME.test(name)) return null;
    const key = `${this.cfg.prefix}${name}`;
    try {
      await this.client.send(new (sdk().HeadObjectCommand)({ Bucket: this.cfg.bucket, Key: key }));
    } catch (err) {
      if (statusOf(err) === 404) return null;
      throw err;
    }
    return this.urlOfKey(key);
  }

  async remove(name: string): Promise<void> {
    if (!BLOB_NAME.test(name)) return;
    // S3 answers a delete of an absent key with success: a repeated delete is no error. Some
    // S3-compatible servers (Google Cloud Storage's XML API) answer 404 NoSuchKey instead: the same
    // outcome, and a video's delete asks for stills that were never made. A missing bucket is not.
    try {
      await this.client.send(
        new (sdk().DeleteObjectCommand)({ Bucket: this.cfg.bucket, Key: `${this.cfg.prefix}${name}` }),
      );
    } catch (err) {
      if (statusOf(err) !== 404 || (err as { name?: string }).name === 'NoSuchBucket') throw err;
    }
  }

  async read(url: string): Promise<StoredBlob | null> {
    const key = this.keyOf(url);
    if (!key) return null;
    const out = await this.client.send(new (sdk().GetObjectCommand)({ Bucket: this.cfg.bucket, Key: key }));
    if (!out.Body) return null;
    return {
      data: Buffer.from(await out.Body.transformToByteArray()),
      mimeType: out.ContentType ?? 'application/octet-stream',
    };
  }

  /** The object key of a URL this store returned (public or presigned), else null. */
  private keyOf(url: string): string | null {
    let path: string;
    if (this.cfg.publicBaseUrl) {
      if (!url.startsWith(`${this.cfg.publicBaseUrl}/`)) return null;
      path = url.slice(this.cfg.publicBaseUrl.length + 1).split('?')[0]!;
    } else {
      let u: URL;
      try {
        u = new URL(url);
      } catch {
        return null;
      }
      if (!u.searchParams.has('X-Amz-Signature')) return null;
      path = decodeURIComponent(u.pathname);
    }
    const key = `${this.cfg.prefix}${path.slice(path.lastIndexOf('/') + 1)}`;
    return BLOB_NAME.test(key.slice(this.cfg.prefix.length)) && path.endsWith(key) ? key : null;
  }
}

/** The filesystem store, readable by URL (the files it serves under /v1/files). */
export class FsBlobs extends FsBlobStore implements Blobs {
  constructor(
    dir: string,
    private readonly base: string,
  ) {
    super(dir, base);
  }

  nameOf(url: string): string | null {
    const prefix = `${this.base}/v1/files/`;
    const name = url.startsWith(prefix) ? url.slice(prefix.length) : '';
    return BLOB_NAME.test(name) ? name : null;
  }

  async read(url: string): Promise<StoredBlob | null> {
    const name = this.nameOf(url);
    if (!name) return null;
    const file = await this.open(name);
    if (!file) return null;
    const chunks: Buffer[] = [];
    for await (const c of file.stream) chunks.push(c as Buffer);
    return { data: Buffer.concat(chunks), mimeType: file.type };
  }
}

/** The configured store for generated files. `files` serves /v1/files (empty when S3 holds the blobs). */
export function createBlobs(config: Pick<Config, 'blobStore' | 'blobDir' | 'publicBaseUrl'>): {
  blobs: Blobs;
  files: FsBlobs;
} {
  const files = new FsBlobs(config.blobDir, config.publicBaseUrl);
  return { blobs: config.blobStore.kind === 's3' ? new S3BlobStore(config.blobStore) : files, files };
}
