// Configuration is parsed once, at start, from the environment and the models file.
// Anything missing or malformed stops start-up with a message that names what to set.
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { createHmac, hkdfSync } from 'node:crypto';
import { z } from 'zod';
import { configuredKeyOf } from './shared/credentials.js';
import { PRO_SECONDS, PRO_SIZES } from './shared/video-task.js';

const int = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);

// docker compose passes `${VAR:-}` as an empty string: for optional settings that means unset.
const unsetIfEmpty = <T extends z.ZodType>(schema: T) => z.preprocess((v) => (v === '' ? undefined : v), schema);

export const EnvSchema = z.object({
  PORT: int(8787, 0),
  /** API processes sharing PORT (node:cluster); default: one per available core. */
  API_PROCESSES: unsetIfEmpty(
    z.coerce.number().int().min(1, 'API_PROCESSES is at least 1').max(64, 'API_PROCESSES is at most 64').optional(),
  ),
  HOST: z.string().default('0.0.0.0'),
  PUBLIC_BASE_URL: z.string().url().optional(),
  REDIS_URL: z.string().default('redis://127.0.0.1:6379'),
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

const CredentialSchema = z.union([z.literal('passthrough'), z.object({ env: z.string().min(1) }), z.literal('none')]);

/** Fields every model kind shares: identity, upstream location and credentials, time budget. */
const modelCommon = {
  id: z.string().regex(/^[A-Za-z0-9._-]{1,100}$/, 'model ids use letters, digits, ".", "_" and "-"'),
  description: z.string().optional(),
  /** Upstream call budget for one attempt; its expiry ends a task failed/upstream_timeout. */
  timeoutMs: int(120_000, 1),
  baseUrl: z.string().url().optional(),
  upstreamModel: z.string().optional(),
  credential: CredentialSchema.default('passthrough'),
};

/** Task models run as Temporal workflows: retry, crash detection and upstream capacity per model. */
const taskModelCommon = {
  ...modelCommon,
  heartbeatTimeoutMs: int(10_000, 1000),
  maxAttempts: int(3, 1),
  /** Whether a create call may be resent safely (idempotency key = task id). */
  idempotent: z.boolean().default(false),
  concurrency: int(8, 1),
  ratePerSecond: z.number().positive().optional(),
  /** local providers: simulated generation time. */
  latencyMs: int(800),
};

const ImageModelSchema = z
  .object({
    ...taskModelCommon,
    kind: z.literal('image'),
    provider: z.enum(['local', 'gemini']),
    /** `task`: 202 + polling; `direct`: generateContent answers with the images (still one workflow). */
    form: z.enum(['task', 'direct']).default('task'),
    /** Download reference images in the activity and send them as base64 (else the URLs travel as they are). */
    inlineReferences: z.boolean().default(false),
    referenceMaxBytes: int(10 * 1024 * 1024, 1),
    /** Upstream 429s resent (after Retry-After, or the doubling backoff) within timeoutMs before giving up. */
    rateLimitRetries: int(2, 0),
    rateLimitBackoffMs: int(1000, 0),
    imageSizes: z.array(z.string()).default(['1K', '2K', '4K']),
    /**
     * Run the upstream call inside the workflow's own workflow task (a Temporal local activity): a
     * successful task costs Temporal 6 history events instead of 11. Only for fast upstreams: while
     * the call runs, the task's cancel waits for it, and a worker that dies with it is noticed after
     * the workflow task timeout (10 s) instead of the heartbeat timeout.
     */
    inline: z.boolean().default(false),
  })
  .superRefine((m, ctx) => {
    if (!m.inline) return;
    if (m.timeoutMs > INLINE_MAX_TIMEOUT_MS)
      ctx.addIssue({
        code: 'custom',
        path: ['timeoutMs'],
        message: `an inline model needs timeoutMs ≤ ${INLINE_MAX_TIMEOUT_MS} (got ${m.timeoutMs}): a cancel waits for the call`,
      });
    if (m.ratePerSecond !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['ratePerSecond'],
        message:
          'an inline model cannot have ratePerSecond: the rate is kept by its activity queue, which it does not use',
      });
  });

/**
 * The longest call an inline image model may make: a workflow task cannot take a signal or a
 * cancel while its local activity runs, and the owner's cancel must take effect within a second.
 */
export const INLINE_MAX_TIMEOUT_MS = 1000;

const MiB = 1024 * 1024;

/** Chat is synchronous (no workflow): its limits bound what one request may hold in memory. */
const ChatModelSchema = z.object({
  ...modelCommon,
  kind: z.literal('chat'),
  provider: z.enum(['local', 'openai']),
  /** Request body after decompression. */
  maxBodyBytes: int(20 * MiB, 1024),
  maxImages: int(8, 0),
  /** One image, decoded from its base64. */
  maxImageBytes: int(10 * MiB, 1),
  /** Upper bound of `max_tokens`. */
  maxOutputTokens: int(16_384, 1),
  /** local provider: simulated time before the reply. */
  latencyMs: int(0),
});

/** Where a workflow-node model puts a request field: `{nodeId, fieldName}` of the upstream workflow. */
const NodeFieldSchema = z.object({ nodeId: z.string().min(1).max(100), fieldName: z.string().min(1).max(100) });

const VideoModelSchema = z
  .object({
    ...taskModelCommon,
    kind: z.literal('video'),
    provider: z.enum(['local', 'openai-videos', 'workflow-node']),
    /** `video`: OpenAI video object; `workflow-node`: also `results[*].url` (default for that provider). */
    form: z.enum(['video', 'workflow-node']).optional(),
    /** The contract's pro rules: `seconds` only 10/15/25, `size` only 1792x1024/1024x1792. */
    strict: z.boolean().default(false),
    /** Allowed `seconds` (the first is the default); default 4/8/12, strict models 10/15/25. */
    seconds: z
      .array(z.string().regex(/^[1-9]\d{0,3}$/, 'seconds are whole numbers as strings'))
      .min(1)
      .optional(),
    /** Allowed `size` (the first is the default); default 720x1280/1280x720, strict models the pro sizes. */
    sizes: z
      .array(z.string().regex(/^[1-9]\d{1,4}x[1-9]\d{1,4}$/, 'sizes look like 1280x720'))
      .min(1)
      .optional(),
    /** Durable timer between two checks of the upstream job. */
    pollIntervalMs: int(5000, 50),
    /** Whole-task budget from the workflow's start; past it the task ends failed/upstream_timeout. */
    overallTimeoutMs: int(30 * 60_000, 1000),
    /** workflow-node: the upstream workflow and where prompt, image, seconds and size go. */
    workflowId: z.string().min(1).max(200).optional(),
    nodes: z
      .object({
        prompt: NodeFieldSchema.optional(),
        image: NodeFieldSchema.optional(),
        seconds: NodeFieldSchema.optional(),
        size: NodeFieldSchema.optional(),
      })
      .default({}),
    /** local: frames per second and longest side of the rendered MP4 (kept small; `size` stays as asked). */
    localFps: int(8, 1),
    localMaxSide: int(320, 16),
  })
  .superRefine((m, ctx) => {
    const pro = { seconds: PRO_SECONDS as readonly string[], sizes: PRO_SIZES as readonly string[] };
    for (const field of ['seconds', 'sizes'] as const) {
      const bad = m.strict ? m[field]?.find((v) => !pro[field].includes(v)) : undefined;
      if (bad)
        ctx.addIssue({
          code: 'custom',
          path: [field],
          message: `"${bad}" is not allowed for a strict (pro) model; allowed: ${pro[field].join(', ')}`,
        });
    }
    if (m.provider === 'workflow-node' && !m.workflowId)
      ctx.addIssue({ code: 'custom', path: ['workflowId'], message: 'workflow-node models need workflowId' });
  });

// A model without `kind` is an image model, as in the first models files.
const ModelSchema = z.preprocess(
  (v) => (v && typeof v === 'object' && !('kind' in v) ? { ...v, kind: 'image' } : v),
  z.discriminatedUnion('kind', [ImageModelSchema, ChatModelSchema, VideoModelSchema]),
);
export type ImageModel = z.infer<typeof ImageModelSchema>;
export type ChatModel = z.infer<typeof ChatModelSchema>;
export type VideoModel = z.infer<typeof VideoModelSchema>;
export type Model = ImageModel | ChatModel | VideoModel;

const ModelsFileSchema = z.object({ models: z.array(ModelSchema).min(1) });

export const DEFAULT_MODELS: Model[] = [
  ImageModelSchema.parse({
    id: 'kiln-image-1',
    kind: 'image',
    provider: 'local',
    description: 'Built-in local renderer: a PNG that shows the prompt',
    idempotent: true,
  }),
  ChatModelSchema.parse({
    id: 'kiln-chat-1',
    kind: 'chat',
    provider: 'local',
    description: 'Built-in local chat model: a deterministic reply that describes its inputs',
  }),
  ...[
    {
      id: 'kiln-video-1',
      description: 'Built-in local renderer: a short H.264 MP4 that shows the prompt',
      seconds: ['4', '8', '10', '12'],
    },
    {
      id: 'kiln-video-pro',
      description: "Built-in local renderer with the pro model's strict seconds and sizes",
      strict: true,
    },
    {
      id: 'kiln-video-node',
      description: 'Built-in local renderer answering in the workflow-node form (results[*].url)',
      form: 'workflow-node',
    },
  ].map((m) =>
    VideoModelSchema.parse({
      kind: 'video',
      provider: 'local',
      idempotent: true,
      latencyMs: 2000,
      pollIntervalMs: 1000,
      ...m,
    }),
  ),
];

export interface Config {
  port: number;
  apiProcesses: number;
  host: string;
  publicBaseUrl: string;
  redisUrl: string;
  /** Redis Cluster seeds (REDIS_CLUSTER_NODES): the read model uses a cluster client when set. */
  redisClusterNodes?: { host: string; port: number }[];
  redisPrefix: string;
  temporal: { address: string; namespace: string; taskQueue: string; uiUrl?: string };
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
  /** Configured upstream keys (`credential: {env}`) by model id, read from the environment at start. */
  upstreamKeys?: Record<string, string>;
}

export class ConfigError extends Error {}

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

export function parseModels(json: unknown, source: string): Model[] {
  const parsed = ModelsFileSchema.safeParse(json);
  if (!parsed.success) {
    throw new ConfigError(
      `${source}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    );
  }
  const ids = new Set<string>();
  for (const m of parsed.data.models) {
    if (ids.has(m.id)) throw new ConfigError(`${source}: model id "${m.id}" appears twice`);
    ids.add(m.id);
    if (m.provider !== 'local' && !m.baseUrl)
      throw new ConfigError(`${source}: model "${m.id}" (${m.provider}) needs baseUrl`);
  }
  return parsed.data.models;
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
    models = parseModels(raw, `MODELS_FILE ${e.MODELS_FILE}`);
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
    upstreamKeys: Object.fromEntries(
      models.flatMap((m) => {
        const v = configuredKeyOf(m, env);
        return v ? [[m.id, v]] : [];
      }),
    ),
  };
}

export function modelsOfKind<K extends Model['kind']>(models: Model[], kind: K): Extract<Model, { kind: K }>[] {
  return models.filter((m): m is Extract<Model, { kind: K }> => m.kind === kind);
}

export function ownerOfKey(ownerKey: Buffer, apiKey: string): string {
  return createHmac('sha256', ownerKey).update(apiKey).digest('hex');
}

/** Activity task queue of one model: concurrency and rate limits are per model. */
export function modelTaskQueue(baseQueue: string, modelId: string): string {
  return `${baseQueue}.model.${modelId}`;
}

/** A video model's allowed `seconds` and `size` values; the first of each is the default. */
export function videoOptions(m: VideoModel): {
  seconds: readonly string[];
  sizes: readonly string[];
  form: 'video' | 'workflow-node';
} {
  return {
    seconds: m.seconds ?? (m.strict ? PRO_SECONDS : ['4', '8', '12']),
    sizes: m.sizes ?? (m.strict ? PRO_SIZES : ['720x1280', '1280x720']),
    form: m.form ?? (m.provider === 'workflow-node' ? 'workflow-node' : 'video'),
  };
}
