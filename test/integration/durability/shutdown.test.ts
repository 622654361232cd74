// Graceful shutdown of the production entry points (src/worker/main.ts, src/api/main.ts) on SIGTERM, and
// the worker's own Prometheus endpoint.
import { request } from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { freePort } from '../../../scripts/services.js';
import { spawnEntry as spawnWith } from '../../support/spawn-entry.js';
import { startKiln, http, submitBody, waitForStatus, KEY_A, type Kiln } from '../../support/kiln.js';

const MODELS = [
  { id: 'kiln-image-1', provider: 'local', latencyMs: 100, idempotent: true },
  // Not idempotent: an upstream call cut off by the shutdown would end the task uncertain.
  {
    id: 'slow-local',
    provider: 'local',
    latencyMs: 4000,
    idempotent: false,
    heartbeatTimeoutMs: 2000,
    timeoutMs: 20_000,
  },
];
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});
const spawnEntry = (file: string, env: Record<string, string>, readyText: string) =>
  spawnWith(file, env, readyText, cleanups);

async function kiln(): Promise<Kiln> {
  const k = await startKiln({ models: MODELS, workers: false });
  cleanups.push(() => k.stop());
  return k;
}

describe('worker SIGTERM', () => {
  it(
    'finishes the in-flight upstream call, so the task succeeds ' + '(not uncertain); its metrics count finished tasks',
    async () => {
      const k = await kiln();
      const api = http(k.baseUrl);
      const metricsPort = await freePort();
      const w = spawnEntry(
        'src/worker/main.ts',
        { ...k.env, LOG_LEVEL: 'info', WORKER_METRICS_ADDRESS: `127.0.0.1:${metricsPort}` },
        'kiln worker running',
      );
      await w.ready;

      const quick = await api('/v1beta/models/kiln-image-1:generateContent', {
        method: 'POST',
        json: submitBody('quick'),
      });
      await waitForStatus(() => api(`/v1/tasks/${quick.json.id}`), 'succeeded');
      const owner = (await k.api.store.get(quick.json.id))!.owner;
      // The worker's log: task lines carry the task id and owner hash, never the key or prompt.
      await vi.waitFor(
        () =>
          expect(w.lines.find((l) => l.msg === 'task transition' && l.status === 'succeeded')).toMatchObject({
            taskId: quick.json.id,
            owner,
            model: 'kiln-image-1',
          }),
        { timeout: 2000, interval: 50 },
      );
      expect(JSON.stringify(w.lines)).not.toContain(KEY_A);
      const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      expect(metrics).toMatch(
        /^kiln_tasks_finished_total\{[^}]*model="kiln-image-1"[^}]*outcome="succeeded"[^}]*\} 1$/m,
      );
      // The SDK's own worker metrics share the endpoint.
      expect(metrics).toMatch(/^temporal_activity_execution_latency_count\{[^}]*activity_type="generateImage"/m);

      const slow = await api('/v1beta/models/slow-local:generateContent', { method: 'POST', json: submitBody('slow') });
      await waitForStatus(() => api(`/v1/tasks/${slow.json.id}`), 'running');
      const t0 = Date.now();
      w.child.kill('SIGTERM');
      expect(await w.exited).toBe(0);
      // It waited for the upstream call (about 4 s) rather than cutting it off.
      expect(Date.now() - t0).toBeGreaterThan(1500);
      const during = await api(`/v1/tasks/${slow.json.id}`);
      expect(['running', 'succeeded']).toContain(during.json.status);
      // The activity's result is in Temporal; the next worker records the outcome.
      await k.startWorker();
      const end = await waitForStatus(
        () => api(`/v1/tasks/${slow.json.id}`),
        (s) => ['succeeded', 'failed', 'uncertain'].includes(s),
        30_000,
      );
      expect(end.status).toBe('succeeded');
      expect(end.candidates[0].content.parts.find((p: any) => p.inlineData).inlineData.data).toMatch(/^http/);
    },
    120_000,
  );
});

describe('API SIGTERM', () => {
  it('stops accepting connections, finishes the request in flight, then exits 0', async () => {
    const k = await kiln();
    const port = await freePort();
    const s = spawnEntry(
      'src/api/main.ts',
      { ...k.env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info' },
      'kiln api listening',
    );
    await s.ready;
    const base = `http://127.0.0.1:${port}`;
    expect((await fetch(`${base}/healthz`)).status).toBe(200);

    // A submission whose body is still arriving when SIGTERM comes.
    const body = Buffer.from(JSON.stringify(submitBody('in flight')));
    const response = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(
        `${base}/v1beta/models/kiln-image-1:generateContent`,
        {
          method: 'POST',
          headers: {
            authorization: `Bearer ${KEY_A}`,
            'content-type': 'application/json',
            'content-length': body.length,
          },
        },
        (res) => {
          let b = '';
          res.on('data', (c) => {
            b += c;
          });
          res.on('end', () => resolve({ status: res.statusCode!, body: b }));
        },
      );
      req.on('error', reject);
      req.write(body.subarray(0, 10));
      setTimeout(() => {
        s.child.kill('SIGTERM');
        setTimeout(async () => {
          // No new connections while draining.
          await expect(fetch(`${base}/healthz`)).rejects.toThrow();
          req.end(body.subarray(10));
        }, 500);
      }, 200);
    });
    const res = await response;
    expect(res.status).toBe(202);
    expect(JSON.parse(res.body).status).toBe('accepted');
    expect(await s.exited).toBe(0);
    expect(s.lines.some((l) => l.msg === 'kiln api stopped')).toBe(true);
  }, 60_000);
});
