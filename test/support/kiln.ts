// Test harness: a real Kiln (API on a free port + workers) on the shared Redis and Temporal,
// isolated per test file by its own Redis prefix and task queue.
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { expect, inject } from 'vitest';
import { pino } from 'pino';
import { loadConfig, type Config } from '../../src/config/env.js';
import { createApi } from '../../src/api/runtime.js';
import { startWorkers } from '../../src/worker/start.js';
import { DefaultLogger, Runtime } from '@temporalio/worker';

// Worker state changes and the expected activity failures of fault-injection tests are noise in test output; errors
// still show.
try {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
} catch {
  /* already installed in this process */
}

export interface KilnOptions {
  env?: Record<string, string>;
  models?: unknown[];
  workers?: boolean;
  redisUrl?: string;
  temporalAddress?: string;
  log?: import('pino').Logger;
}

export type Kiln = Awaited<ReturnType<typeof startKiln>>;

export const silent = pino({ level: 'silent' });

export async function startKiln(opts: KilnOptions = {}) {
  const dir = mkdtempSync(join(inject('tmpRoot'), 'kiln-'));
  const env: Record<string, string> = {
    KILN_SECRET: randomBytes(32).toString('hex'),
    REDIS_URL: opts.redisUrl ?? inject('redisUrl'),
    REDIS_PREFIX: `t${randomBytes(4).toString('hex')}:`,
    TEMPORAL_ADDRESS: opts.temporalAddress ?? inject('temporalAddress'),
    TEMPORAL_TASK_QUEUE: `q-${randomBytes(4).toString('hex')}`,
    BLOB_DIR: join(dir, 'blobs'),
    RATE_LIMIT_TASK_MS: '0',
    RATE_LIMIT_BATCH_MS: '0',
    LOG_LEVEL: 'silent',
    ...opts.env,
  };
  if (opts.models) {
    const file = join(dir, 'models.json');
    (await import('node:fs')).writeFileSync(file, JSON.stringify({ models: opts.models }));
    env.MODELS_FILE = file;
  }
  // PUBLIC_BASE_URL needs the port: listen first, then build config with it.
  const server: Server = (await import('node:http')).createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const baseUrl = `http://127.0.0.1:${port}`;
  env.PUBLIC_BASE_URL = baseUrl;
  const config: Config = loadConfig(env);
  const api = await createApi(config, opts.log ?? silent);
  server.on('request', api.app.callback());

  let workers: Awaited<ReturnType<typeof startWorkers>> | null = null;
  const startWorker = async () => {
    workers = await startWorkers(config, opts.log ?? silent, {
      workflowBundle: { codePath: inject('workflowBundle') },
      env,
      shutdownGraceMs: 0,
    });
  };
  // Bounded: a worker whose local activity waits on a dead Redis must not hang the test run.
  const stopWorker = async () => {
    const w = workers;
    workers = null;
    if (w) await Promise.race([w.shutdown(), new Promise((r) => setTimeout(r, 15_000))]);
  };
  if (opts.workers !== false) await startWorker();

  return {
    baseUrl,
    config,
    env,
    api,
    startWorker,
    stopWorker,
    async stop() {
      await stopWorker();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await api.close();
    },
  };
}

export const KEY_A = 'test-key-owner-a-0123456789';
export const KEY_B = 'test-key-owner-b-9876543210';

export function http(baseUrl: string, key: string | null = KEY_A) {
  return async (path: string, init: RequestInit & { json?: unknown } = {}) => {
    const headers = new Headers(init.headers);
    if (key !== null && !headers.has('authorization')) headers.set('authorization', `Bearer ${key}`);
    let body = init.body;
    if (init.json !== undefined) {
      body = JSON.stringify(init.json);
      if (!headers.has('content-type')) headers.set('content-type', 'application/json');
    }
    const res = await fetch(`${baseUrl}${path}`, { ...init, headers, body, redirect: 'manual' });
    const text = await res.text();
    let json: any = null;
    try {
      json = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, headers: res.headers, json, text };
  };
}

export const submitBody = (prompt = 'a red fox in the snow', extra: Record<string, unknown> = {}) => ({
  contents: [{ role: 'user', parts: [{ text: prompt }] }],
  generationConfig: { responseModalities: ['IMAGE'], imageConfig: { aspectRatio: '1:1', output: 'url' } },
  ...extra,
});

/** Polls `get` until the task's status is `done` (a status, or a test of it). */
export async function waitForStatus(
  get: () => Promise<{ json: any }>,
  done: string | ((s: string) => boolean),
  timeoutMs = 30_000,
) {
  const isDone = typeof done === 'string' ? (s: string) => s === done : done;
  const deadline = Date.now() + timeoutMs;
  let last: any;
  while (Date.now() < deadline) {
    last = (await get()).json;
    if (last && isDone(last.status)) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting; last: ${JSON.stringify(last)}`);
}

/**
 * Retries `probe` until `ok` holds (or the time is up) and returns the last value. For Temporal
 * reads that trail Redis: the final record is written by a local activity inside the last workflow
 * task, and visibility is eventually consistent.
 */
export async function eventually<T>(probe: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let v = await probe();
  while (!ok(v) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    v = await probe();
  }
  return v;
}

export async function listIds(client: import('@temporalio/client').Client, query: string): Promise<string[]> {
  const ids: string[] = [];
  for await (const wf of client.workflow.list({ query })) ids.push(wf.workflowId);
  return ids;
}

export const TERMINAL = (s: string) => s === 'succeeded' || s === 'failed' || s === 'uncertain';

/** The image-task steps most upstream tests repeat; `baseUrl` is read late (Kiln starts in beforeAll). */
export function imageSteps(baseUrl: () => string, key: string = KEY_A) {
  const api = () => http(baseUrl(), key);
  return {
    api,
    async submit(model: string, body: unknown = submitBody()): Promise<string> {
      const res = await api()(`/v1beta/models/${model}:generateContent`, { method: 'POST', json: body });
      expect(res.status, res.text).toBe(202);
      return res.json.id as string;
    },
    finish: (id: string) => waitForStatus(() => api()(`/v1/tasks/${id}`), TERMINAL),
    /** Polls until the task is `status` and returns its view. */
    until: (id: string, status: string) => waitForStatus(() => api()(`/v1/tasks/${id}`), status),
    status: async (id: string) => (await api()(`/v1/tasks/${id}`)).json.status as string,
    contentLocation: async (id: string) => (await api()(`/v1/tasks/${id}/content`)).headers.get('location'),
  };
}
