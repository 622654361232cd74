// Configuration is parsed once, at start, from the environment and the models file.
// Anything missing or malformed stops start-up with a message that names what to set.
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, resolve } from 'node:path';
import { hkdfSync } from 'node:crypto';
import { z } from 'zod';
import { configuredKeys } from '../shared/credentials.js';
import { DEFAULT_MODELS } from './default-models.js';
import { ConfigError, parseModels, type AnyChannel, type Model } from './models.js';
import { MAX_LIMIT, type Limits } from './limits.js';

const int = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);

// docker compose passes `${VAR:-}` as an empty string: for optional settings that means unset.
const unsetIfEmpty = <T extends z.ZodType>(schema: T) => z.preprocess((v) => (v === '' ? undefined : v), schema);
const ownerLimit = (name: string) =>
  unsetIfEmpty(
    z.coerce
      .number({ message: `${name} is a whole number of at least 0 (or unset: no limit)` })
      .int(`${name} is a whole number`)
      .min(0, `${name} is at least 0 (or unset: no limit)`)
      .max(MAX_LIMIT, `${name} is at most ${MAX_LIMIT}`)
      .optional(),
  );

export const EnvSchema = z.object({
  PORT: int(8787, 0),
  /** API processes sharing PORT (node:cluster); default: one per available core. */
  API_PROCESSES: unsetIfEmpty(
    z.coerce.number().int().min(1, 'API_PROCESSES is at least 1').max(64, 'API_PROCESSES is at most 64').optional(),
  ),
  HOST: z.string().default('0.0.0.0'),
  PUBLIC_BASE_URL: z.string().url().optional(),
  /** redis://host:port, rediss://host:port (TLS), or the absolute path of Redis's Unix socket. */
  REDIS_URL: unsetIfEmpty(
    z
      .string()
      .refine(
        (u) => /^rediss?:\/\/[^/?#]/i.test(u) || /^\/[^?]*[^/?](\?.*)?$/.test(u),
        // Not echoed: the URL may hold Redis's password.
        "REDIS_URL is redis://host:port, rediss://host:port or the absolute path of Redis's Unix socket " +
          '(e.g. /run/redis/redis.sock, for a Redis on this host)',
      )
      .default('redis://127.0.0.1:6379'),
  ),
  REDIS_PREFIX: z.string().default('kiln:'),
  /** Seeds of a Redis Cluster (host:port,host:port,…); when set Kiln uses the cluster and ignores REDIS_URL. */
  REDIS_CLUSTER_NODES: unsetIfEmpty(
    z
      .string()
      .transform((s) => s.split(',').map((x) => x.trim()))
      .pipe(
        z.array(
          z
            .string()
            .refine(
              (x) => /^[^\s:,]+:[1-9]\d{0,4}$/.test(x) && Number(x.split(':')[1]) <= 65535,
              'REDIS_CLUSTER_NODES is a comma-separated list of host:port ' +
                'seeds (port 1-65535), e.g. 10.0.0.1:6379,10.0.0.2:6379',
            ),
        ),
      )
      .optional(),
  ),
  TEMPORAL_ADDRESS: z.string().default('127.0.0.1:7233'),
  TEMPORAL_NAMESPACE: z.string().default('default'),
  TEMPORAL_TASK_QUEUE: z.string().default('kiln'),
  /**
   * Where upstream calls run: `model`, each model's own activity queue (its worker's slots are
   * that model's alone); `workflow`, the workflow's queue, which lets a server with
   * `system.enableActivityEagerExecution` hand the activity to the worker with the workflow task
   * (eager activity execution), at the price of one slot pool shared by every model.
   */
  TEMPORAL_UPSTREAM_QUEUE: z.enum(['model', 'workflow']).default('model'),
  /**
   * 1: starts ask for eager workflow start (the server hands the first workflow task back in the
   * start's answer). Only for a process whose Temporal client shares its NativeConnection with a
   * workflow worker; the API process has none and refuses it.
   */
  TEMPORAL_EAGER_START: z.enum(['0', '1']).default('0'),
  /** Worker: workflows kept in the sticky cache (SDK default from the heap size); 0: no cache, every workflow task replays. */
  WORKER_MAX_CACHED_WORKFLOWS: unsetIfEmpty(z.coerce.number().int().min(0).optional()),
  /** Worker: workflow task slots (SDK default 40). */
  WORKER_WORKFLOW_TASK_SLOTS: unsetIfEmpty(z.coerce.number().int().min(2).optional()),
  /** Worker: concurrent workflow task polls (SDK default min(10, slots)). */
  WORKER_WORKFLOW_TASK_POLLERS: unsetIfEmpty(z.coerce.number().int().min(2).optional()),
  /** Worker: upstream jobs (videos, image jobs) one worker watches at once, on the watch queue `<TEMPORAL_TASK_QUEUE>.watch`. */
  WORKER_JOB_WATCHES: unsetIfEmpty(z.coerce.number().int().min(1).max(100_000).default(500)),
  /** The Temporal Web UI's address (e.g. http://localhost:8233): the console links a task to its workflow there. */
  TEMPORAL_UI_URL: unsetIfEmpty(z.string().url().optional()),
  KILN_SECRET: z
    .string({
      message:
        'KILN_SECRET is required: set it to a random string of at least 32 characters (e.g. `openssl rand -hex 32`)',
    })
    .min(32, 'KILN_SECRET must be at least 32 characters (e.g. `openssl rand -hex 32`)'),
  AUTH_MODE: z.enum(['passthrough', 'keys']).default('passthrough'),
  MODELS_FILE: z.string().optional(),
  BLOB_DIR: z.string().default('.data/blobs'),
  RETENTION_DAYS: int(7, 1),
  POLL_AFTER_SECONDS: int(10, 1),
  RATE_LIMIT_TASK_MS: int(2000),
  RATE_LIMIT_BATCH_MS: int(5000),
  FINISHED_VIEWS_CACHE_MB: int(16),
  MAX_UNFINISHED_TASKS: int(10000, 1),
  // Each owner's default limits (src/config/limits.ts); unset: no limit. An operator may set an
  // owner's own, and a key its own (docs/keys.md).
  OWNER_MAX_UNFINISHED: ownerLimit('OWNER_MAX_UNFINISHED'),
  OWNER_SUBMITS_PER_MINUTE: ownerLimit('OWNER_SUBMITS_PER_MINUTE'),
  OWNER_DAILY_UNITS: ownerLimit('OWNER_DAILY_UNITS'),
  OWNER_MONTHLY_UNITS: ownerLimit('OWNER_MONTHLY_UNITS'),
  /** Test-only: the API process kills itself (SIGKILL) right after reserving a submit's units. */
  TEST_CRASH_AFTER_ADMISSION: z.enum(['0', '1']).default('0'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  // Operability (src/ops/): log format, operator endpoints, worker metrics, tracing.
  LOG_FORMAT: z.enum(['json', 'pretty']).default('json'),
  LOG_BUFFER_BYTES: int(2048).refine(
    (n) => n <= 2048,
    'LOG_BUFFER_BYTES must be at most 2048 (0: write every line at once)',
  ),
  KILN_OPERATOR_TOKEN: unsetIfEmpty(
    z.string().min(32, 'KILN_OPERATOR_TOKEN must be at least 32 characters (e.g. `openssl rand -hex 32`)').optional(),
  ),
  CODEC_CORS_ORIGINS: z.string().default(''),
  /**
   * Characters of the prompt shown in the Web UI's workflow summary, which is stored unencrypted: 0 keeps prompts out
   * of history.
   */
  RECONCILE_EVERY_MS: int(15_000).pipe(
    z.number().refine((v) => v === 0 || v >= 1000, 'RECONCILE_EVERY_MS is 0 (off) or at least 1000'),
  ),
  SUMMARY_PROMPT_CHARS: int(0).pipe(
    z.number().max(200, 'SUMMARY_PROMPT_CHARS is at most 200 (the summary is at most 256 bytes)'),
  ),
  WORKER_METRICS_ADDRESS: unsetIfEmpty(
    z
      .string()
      .regex(/^[^\s:]+:\d{1,5}$/, 'WORKER_METRICS_ADDRESS is host:port, e.g. 0.0.0.0:9464')
      .optional(),
  ),
  // Tracing is off unless an exporter is named (unlike the OpenTelemetry default of otlp).
  OTEL_TRACES_EXPORTER: z.enum(['none', 'otlp', 'console']).default('none'),
  OTEL_SERVICE_NAME: unsetIfEmpty(z.string().optional()),
  OTEL_EXPORTER_OTLP_ENDPOINT: unsetIfEmpty(z.string().url().optional()),
  // Blob store (see src/services/blob-store.ts): the filesystem by default, S3-compatible storage for production.
  BLOB_STORE: z.enum(['fs', 's3']).default('fs'),
  S3_BUCKET: z.string().min(1).optional(),
  S3_REGION: z.string().default('us-east-1'),
  S3_ENDPOINT: z.string().url().optional(),
  S3_ACCESS_KEY_ID: z.string().optional(),
  S3_SECRET_ACCESS_KEY: z.string().optional(),
  S3_FORCE_PATH_STYLE: z.enum(['true', 'false']).default('true'),
  S3_PREFIX: z.string().default(''),
  S3_PUBLIC_BASE_URL: z.string().url().optional(),
  S3_PRESIGN_SECONDS: int(604_800, 1).pipe(
    z.number().max(604_800, 'S3_PRESIGN_SECONDS: SigV4 presigned URLs last at most 7 days (604800)'),
  ),
  /** Test-only: addresses/CIDRs the SSRF guard lets through (e.g. 127.0.0.2 for a fake "public" host). */
  REFERENCE_FETCH_ALLOW: z.string().default(''),
  // Webhook deliveries: a failed attempt is retried after WEBHOOK_RETRY_INITIAL_MS, doubling up to
  // WEBHOOK_RETRY_MAX_MS, until WEBHOOK_MAX_AGE_MS after the first attempt (then `failed`).
  WEBHOOK_RETRY_INITIAL_MS: int(5000, 1),
  WEBHOOK_RETRY_MAX_MS: int(3_600_000, 1),
  WEBHOOK_MAX_AGE_MS: int(86_400_000, 1),
  /** Test-only: addresses/CIDRs a webhook may be delivered to although not public (as REFERENCE_FETCH_ALLOW). */
  WEBHOOK_ALLOW: z.string().default(''),
  /** A PEM file of extra CA certificates trusted for webhook receivers (a private CA; the tests' own). */
  WEBHOOK_CA_FILE: unsetIfEmpty(z.string().optional()),
});

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
