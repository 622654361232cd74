// WORKER_JOB_WATCHES at start: how many upstream jobs one worker watches at once (its watch
// queue's slots); 1 to 100,000, 500 when unset or empty; anything else stops the process and names it.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/env.js';

const base = { KILN_SECRET: 'x'.repeat(32) };
const watches = (WORKER_JOB_WATCHES?: string) =>
  loadConfig({ ...base, ...(WORKER_JOB_WATCHES === undefined ? {} : { WORKER_JOB_WATCHES }) }).worker.jobWatches;

describe('WORKER_JOB_WATCHES', () => {
  it('defaults to 500, also when set empty', () => {
    expect(watches()).toBe(500);
    expect(watches('')).toBe(500);
  });

  it('takes 1 to 100000, at both edges', () => {
    expect(watches('1')).toBe(1);
    expect(watches('100000')).toBe(100_000);
  });

  it('refuses 0, one past the top, a fraction and a word, naming the variable', () => {
    for (const v of ['0', '100001', '2.5', 'many']) expect(() => watches(v), v).toThrow(/WORKER_JOB_WATCHES/);
  });
});
