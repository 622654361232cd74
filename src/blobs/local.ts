// Generated files are stored under unguessable names and served by the API at /v1/files/{name}.
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile, rename, stat, unlink } from 'node:fs/promises';
import { createReadStream, type ReadStream } from 'node:fs';
import { join, resolve } from 'node:path';

export interface BlobStore {
  /** Stores bytes and returns their absolute public URL. */
  put(data: Buffer, mimeType: string): Promise<string>;
}

export const EXT_BY_TYPE: Record<string, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/webp': 'webp',
  'image/gif': 'gif',
  'video/mp4': 'mp4',
};
const TYPE_BY_EXT = Object.fromEntries(Object.entries(EXT_BY_TYPE).map(([t, e]) => [e, t]));
export const BLOB_NAME = /^[a-f0-9]{32}\.(png|jpg|webp|gif|mp4|bin)$/;

/** A new random (unguessable) blob name for that type. */
export const blobName = (mimeType: string) => `${randomBytes(16).toString('hex')}.${EXT_BY_TYPE[mimeType] ?? 'bin'}`;

export class FsBlobStore implements BlobStore {
  readonly dir: string;
  /** Whether `dir` was made (or found) already: a `mkdir -p` per file is a visible share of a task's CPU. */
  private made = false;
  constructor(
    dir: string,
    private readonly publicBaseUrl: string,
  ) {
    this.dir = resolve(dir);
  }

  async put(data: Buffer, mimeType: string): Promise<string> {
    return this.putAs(blobName(mimeType), data);
  }

  /** Stores bytes under `name` (a BLOB_NAME): a derived file kept beside the one it came from. */
  async putAs(name: string, data: Buffer): Promise<string> {
    // Write then rename, so a reader never sees a half-written file.
    const tmp = join(this.dir, `.${name}.tmp`);
    if (!this.made) await this.makeDir();
    await writeFile(tmp, data).catch(async (err: NodeJS.ErrnoException) => {
      // The directory went away (an operator cleared it): make it again, once.
      if (err.code !== 'ENOENT') throw err;
      await this.makeDir();
      await writeFile(tmp, data);
    });
    await rename(tmp, join(this.dir, name));
    return `${this.publicBaseUrl}/v1/files/${name}`;
  }

  /** The public URL of a stored file, or null when there is none of that name. */
  async urlOf(name: string): Promise<string | null> {
    if (!BLOB_NAME.test(name)) return null;
    const found = await stat(join(this.dir, name)).then(
      () => true,
      () => false,
    );
    return found ? `${this.publicBaseUrl}/v1/files/${name}` : null;
  }

  /** Deletes a stored file; one already gone is no error (a repeated delete). */
  async remove(name: string): Promise<void> {
    if (!BLOB_NAME.test(name)) return;
    await unlink(join(this.dir, name)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
  }

  private async makeDir(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    this.made = true;
  }

  /** Opens a stored file for serving; null for a name that is malformed or absent. */
  async open(name: string): Promise<{ stream: ReadStream; size: number; type: string } | null> {
    if (!BLOB_NAME.test(name)) return null;
    const path = join(this.dir, name);
    try {
      const s = await stat(path);
      const ext = name.slice(name.lastIndexOf('.') + 1);
      return { stream: createReadStream(path), size: s.size, type: TYPE_BY_EXT[ext] ?? 'application/octet-stream' };
    } catch {
      return null;
    }
  }
}
