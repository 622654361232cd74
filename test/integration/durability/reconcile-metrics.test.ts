// Reconciliation in a worker process of its own (src/worker/main.ts): a terminated task is ended by it,
// and its Prometheus endpoint counts the task in kiln_tasks_reconciled_total.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, expect, inject, it } from 'vitest';
import { binary, freePort } from '../../../scripts/services.js';
import { delayed, ok, startFakeGemini, fakeGeminiModel } from '../providers/gemini/fake-gemini.js';
import { spawnEntry } from '../../support/spawn-entry.js';
import { http, KEY_A, startKiln, submitBody, waitForStatus, TERMINAL } from '../../support/kiln.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  while (cleanups.length) await cleanups.pop()!().catch(() => undefined);
});

it('a worker process reconciles a terminated task and counts it on its metrics endpoint', async () => {
  const gemini = await startFakeGemini();
  cleanups.push(() => gemini.close());
  gemini.setDefault(delayed(120_000, ok()));
  const k = await startKiln({
    workers: false,
    models: [{ ...fakeGeminiModel(gemini), id: 'once', idempotent: false, timeoutMs: 120_000 }],
  });
  cleanups.push(() => k.stop());
  const metricsPort = await freePort();
  const worker = spawnEntry(
    'src/worker/main.ts',
    { ...k.env, LOG_LEVEL: 'info', RECONCILE_EVERY_MS: '1000', WORKER_METRICS_ADDRESS: `127.0.0.1:${metricsPort}` },
    'kiln worker running',
    cleanups,
  );
  await worker.ready;
  const api = http(k.baseUrl, KEY_A);
  const sub = await api('/v1beta/models/once:generateContent', { method: 'POST', json: submitBody('count me') });
  expect(sub.status).toBe(202);
  const id = sub.json.id as string;
  await gemini.waitForRequests(1);
  await promisify(execFile)(binary('temporal', 'TEMPORAL_BIN'), [
    'workflow',
    'terminate',
    '--workflow-id',
    id,
    '--reason',
    'metrics drill',
    '--address',
    inject('temporalAddress'),
  ]);
  const task = await waitForStatus(() => api(`/v1/tasks/${id}`), TERMINAL, 60_000);
  expect(task.status).toBe('uncertain');
  const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  expect(metrics).toMatch(
    /^kiln_tasks_reconciled_total\{(?=[^}]*kind="image")(?=[^}]*how="terminated")(?=[^}]*outcome="uncertain")[^}]*\} 1$/m,
  );
  expect(worker.lines.find((l) => l.msg === 'task reconciled')).toMatchObject({ taskId: id, how: 'terminated' });
});
