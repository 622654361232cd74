// Several API processes on one port (API_PROCESSES): both serve (the first one too: it also
// supervises), /metrics sums them, a killed process is replaced, and SIGTERM stops them all gracefully.
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { freePort } from '../../../scripts/services.js';
import { startKiln, KEY_A } from '../../support/kiln.js';
import { alive, spawnEntry } from '../../support/spawn-entry.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});

/** A fresh connection per request, so the kernel spreads them over the processes' sockets. */
const get = (url: string, headers: Record<string, string> = {}) =>
  fetch(url, { headers: { ...headers, connection: 'close' } });

describe('API_PROCESSES=2', () => {
  it('shares the port, sums metrics across processes, replaces a killed process and stops on SIGTERM', async () => {
    const k = await startKiln({ models: [{ id: 'kiln-image-1', provider: 'local', latencyMs: 10 }], workers: false });
    cleanups.push(() => k.stop());
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const s = spawnEntry(
      'src/api/main.ts',
      { ...k.env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info', API_PROCESSES: '2' },
      'kiln api listening',
      cleanups,
    );
    await s.ready;
    const listening = () => s.lines.filter((l) => l.msg === 'kiln api listening').map((l) => l.pid as number);
    await vi.waitFor(() => expect(new Set(listening()).size).toBe(2), { timeout: 20_000, interval: 100 });
    const pids = [...new Set(listening())];
    // The first process serves: no process of its own for supervising.
    expect(pids).toContain(s.child.pid);

    const N = 40;
    for (let i = 0; i < N; i++)
      expect((await get(`${base}/v1/models`, { authorization: `Bearer ${KEY_A}` })).status).toBe(200);
    // Both processes answered some of them.
    await vi.waitFor(
      () => {
        const served = new Set(
          s.lines.filter((l) => l.msg === 'request' && l.route === '/v1/models').map((l) => l.pid),
        );
        expect(served).toEqual(new Set(pids));
      },
      { timeout: 5000, interval: 100 },
    );
    // Whichever process the scrape reaches, the counter is the sum over both.
    for (let i = 0; i < 4; i++) {
      const text = await (await get(`${base}/metrics`)).text();
      const m = /kiln_http_requests_total\{[^}]*route="\/v1\/models"[^}]*status="200"[^}]*\} (\d+)/.exec(text);
      expect(Number(m?.[1])).toBe(N);
    }

    // A process that dies is replaced; the port keeps answering meanwhile.
    process.kill(
      pids.find((p) => p !== s.child.pid)!,
      'SIGKILL',
    );
    await vi.waitFor(() => expect(new Set(listening()).size).toBe(3), { timeout: 20_000, interval: 100 });
    for (let i = 0; i < 6; i++) expect((await get(`${base}/healthz`)).status).toBe(200);

    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
    for (const pid of new Set(listening())) expect(alive(pid)).toBe(false);
  });

  it('leaves no process behind when the first one is killed (-9): the others exit with it', async () => {
    const k = await startKiln({ models: [{ id: 'kiln-image-1', provider: 'local', latencyMs: 10 }], workers: false });
    cleanups.push(() => k.stop());
    const port = await freePort();
    const s = spawnEntry(
      'src/api/main.ts',
      { ...k.env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info', API_PROCESSES: '3' },
      'kiln api listening',
      cleanups,
    );
    const listening = () => s.lines.filter((l) => l.msg === 'kiln api listening').map((l) => l.pid as number);
    await vi.waitFor(() => expect(new Set(listening()).size).toBe(3), { timeout: 20_000, interval: 100 });
    const others = [...new Set(listening())].filter((p) => p !== s.child.pid);
    expect(others).toHaveLength(2);
    s.child.kill('SIGKILL');
    await vi.waitFor(() => expect(others.filter(alive)).toEqual([]), { timeout: 10_000, interval: 100 });
  });

  // A sibling works nothing out again: the bench pins the API to one core right after the first
  // process listens, and a sibling that then counted its cores took the cluster's shared handle.
  it.skipIf(availableParallelism() < 2)(
    'without API_PROCESSES, starts one process per core and hands that count to each sibling (needs 2 cores)',
    async () => {
      const k = await startKiln({ models: [{ id: 'kiln-image-1', provider: 'local', latencyMs: 10 }], workers: false });
      cleanups.push(() => k.stop());
      const port = await freePort();
      const s = spawnEntry(
        'src/api/main.ts',
        { ...k.env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info', API_PROCESSES: '' },
        'kiln api listening',
        cleanups,
      );
      const cores = availableParallelism();
      const listening = () => s.lines.filter((l) => l.msg === 'kiln api listening').map((l) => l.pid as number);
      await vi.waitFor(() => expect(new Set(listening()).size).toBe(cores), { timeout: 30_000, interval: 100 });
      const siblings = [...new Set(listening())].filter((p) => p !== s.child.pid);
      expect(siblings).toHaveLength(cores - 1);
      for (const pid of siblings)
        expect(readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')).toContain(`API_PROCESSES=${cores}`);
    },
  );

  it('stops with an error, instead of forking forever, when its processes cannot start', async () => {
    const port = await freePort();
    const s = spawnEntry(
      'src/api/main.ts',
      {
        KILN_SECRET: 'x'.repeat(32),
        PORT: String(port),
        HOST: '127.0.0.1',
        API_PROCESSES: '2',
        // Nothing listens here: each process fails its start-up.
        REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
      },
      'never',
      cleanups,
    );
    s.ready.catch(() => undefined);
    expect(await s.exited).toBe(1);
  });
});
