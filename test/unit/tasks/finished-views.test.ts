import { describe, expect, it } from 'vitest';
import { FinishedViews } from '../../../src/tasks/store/finished-views.js';

const HOUR = 3_600_000;
const view = (over: Record<string, unknown>) => JSON.stringify({ id: 't1', status: 'succeeded', ...over });

describe('finished views cache', () => {
  it('keeps a finished view for its owner and kind only', () => {
    let now = 1_000_000_000_000;
    const cache = new FinishedViews(1 << 20, 24 * HOUR, () => now);
    const stored = { status: 'succeeded' as const, view: view({ finished_at: now / 1000 }) };
    cache.remember('t1', stored, 'alice', 'image');
    expect(cache.get('t1', 'alice', 'image')).toEqual(stored);
    expect(cache.get('t1', 'bob', 'image')).toBe('foreign');
    expect(cache.get('t1', 'alice', 'video')).toBe('foreign');
    expect(cache.get('t2', 'alice', 'image')).toBeUndefined();
    now += 24 * HOUR - 1;
    expect(cache.get('t1', 'alice', 'image')).toEqual(stored);
    // Past finish time plus retention the record has left Redis: so has the entry.
    now += 2;
    expect(cache.get('t1', 'alice', 'image')).toBeUndefined();
  });

  it('never keeps unfinished, absent, foreign, already expired or webhook-pending views', () => {
    const now = 1_000_000_000_000;
    const cache = new FinishedViews(1 << 20, HOUR, () => now);
    for (const status of ['accepted', 'queued', 'running'] as const) {
      cache.remember(`u-${status}`, { status, view: view({ status, finished_at: null }) }, 'a', 'image');
      expect(cache.get(`u-${status}`, 'a', 'image')).toBeUndefined();
    }
    cache.remember('abs', 'absent', 'a', 'image');
    cache.remember('for', 'foreign', 'a', 'image');
    cache.remember('old', { status: 'failed', view: view({ finished_at: now / 1000 - 2 * 3600 }) }, 'a', 'image');
    const pending = view({ finished_at: now / 1000, webhook: { status: 'pending', attempts: 1, last_error: null } });
    cache.remember('hook', { status: 'succeeded', view: pending }, 'a', 'image');
    const delivered = view({
      finished_at: now / 1000,
      webhook: { status: 'delivered', attempts: 1, last_error: null },
    });
    cache.remember('done', { status: 'succeeded', view: delivered }, 'a', 'image');
    expect(['abs', 'for', 'old', 'hook'].map((id) => cache.get(id, 'a', 'image'))).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    expect(cache.get('done', 'a', 'image')).toEqual({ status: 'succeeded', view: delivered });
  });

  it('keeps no video view (a video can be deleted through another process) and stays within its byte budget', () => {
    const now = 1_000_000_000_000;
    const cache = new FinishedViews(64 * 1024, HOUR, () => now);
    const video = JSON.stringify({ status: 'completed', completed_at: now / 1000 });
    cache.remember('v', { status: 'succeeded', view: video }, 'a', 'video');
    expect(cache.get('v', 'a', 'video')).toBeUndefined();
    const big = JSON.stringify({ status: 'succeeded', finished_at: now / 1000, pad: 'x'.repeat(4000) });
    for (let i = 0; i < 100; i++) cache.remember(`t${i}`, { status: 'succeeded', view: big }, 'a', 'image');
    expect(cache.size).toBeGreaterThan(0);
    expect(cache.size * 2 * big.length).toBeLessThanOrEqual(64 * 1024);
    // Least recently used went first.
    expect(cache.get('t99', 'a', 'image')).not.toBeUndefined();
    expect(cache.get('t0', 'a', 'image')).toBeUndefined();
  });
});
