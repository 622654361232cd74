// Unit tier: the real Koa app (buildApp) and services over in-memory dependencies: the read model
// is a MemoryStore, Temporal a client stand-in that records the workflows started, chat the local
// model. Requests go through node:http on an ephemeral port, as a client's would.
import { kernelDeps } from '../../src/api/kernel.js';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { createLogger } from '../../src/ops/log.js';
import type { Client } from '@temporalio/client';
import { buildApp } from '../../src/api/app.js';
import { loadConfig, type Config } from '../../src/config/env.js';
import { ChatService, chatProviders } from '../../src/chat/service.js';
import { MemoryChannelState } from './unit-channel-state.js';
import { ImageTaskService } from '../../src/image/service.js';
import { VideoTaskService } from '../../src/video/service.js';
import { PassthroughAuth, type Authenticator } from '../../src/infra/callers.js';
import { FsBlobs } from '../../src/blobs/stores.js';
import { FinishedViews } from '../../src/tasks/store/finished-views.js';
import { MemoryStore } from './unit-store.js';
import type { Admissions } from '../../src/usage/store.js';

/** The unit tier has no Redis: every submit is admitted (limits are tested in the integration tier). */
const UNLIMITED: Admissions = {
  admit: async () => ({ admitted: true, fresh: true }),
  void: async () => true,
};

export const KEY = 'unit-test-key-0123456789';
/** A bearer token whose authentication fails with an unexpected (internal) error. */
export const EXPLODING_KEY = 'explode-with-internal-details';
export const INTERNAL_DETAIL = 'ECONNREFUSED 10.9.8.7:6379 /srv/kiln/secret';

export interface StartedWorkflow {
  type: string;
  id: string;
  taskQueue: string;
  args: unknown[];
}

export interface UnitApp {
  url: string;
  config: Config;
  store: MemoryStore;
  started: StartedWorkflow[];
  /** Lines the app logged (JSON). */
  logs: () => Record<string, unknown>[];
  close(): Promise<void>;
}

export async function startUnitApp(env: Record<string, string> = {}): Promise<UnitApp> {
  const config = loadConfig({
    KILN_SECRET: 'unit-secret-'.padEnd(40, 'x'),
    BLOB_DIR: mkdtempSync(join(tmpdir(), 'kiln-unit-')),
    ...env,
  });
  const store = new MemoryStore();
  // As an API process keeps them (src/api/runtime.ts), when a test asks for it by setting the size.
  if (env.FINISHED_VIEWS_CACHE_MB !== undefined && config.finishedViewsBytes > 0)
    store.finished = new FinishedViews(config.finishedViewsBytes, config.retentionSeconds * 1000);
  const started: StartedWorkflow[] = [];
  const temporal = {
    workflow: {
      async start(type: string, opts: { workflowId: string; taskQueue: string; args: unknown[] }) {
        started.push({ type, id: opts.workflowId, taskQueue: opts.taskQueue, args: opts.args });
        return { workflowId: opts.workflowId };
      },
      getHandle() {
        return {
          describe: async () => {
            throw Object.assign(new Error('workflow not found'), { name: 'WorkflowNotFoundError' });
          },
        };
      },
      async *list() {
        /* Temporal knows no task the read model lacks */
      },
    },
  } as unknown as Client;
  const lines: string[] = [];
  // The API's own logger (its mixin names the request on every line, its redaction hides keys).
  const log = createLogger(
    'info',
    'kiln-api',
    'json',
    0,
    new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    }),
  );
  const passthrough = new PassthroughAuth(config.ownerKey);
  const auth: Authenticator = {
    async authenticate(header) {
      if (header === `Bearer ${EXPLODING_KEY}`) throw new Error(`key store unreachable: ${INTERNAL_DETAIL}`);
      return passthrough.authenticate(header);
    },
    known: (header) => passthrough.known(header),
  };
  const files = new FsBlobs(config.blobDir, config.publicBaseUrl);
  const app = buildApp({
    log,
    auth,
    models: config.models,
    pollAfterSeconds: config.pollAfterSeconds,
    tasks: new ImageTaskService(config, store, temporal, kernelDeps(config, UNLIMITED)),
    blobs: files,
    chat: new ChatService(config.models, config.upstreamKeys, chatProviders(), new MemoryChannelState()),
    videos: new VideoTaskService(config, store, temporal, kernelDeps(config, UNLIMITED)),
    geminiVideos: { blobs: files, files, publicBaseUrl: config.publicBaseUrl },
  });
  const server: Server = createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    config,
    store,
    started,
    logs: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

/** One request; a JSON `body` is sent as application/json, a string or Buffer as it is. */
export async function request(
  app: UnitApp,
  method: string,
  path: string,
  opts: { key?: string | null; headers?: Record<string, string>; body?: unknown } = {},
): Promise<Reply> {
  const headers = new Headers(opts.headers);
  const key = opts.key === undefined ? KEY : opts.key;
  if (key !== null) headers.set('authorization', `Bearer ${key}`);
  let body: BodyInit | undefined;
  if (typeof opts.body === 'string' || Buffer.isBuffer(opts.body)) body = opts.body as BodyInit;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    if (!headers.has('content-type')) headers.set('content-type', 'application/json');
  }
  const res = await fetch(`${app.url}${path}`, { method, headers, body });
  const text = await res.text();
  let json: any = undefined;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, text, json };
}
