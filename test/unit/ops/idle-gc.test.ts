// src/ops/idle-gc.ts: one collection when a process that has been busy goes idle, and only then.
// The CPU clock and the collector are injected; `check` is one sample (no timers, no waiting).
import { describe, expect, it } from 'vitest';
import { startIdleGc } from '../../../src/ops/idle-gc.js';

function rig() {
  let cpuMicros = 0;
  let collected = 0;
  const gcer = startIdleGc({
    everyMs: 2000,
    busyCpuMs: 1000,
    idleCpuMs: 40,
    afterStartUp: false,
    gc: () => collected++,
    cpuMicros: () => cpuMicros,
  });
  const sample = (cpuMsInSample: number) => {
    cpuMicros += cpuMsInSample * 1000;
    return gcer.check();
  };
  return { gcer, sample, collected: () => collected };
}

describe('idle garbage collection', () => {
  it('collects once when a busy process goes idle, not while it is busy', () => {
    const { gcer, sample, collected } = rig();
    try {
      expect(sample(1500)).toBe(false); // busy
      expect(sample(900)).toBe(false); // still busy
      expect(collected()).toBe(0);
      expect(sample(10)).toBe(true); // quiet after 2.4 s of CPU
      expect(collected()).toBe(1);
      // Staying idle does not collect again.
      for (let i = 0; i < 10; i++) expect(sample(5)).toBe(false);
      expect(collected()).toBe(1);
    } finally {
      gcer.stop();
    }
  });

  it('needs a burst worth the pause: light traffic between idle samples collects nothing', () => {
    const { gcer, sample, collected } = rig();
    try {
      for (let i = 0; i < 20; i++) sample(i % 2 ? 30 : 5); // 350 ms of CPU in all, every sample idle
      expect(collected()).toBe(0);
      sample(800); // the work adds up past 1 s ...
      expect(sample(5)).toBe(true); // ... and the next idle sample collects
      expect(collected()).toBe(1);
    } finally {
      gcer.stop();
    }
  });

  it("collects once when the process first goes idle after start-up, start-up's garbage included", () => {
    let collected = 0;
    const gcer = startIdleGc({
      everyMs: 2000,
      busyCpuMs: 1000,
      idleCpuMs: 40,
      gc: () => collected++,
      cpuMicros: () => 0,
    });
    try {
      expect(gcer.check()).toBe(true);
      expect(gcer.check()).toBe(false);
      expect(collected).toBe(1);
    } finally {
      gcer.stop();
    }
  });

  it('collects again after the next burst', () => {
    const { gcer, sample, collected } = rig();
    try {
      sample(2000);
      sample(1);
      sample(3000);
      expect(collected()).toBe(1);
      sample(1);
      expect(collected()).toBe(2);
    } finally {
      gcer.stop();
    }
  });

  it("uses node's exposed gc as an asynchronous, heap-shrinking major collection, and does nothing without it", () => {
    const g = globalThis as { gc?: unknown };
    const saved = g.gc;
    try {
      delete g.gc;
      let cpu = 0;
      const off = startIdleGc({ cpuMicros: () => cpu });
      expect(off.enabled).toBe(false);
      cpu += 5_000_000;
      off.check();
      expect(off.check()).toBe(false);
      off.stop();

      const calls: unknown[] = [];
      g.gc = (opts: unknown) => calls.push(opts);
      cpu = 0;
      const on = startIdleGc({ cpuMicros: () => cpu });
      expect(on.enabled).toBe(true);
      cpu += 5_000_000;
      on.check();
      expect(on.check()).toBe(true);
      // last-resort: the collection that also gives the heap's pages back (Node 24's V8 keeps them otherwise).
      expect(calls).toEqual([{ type: 'major', execution: 'async', flavor: 'last-resort' }]);
      on.stop();
    } finally {
      if (saved === undefined) delete g.gc;
      else g.gc = saved;
    }
  });
});
