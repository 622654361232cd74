// The pages an API process keeps (src/tasks/store/list-pages.ts): until their end, for their own
// frame only, within a byte bound that drops the oldest first; and where a page's end comes from.
import { describe, expect, it } from 'vitest';
import { firstExpiry } from '../../../../src/tasks/store/list-items.js';
import { ListPages } from '../../../../src/tasks/store/list-pages.js';

const frame = { head: Buffer.from('['), tail: Buffer.from(']') };
const page = (n: number) => Buffer.alloc(n, 0x61);
const entry = (expiry: number) => Buffer.from(`3:${String(expiry).padStart(13, '0')}:{}`);

describe('ListPages', () => {
  it('keeps a page until its end, for the same frame only', () => {
    const pages = new ListPages();
    pages.set('k', frame, '7', page(10), 2_000, 1_000);
    expect(pages.get('k', frame, 1_999)).toMatchObject({ version: '7', page: page(10) });
    expect(pages.get('k', undefined, 1_999)).toBeUndefined();
    expect(pages.get('k', { ...frame }, 1_999)).toBeUndefined();
    expect(pages.get('k', frame, 2_000)).toBeUndefined();
    expect(pages.size).toBe(0);
  });

  it('keeps a page no longer than its age bound', () => {
    const pages = new ListPages(1000, 500);
    pages.set('k', frame, '1', page(10), Infinity, 1_000);
    expect(pages.get('k', frame, 1_499)).toBeDefined();
    expect(pages.get('k', frame, 1_500)).toBeUndefined();
  });

  it('replaces the page of a key, and keeps none that has already ended', () => {
    const pages = new ListPages();
    pages.set('k', frame, '1', page(10), 5_000, 1_000);
    pages.set('k', frame, '2', page(20), 5_000, 1_000);
    expect(pages.get('k', frame, 1_000)?.version).toBe('2');
    pages.set('k', frame, '3', page(10), 1_000, 1_000);
    expect(pages.get('k', frame, 1_000)).toBeUndefined();
  });

  it('holds at most its bytes, dropping the oldest pages first, and never a page above a quarter', () => {
    const pages = new ListPages(100);
    pages.set('a', frame, '1', page(25), 9_000, 1_000);
    pages.set('b', frame, '1', page(25), 9_000, 1_000);
    pages.set('c', frame, '1', page(25), 9_000, 1_000);
    pages.set('d', frame, '1', page(25), 9_000, 1_000);
    expect(pages.size).toBe(4);
    pages.set('e', frame, '1', page(25), 9_000, 1_000);
    expect(pages.size).toBe(4);
    expect(pages.get('a', frame, 1_000)).toBeUndefined();
    expect(pages.get('e', frame, 1_000)).toBeDefined();
    pages.set('f', frame, '1', page(26), 9_000, 1_000);
    expect(pages.get('f', frame, 1_000)).toBeUndefined();
  });

  it('drops ended pages at the head as it keeps a new one', () => {
    const pages = new ListPages();
    pages.set('old', frame, '1', page(10), 1_500, 1_000);
    pages.set('new', frame, '1', page(10), 9_000, 2_000);
    expect(pages.size).toBe(1);
  });
});

describe('firstExpiry', () => {
  it('is the earliest expiry among the entries still live, Infinity for none', () => {
    expect(firstExpiry([entry(5_000), entry(3_000), entry(900), entry(4_000)], 1_000)).toBe(3_000);
    expect(firstExpiry([entry(900)], 1_000)).toBe(Infinity);
    expect(firstExpiry([], 1_000)).toBe(Infinity);
  });
});
