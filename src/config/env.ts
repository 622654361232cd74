// Configuration is parsed once, at start, from the environment and the models file.
// Anything missing or malformed stops start-up with a message that names what to set.
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, resolve } from 'node:path';
import { hkdfSync } from 'node:crypto';
import type { z } from 'zod';
import { configuredKeys } from '../shared/credentials.js';
import { DEFAULT_MODELS } from './default-models.js';
import { ConfigError, parseModels, type AnyChannel, type Model } from './models.js';
import type { Limits } from './limits.js';
import { EnvSchema } from './env-schema.js';

export { EnvSchema };

export interface Config {
  port: number;
  apiProcesses: number;
  host: string;
  publicBaseUrl: string;
  redisUrl: string;
  /** Redis Cluster seeds (REDIS_CLUSTER_NODES): the read model uses a cluster client when set. */
  redisClusterNodes?: { host: string; port: number }[];
  redisPrefix: string;
  temporal: {
    address: string;
    namespace: string;
    taskQueue: string;
    uiUrl?: string;
    /** TEMPORAL_UPSTREAM_QUEUE: upstream calls on the model's queue or on the workflow's. */
    upstreamQueue: 'model' | 'workflow';
    /** TEMPORAL_EAGER_START: starts request eager workflow start (a worker must share the client's connection). */
    eagerStart: boolean;
  };
  /** The workflow worker's Temporal options; unset: the SDK's defaults. */
  worker: { maxCachedWorkflows?: number; workflowTaskSlots?: number; workflowTaskPollers?: number; jobWatches: number };
  authMode: 'passthrough' | 'keys';
  ownerKey: Buffer;
  payloadKey: Buffer;
  models: Model[];
  blobDir: string;
  retentionSeconds: number;
  pollAfterSeconds: number;
  rateLimitTaskMs: number;
  rateLimitBatchMs: number;
  /** Bytes of finished tasks' views an API process keeps in memory; 0: none. */
  finishedViewsBytes: number;
  maxUnfinishedTasks: number;
  /** Each owner's default limits (an owner's or a key's own may replace them). */
  limits: Limits;
  /** Test-only (TEST_CRASH_AFTER_ADMISSION): die between reserving a submit and starting it. */
  crashAfterAdmission: boolean;
  logLevel: string;
  ops: {
    logFormat: 'json' | 'pretty';
    /** The API's log lines are written in batches of this many bytes (or every 250 ms); 0: each at once. */
    logBufferBytes: number;
    /** Protects the codec endpoints; they are off when unset. */
    operatorToken?: string;
    /** Origins (the Temporal Web UI) allowed to call the codec endpoints from a browser. */
    codecCorsOrigins: string[];
    /** Prompt characters in the workflow summary (plain text in history); 0 = none. */
    summaryPromptChars: number;
    /** Workers: time between reconciliation rounds (tasks whose workflow closed outside Kiln); 0 = off. */
    reconcileEveryMs: number;
    /** host:port of the worker's Prometheus endpoint (Temporal SDK runtime); off when unset. */
    workerMetricsAddress?: string;
    tracesExporter: 'none' | 'otlp' | 'console';
    serviceName?: string;
  };
  blobStore: BlobStoreConfig;
  referenceFetchAllow: string[];
  webhooks: WebhookConfig;
  /** Configured upstream keys (`credential: {env}`) by variable name, read from the environment at start. */
  upstreamKeys?: Record<string, string>;
}

export interface WebhookConfig {
  retryInitialMs: number;
  retryMaxMs: number;
  maxAgeMs: number;
  allow: string[];
  /** PEM text of WEBHOOK_CA_FILE. */
  ca?: string;
}

function webhookConfig(e: z.infer<typeof EnvSchema>): WebhookConfig {
  let ca: string | undefined;
  if (e.WEBHOOK_CA_FILE) {
    try {
      ca = readFileSync(e.WEBHOOK_CA_FILE, 'utf8');
    } catch (err) {
      throw new ConfigError(`WEBHOOK_CA_FILE ${e.WEBHOOK_CA_FILE}: ${(err as Error).message}`);
    }
  }
  return {
    retryInitialMs: e.WEBHOOK_RETRY_INITIAL_MS,
    retryMaxMs: e.WEBHOOK_RETRY_MAX_MS,
    maxAgeMs: e.WEBHOOK_MAX_AGE_MS,
    allow: e.WEBHOOK_ALLOW.split(',')
      .map((x) => x.trim())
      .filter(Boolean),
    ...(ca ? { ca } : {}),
  };
}

export type BlobStoreConfig =
  | { kind: 'fs' }
  | {
      kind: 's3';
      bucket: string;
      region: string;
      endpoint?: string;
      credentials?: { accessKeyId: string; secretAccessKey: string };
      forcePathStyle: boolean;
      prefix: string;
      publicBaseUrl?: string;
      presignSeconds: number;
    };

