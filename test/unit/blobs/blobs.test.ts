// The file blob store makes its directory once, and again only if it disappears.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FsBlobStore } from '../../../src/blobs/local.js';

const roots: string[] = [];
afterEach(() => roots.splice(0).forEach((r) => rmSync(r, { recursive: true, force: true })));

function store() {
  const root = mkdtempSync(join(tmpdir(), 'kiln-blobs-'));
  roots.push(root);
  const dir = join(root, 'nested', 'files');
  return { dir, blobs: new FsBlobStore(dir, 'http://kiln.test') };
}

const nameOf = (url: string) => url.slice('http://kiln.test/v1/files/'.length);

describe('FsBlobStore', () => {
  it('makes a missing directory and stores whole files under unguessable names', async () => {
    const { dir, blobs } = store();
    const url = await blobs.put(Buffer.from('png bytes'), 'image/png');
    expect(url).toMatch(/^http:\/\/kiln\.test\/v1\/files\/[a-f0-9]{32}\.png$/);
    expect(readFileSync(join(dir, nameOf(url)), 'utf8')).toBe('png bytes');
    // No temporary file is left behind.
    expect(readdirSync(dir)).toEqual([nameOf(url)]);
  });

  it('makes the directory again when it was removed after the first file', async () => {
    const { dir, blobs } = store();
    await blobs.put(Buffer.from('one'), 'image/png');
    rmSync(dir, { recursive: true });
    const url = await blobs.put(Buffer.from('two'), 'video/mp4');
    expect(readFileSync(join(dir, nameOf(url)), 'utf8')).toBe('two');
    expect(readdirSync(dir)).toEqual([nameOf(url)]);
  });

  it('reports other write failures as they are', async () => {
    const { blobs } = store();
    const notBytes = { length: 1 } as unknown as Buffer; // writeFile refuses it (a TypeError, not ENOENT)
    await expect(blobs.put(notBytes, 'image/png')).rejects.toThrow();
  });
});
