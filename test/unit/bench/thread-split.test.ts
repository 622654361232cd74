// The benchmark's split of a worker's CPU by thread (bench/lib.ts): Node 22+ names its threads, and
// the 200-task rows read where Kiln's worker spends its CPU from this split.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { readThreads, threadSplit, type ThreadReading } from '../../../bench/lib.js';

const reading = (total: number, threads: [string, string, number][]): ThreadReading => ({
  total,
  threads: new Map(threads.map(([tid, name, ms]) => [tid, { name, ms }])),
});

describe('threadSplit', () => {
  it("puts a live worker thread's CPU under the workflow thread, not under main", async () => {
    // On the word, 300 ms of the thread's own CPU (not of wall time: parallel test files share the
    // cores); then it says so and stays alive until terminated.
    const busy = new Worker(
      `const { parentPort } = require('node:worker_threads');
       const { readFileSync } = require('node:fs');
       const cpuMs = () => {
         const f = readFileSync('/proc/thread-self/stat', 'utf8').split(') ')[1].split(' ');
         return (Number(f[11]) + Number(f[12])) * 10;
       };
       parentPort.once('message', () => {
         const start = cpuMs();
         let x = 0;
         while (cpuMs() - start < 300) for (let i = 0; i < 1e6; i++) x += i;
         parentPort.postMessage(x);
       });`,
      { eval: true },
    );
    try {
      await new Promise((resolve, reject) => busy.once('online', resolve).once('error', reject));
      const before = readThreads(process.pid);
      busy.postMessage('go');
      await new Promise((resolve, reject) => busy.once('message', resolve).once('error', reject));
      const split = threadSplit(process.pid, before, readThreads(process.pid));
      expect(split['workflow thread']).toBeGreaterThanOrEqual(290);
      expect(split.main).toBeLessThan(150);
      expect(split['exited threads']).toBeLessThan(100);
    } finally {
      await busy.terminate();
    }
  });

  it('names each of Node 24 threads and the SDK core threads', () => {
    const before = reading(0, []);
    const after = reading(100, [
      ['1', 'MainThread', 10],
      ['2', 'WorkerThread', 20],
      ['3', 'V8Worker', 5],
      ['4', 'V8Worker', 6],
      ['5', 'libuv-worker', 7],
      ['6', 'tokio-runtime-w', 8],
      ['7', 'DelayedTaskSche', 1],
      ['8', 'SignalInspector', 2],
    ]);
    expect(threadSplit(1, before, after)).toEqual({
      main: 10,
      'workflow thread': 20,
      'V8 helpers': 12,
      'libuv pool': 7,
      'Temporal Core': 8,
      other: 2,
      'exited threads': 41,
    });
  });

  it('takes the busiest of Node 20 unnamed threads for the workflow thread', () => {
    const split = threadSplit(
      1,
      reading(0, []),
      reading(40, [
        ['1', 'node', 10],
        ['2', 'node', 20],
        ['3', 'node', 4],
        ['4', 'node', 6],
      ]),
    );
    expect(split).toMatchObject({ main: 10, 'workflow thread': 20, 'V8 helpers': 10, 'exited threads': 0 });
  });
});