function blobStoreConfig(e: z.infer<typeof EnvSchema>): BlobStoreConfig {
  if (e.BLOB_STORE === 'fs') return { kind: 'fs' };
  if (!e.S3_BUCKET) throw new ConfigError('Invalid configuration:\n  S3_BUCKET: required when BLOB_STORE=s3');
  if (!e.S3_ACCESS_KEY_ID !== !e.S3_SECRET_ACCESS_KEY)
    throw new ConfigError(
      'Invalid configuration:\n  S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go ' +
        'together (or leave both unset for the AWS default credential chain)',
    );
  return {
    kind: 's3',
    bucket: e.S3_BUCKET,
    region: e.S3_REGION,
    endpoint: e.S3_ENDPOINT,
    ...(e.S3_ACCESS_KEY_ID
      ? { credentials: { accessKeyId: e.S3_ACCESS_KEY_ID, secretAccessKey: e.S3_SECRET_ACCESS_KEY! } }
      : {}),
    forcePathStyle: e.S3_FORCE_PATH_STYLE === 'true',
    prefix: e.S3_PREFIX,
    publicBaseUrl: e.S3_PUBLIC_BASE_URL?.replace(/\/+$/, ''),
    presignSeconds: e.S3_PRESIGN_SECONDS,
  };
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  let models = DEFAULT_MODELS;
  if (e.MODELS_FILE) {
    let raw: unknown;
    try {
      raw = JSON.parse(readFileSync(e.MODELS_FILE, 'utf8'));
    } catch (err) {
      throw new ConfigError(`MODELS_FILE ${e.MODELS_FILE}: ${(err as Error).message}`);
    }
    models = parseModels(raw, `MODELS_FILE ${e.MODELS_FILE}`, dirname(resolve(e.MODELS_FILE)));
  }
  const secret = Buffer.from(e.KILN_SECRET, 'utf8');
  const derive = (info: string) => Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), info, 32));
  return {
    port: e.PORT,
    apiProcesses: e.API_PROCESSES ?? availableParallelism(),
    host: e.HOST,
    publicBaseUrl: (e.PUBLIC_BASE_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, ''),
    redisUrl: e.REDIS_URL,
    ...(e.REDIS_CLUSTER_NODES
      ? {
          redisClusterNodes: e.REDIS_CLUSTER_NODES.map((n) => ({
            host: n.slice(0, n.lastIndexOf(':')),
            port: Number(n.slice(n.lastIndexOf(':') + 1)),
          })),
        }
      : {}),
    redisPrefix: e.REDIS_PREFIX,
    temporal: {
      address: e.TEMPORAL_ADDRESS,
      namespace: e.TEMPORAL_NAMESPACE,
      taskQueue: e.TEMPORAL_TASK_QUEUE,
      ...(e.TEMPORAL_UI_URL ? { uiUrl: e.TEMPORAL_UI_URL.replace(/\/+$/, '') } : {}),
      upstreamQueue: e.TEMPORAL_UPSTREAM_QUEUE,
      eagerStart: e.TEMPORAL_EAGER_START === '1',
    },
    worker: {
      ...(e.WORKER_MAX_CACHED_WORKFLOWS !== undefined ? { maxCachedWorkflows: e.WORKER_MAX_CACHED_WORKFLOWS } : {}),
      ...(e.WORKER_WORKFLOW_TASK_SLOTS !== undefined ? { workflowTaskSlots: e.WORKER_WORKFLOW_TASK_SLOTS } : {}),
      ...(e.WORKER_WORKFLOW_TASK_POLLERS !== undefined ? { workflowTaskPollers: e.WORKER_WORKFLOW_TASK_POLLERS } : {}),
      jobWatches: e.WORKER_JOB_WATCHES,
    },
    authMode: e.AUTH_MODE,
    ownerKey: derive('kiln owner hmac v1'),
    payloadKey: derive('kiln payload aes-256-gcm v1'),
    models,
    blobDir: e.BLOB_DIR,
    retentionSeconds: e.RETENTION_DAYS * 86400,
    pollAfterSeconds: e.POLL_AFTER_SECONDS,
    rateLimitTaskMs: e.RATE_LIMIT_TASK_MS,
    rateLimitBatchMs: e.RATE_LIMIT_BATCH_MS,
    finishedViewsBytes: e.FINISHED_VIEWS_CACHE_MB * 1024 * 1024,
    maxUnfinishedTasks: e.MAX_UNFINISHED_TASKS,
    limits: {
      max_unfinished: e.OWNER_MAX_UNFINISHED ?? null,
      submits_per_minute: e.OWNER_SUBMITS_PER_MINUTE ?? null,
      daily_units: e.OWNER_DAILY_UNITS ?? null,
      monthly_units: e.OWNER_MONTHLY_UNITS ?? null,
    },
    crashAfterAdmission: e.TEST_CRASH_AFTER_ADMISSION === '1',
    logLevel: e.LOG_LEVEL,
    ops: {
      logFormat: e.LOG_FORMAT,
      logBufferBytes: e.LOG_BUFFER_BYTES,
      ...(e.KILN_OPERATOR_TOKEN ? { operatorToken: e.KILN_OPERATOR_TOKEN } : {}),
      codecCorsOrigins: e.CODEC_CORS_ORIGINS.split(',')
        .map((o) => o.trim().replace(/\/+$/, ''))
        .filter(Boolean),
      summaryPromptChars: e.SUMMARY_PROMPT_CHARS,
      reconcileEveryMs: e.RECONCILE_EVERY_MS,
      ...(e.WORKER_METRICS_ADDRESS ? { workerMetricsAddress: e.WORKER_METRICS_ADDRESS } : {}),
      tracesExporter: e.OTEL_TRACES_EXPORTER,
      ...(e.OTEL_SERVICE_NAME ? { serviceName: e.OTEL_SERVICE_NAME } : {}),
    },
    blobStore: blobStoreConfig(e),
    referenceFetchAllow: e.REFERENCE_FETCH_ALLOW.split(',')
      .map((x) => x.trim())
      .filter(Boolean),
    webhooks: webhookConfig(e),
    upstreamKeys: configuredKeys(
      models.flatMap((m): AnyChannel[] => m.channels),
      env,
    ),
  };
}
