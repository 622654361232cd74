// The environment Kiln reads, one zod schema: every setting, its default and the message that
// names what to set when a value is malformed. src/config/env.ts turns it into the Config.
import { z } from 'zod';
import { MAX_LIMIT } from './limits.js';

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
