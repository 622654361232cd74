// Configuration is parsed once, at start, from the environment and the models file.
// Anything missing or malformed stops start-up with a message that names what to set.
import { readFileSync } from 'node:fs';
import { createHmac, hkdfSync } from 'node:crypto';
import { z } from 'zod';

const int = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);

const EnvSchema = z.object({
  PORT: int(8787, 0),
  HOST: z.string().default('0.0.0.0'),
  PUBLIC_BASE_URL: z.string().url().optional(),
  REDIS_URL: z.string().default('redis://127.0.0.1:6379'),
  REDIS_PREFIX: z.string().default('kiln:'),
  TEMPORAL_ADDRESS: z.string().default('127.0.0.1:7233'),
  TEMPORAL_NAMESPACE: z.string().default('default'),
  TEMPORAL_TASK_QUEUE: z.string().default('kiln'),
  KILN_SECRET: z.string({ message: 'KILN_SECRET is required: set it to a random string of at least 32 characters (e.g. `openssl rand -hex 32`)' })
    .min(32, 'KILN_SECRET must be at least 32 characters (e.g. `openssl rand -hex 32`)'),
  AUTH_MODE: z.enum(['passthrough', 'keys']).default('passthrough'),
  MODELS_FILE: z.string().optional(),
  BLOB_DIR: z.string().default('.data/blobs'),
  RETENTION_DAYS: int(7, 1),
  POLL_AFTER_SECONDS: int(10, 1),
  RATE_LIMIT_TASK_MS: int(2000),
  RATE_LIMIT_BATCH_MS: int(5000),
  MAX_UNFINISHED_TASKS: int(10000, 1),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

const CredentialSchema = z.union([
  z.literal('passthrough'),
  z.object({ env: z.string().min(1) }),
  z.literal('none'),
]);

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

const ImageModelSchema = z.object({
  ...taskModelCommon,
  kind: z.literal('image'),
  provider: z.enum(['local', 'gemini']),
  form: z.literal('task').default('task'),
  imageSizes: z.array(z.string()).default(['1K', '2K', '4K']),
});

const ChatModelSchema = z.object({
  ...modelCommon,
  kind: z.literal('chat'),
  provider: z.enum(['local', 'openai']),
});

const VideoModelSchema = z.object({
  ...taskModelCommon,
  kind: z.literal('video'),
  provider: z.enum(['local', 'openai-videos', 'workflow-node']),
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
];

export interface Config {
  port: number;
  host: string;
  publicBaseUrl: string;
  redisUrl: string;
  redisPrefix: string;
  temporal: { address: string; namespace: string; taskQueue: string };
  authMode: 'passthrough' | 'keys';
  ownerKey: Buffer;
  payloadKey: Buffer;
  models: Model[];
  blobDir: string;
  retentionSeconds: number;
  pollAfterSeconds: number;
  rateLimitTaskMs: number;
  rateLimitBatchMs: number;
  maxUnfinishedTasks: number;
  logLevel: string;
}

export class ConfigError extends Error {}

export function parseModels(json: unknown, source: string): Model[] {
  const parsed = ModelsFileSchema.safeParse(json);
  if (!parsed.success) {
    throw new ConfigError(`${source}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
  const ids = new Set<string>();
  for (const m of parsed.data.models) {
    if (ids.has(m.id)) throw new ConfigError(`${source}: model id "${m.id}" appears twice`);
    ids.add(m.id);
    if (m.provider !== 'local' && !m.baseUrl) throw new ConfigError(`${source}: model "${m.id}" (${m.provider}) needs baseUrl`);
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
    host: e.HOST,
    publicBaseUrl: (e.PUBLIC_BASE_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, ''),
    redisUrl: e.REDIS_URL,
    redisPrefix: e.REDIS_PREFIX,
    temporal: { address: e.TEMPORAL_ADDRESS, namespace: e.TEMPORAL_NAMESPACE, taskQueue: e.TEMPORAL_TASK_QUEUE },
    authMode: e.AUTH_MODE,
    ownerKey: derive('kiln owner hmac v1'),
    payloadKey: derive('kiln payload aes-256-gcm v1'),
    models,
    blobDir: e.BLOB_DIR,
    retentionSeconds: e.RETENTION_DAYS * 86400,
    pollAfterSeconds: e.POLL_AFTER_SECONDS,
    rateLimitTaskMs: e.RATE_LIMIT_TASK_MS,
    rateLimitBatchMs: e.RATE_LIMIT_BATCH_MS,
    maxUnfinishedTasks: e.MAX_UNFINISHED_TASKS,
    logLevel: e.LOG_LEVEL,
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
