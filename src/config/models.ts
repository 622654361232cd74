// The models file: each model's kind, request options and the upstreams (channels) it routes over.
// Parsed once at start; anything malformed stops start-up with a message naming the field.
import { z } from 'zod';
import {
  channelOnlyFields,
  DEFAULT_CHANNEL_ID,
  inheritUpstreamSettings,
  type Routed,
  taskUpstreamFields,
  upstreamFields,
} from './channels.js';
import { PRO_SECONDS, PRO_SIZES } from '../shared/video-task.js';
import { IMAGE_PROVIDERS, imageRunsJobs, providerChecks, VIDEO_PROVIDERS } from './providers.js';
import { veoRefusals } from '../shared/veo.js';
import { makerSeconds, VIDEO_MAKERS, videoMakerRefusals, type VideoOffer } from './video-makers.js';
import { comfyuiChannelIssues } from '../shared/comfyui.js';
import { comfyuiFields, inputName, int, openaiImagesFields } from './provider-fields.js';
import { readWorkflowFiles } from './workflow-files.js';

export class ConfigError extends Error {}

/**
 * The longest call an inline image model may make: a workflow task cannot take a signal or a
 * cancel while its local activity runs, and the owner's cancel must take effect within a second.
 */
export const INLINE_MAX_TIMEOUT_MS = 1000;

const MiB = 1024 * 1024;

const imageUpstream = {
  ...taskUpstreamFields,
  provider: z.enum(IMAGE_PROVIDERS),
  /**
   * replicate: where the model takes Kiln's options (src/shared/replicate-input.ts has the
   * defaults); `imageList` sends the reference images as one list under `image`.
   */
  inputNames: z
    .object({
      prompt: inputName,
      image: inputName,
      imageList: z.boolean().optional(),
      aspectRatio: inputName,
      imageSize: inputName,
      count: inputName,
      seed: inputName,
    })
    .strict()
    .optional(),
  /** replicate: inputs sent with every prediction (the request's own options win). */
  inputDefaults: z.record(z.string(), z.unknown()).optional(),
  /** Download reference images in the activity and send them as base64 (else the URLs travel as they are). */
  inlineReferences: z.boolean().default(false),
  referenceMaxBytes: int(10 * MiB, 1),
  /**
   * Upstream 429s resent on the same upstream (after Retry-After, or the doubling backoff) within
   * timeoutMs before giving up; a model with several channels moves to the next one instead.
   */
  rateLimitRetries: int(2, 0),
  rateLimitBackoffMs: int(1000, 0),
  ...openaiImagesFields,
  ...comfyuiFields,
};

const videoUpstream = {
  ...taskUpstreamFields,
  provider: z.enum(VIDEO_PROVIDERS),
  /** replicate: where the model takes Kiln's options (src/shared/replicate-input.ts has the defaults). */
  inputNames: z
    .object({ prompt: inputName, image: inputName, seconds: inputName, aspectRatio: inputName, resolution: inputName })
    .strict()
    .optional(),
  /** replicate: inputs sent with every prediction (the request's own options win). */
  inputDefaults: z.record(z.string(), z.unknown()).optional(),
  /** workflow-node: the upstream workflow; `nodes` says where prompt, image, seconds and size go. */
  workflowId: z.string().min(1).max(200).optional(),
  ...comfyuiFields,
  /** local: frames per second and longest side of the rendered MP4 (kept small; `size` stays as asked). */
  localFps: int(8, 1),
  localMaxSide: int(320, 16),
};

const chatUpstream = {
  ...upstreamFields,
  provider: z.enum(['local', 'openai']),
  /** local provider: simulated time before the reply. */
  latencyMs: int(0),
};

const channelsOf = <T extends z.ZodRawShape>(upstream: T) =>
  z
    .array(z.object({ ...upstream, ...channelOnlyFields }))
    .min(1)
    .max(16)
    .optional();

/** Fields every model kind shares. A model with `channels` needs no provider of its own. */
const modelCommon = {
  id: z.string().regex(/^[A-Za-z0-9._-]{1,100}$/, 'model ids use letters, digits, ".", "_" and "-"'),
  description: z.string().optional(),
};

/** Task models run as Temporal workflows: retries, crash detection, the wait for a free channel. */
const taskModelCommon = {
  ...modelCommon,
  heartbeatTimeoutMs: int(10_000, 1000),
  maxAttempts: int(3, 1),
  /**
   * How long a task may wait `queued` while every channel is cooling down before it fails with the
   * last refusal's code (a wait for a busy channel's room has no bound).
   */
  queueTimeoutMs: int(300_000, 0),
  /** Units a task costs against its owner's quota (src/usage/): per task. */
  units: int(1, 0),
  /** A failed task whose upstream call was sent is charged too (an upstream that bills failures). */
  chargeFailed: z.boolean().default(false),
};

const ImageModelSchema = z.object({
  ...taskModelCommon,
  ...imageUpstream,
  provider: imageUpstream.provider.optional(),
  channels: channelsOf(imageUpstream),
  kind: z.literal('image'),
  /** `task`: 202 + polling; `direct`: generateContent answers with the images (still one workflow). */
  form: z.enum(['task', 'direct']).default('task'),
  imageSizes: z.array(z.string()).default(['1K', '2K', '4K']),
  /**
   * Run the upstream call inside the workflow's own workflow task (a Temporal local activity): a
   * successful task costs Temporal 6 history events instead of 11. Only for fast upstreams: while
   * the call runs, the task's cancel waits for it, and a worker that dies with it is noticed after
   * the workflow task timeout (10 s) instead of the heartbeat timeout.
   */
  inline: z.boolean().default(false),
  /** Providers that answer later (fal, replicate, dashscope): the durable timer between two checks of the job. */
  pollIntervalMs: int(2000, 50),
  /** Providers that answer later: whole-task budget from the workflow's start (failed / upstream_timeout past it). */
  overallTimeoutMs: int(10 * 60_000, 1000),
});

/** Chat is synchronous (no workflow): its limits bound what one request may hold in memory. */
const ChatModelSchema = z.object({
  ...modelCommon,
  ...chatUpstream,
  provider: chatUpstream.provider.optional(),
  channels: channelsOf(chatUpstream),
  kind: z.literal('chat'),
  /** Request body after decompression. */
  maxBodyBytes: int(20 * MiB, 1024),
  maxImages: int(8, 0),
  /** One image, decoded from its base64. */
  maxImageBytes: int(10 * MiB, 1),
  /** Upper bound of `max_tokens`. */
  maxOutputTokens: int(16_384, 1),
});

const VideoModelSchema = z.object({
  ...taskModelCommon,
  ...videoUpstream,
  provider: videoUpstream.provider.optional(),
  channels: channelsOf(videoUpstream),
  kind: z.literal('video'),
  /** `video`: OpenAI video object; `workflow-node`: also `results[*].url` (default for that provider). */
  form: z.enum(['video', 'workflow-node']).optional(),
  /** The contract's pro rules: `seconds` only 10/15/25, `size` only 1792x1024/1024x1792. */
  strict: z.boolean().default(false),
  /** Allowed `seconds` (the first is the default); default 4/8/12, strict models 10/15/25, a video maker's own (src/config/video-makers.ts). */
  seconds: z
    .array(z.string().regex(/^[1-9]\d{0,3}$/, 'seconds are whole numbers as strings'))
    .min(1)
    .optional(),
  /** Allowed `size` (the first is the default); default 720x1280/1280x720, strict models the pro sizes, minimax models 1366x768/1920x1080. */
  sizes: z
    .array(z.string().regex(/^[1-9]\d{1,4}x[1-9]\d{1,4}$/, 'sizes look like 1280x720'))
    .min(1)
    .optional(),
  /** Units per second of video, on top of `units` per task. */
  unitsPerSecond: int(0, 0),
  /** Durable timer between two checks of the upstream job. */
  pollIntervalMs: int(5000, 50),
  /** Whole-task budget from the workflow's start; past it the task ends failed/upstream_timeout. */
  overallTimeoutMs: int(30 * 60_000, 1000),
});

type Raw<S extends z.ZodType> = z.infer<S>;
type ChannelOf<R extends { channels?: unknown }> = NonNullable<R['channels']> extends (infer C)[] ? C : never;
/** A model as Kiln uses it: its provider is its first channel's, and it always has channels. */
type Resolved<R extends { channels?: unknown; provider?: unknown }> = Omit<R, 'channels' | 'provider'> & {
  provider: NonNullable<R['provider']>;
  channels: ChannelOf<R>[];
};

export type ImageModel = Resolved<Raw<typeof ImageModelSchema>>;
export type ChatModel = Resolved<Raw<typeof ChatModelSchema>>;
export type VideoModel = Resolved<Raw<typeof VideoModelSchema>>;
export type Model = ImageModel | ChatModel | VideoModel;
export type ImageChannel = ImageModel['channels'][number];
export type VideoChannel = VideoModel['channels'][number];
export type ChatChannel = ChatModel['channels'][number];
export type AnyChannel = ImageChannel | VideoChannel | ChatChannel;
/** A channel's settings over its model's: what a provider calls (src/config/channels.ts, `routed`). */
export type ImageUpstream = Routed<ImageModel, ImageChannel>;
export type VideoUpstream = Routed<VideoModel, VideoChannel>;
export type ChatUpstream = Routed<ChatModel, ChatChannel>;

const UPSTREAM_KEYS: Record<Model['kind'], string[]> = {
  image: Object.keys(imageUpstream),
  video: Object.keys(videoUpstream),
  chat: Object.keys(chatUpstream),
};

/** A model without `channels` is this one channel, with the model's own upstream settings. */
const DEFAULT_CHANNEL_SETTINGS = z.object(channelOnlyFields).parse({ id: DEFAULT_CHANNEL_ID });

type RawModel = Raw<typeof ImageModelSchema> | Raw<typeof ChatModelSchema> | Raw<typeof VideoModelSchema>;
type Issue = (path: (string | number)[], message: string) => void;

/** The model's channels (its own settings as one channel when it lists none), checked together. */
function resolveChannels(m: RawModel, issue: Issue): Model {
  const own = Object.fromEntries(UPSTREAM_KEYS[m.kind].map((k) => [k, (m as Record<string, unknown>)[k]]));
  const listed = m.channels as AnyChannel[] | undefined;
  const channels: AnyChannel[] = listed ?? [
    {
      ...own,
      ...DEFAULT_CHANNEL_SETTINGS,
    } as AnyChannel,
  ];
  if (!listed && !m.provider) issue(['provider'], 'a model needs provider (or channels, each with its provider)');
  const at = (i: number, field: string) => (listed ? ['channels', i, field] : [field]);
  const ids = new Set<string>();
  channels.forEach((c, i) => {
    if (ids.has(c.id)) issue(at(i, 'id'), `channel id "${c.id}" appears twice`);
    ids.add(c.id);
    if (!c.provider) issue(at(i, 'provider'), 'each channel needs provider');
    else if (c.provider !== 'local' && !c.baseUrl) issue(at(i, 'baseUrl'), `${c.provider} needs baseUrl`);
    if (c.provider) providerChecks(c, (f, msg) => issue(at(i, f), msg));
    if (m.kind === 'image' && m.inline) inlineChecks(c as ImageChannel, (f, msg) => issue(at(i, f), msg));
    if (m.kind === 'video')
      videoChecks(
        videoOptions({ ...m, provider: providerOf(m, channels) } as VideoModel).form,
        listed !== undefined,
        c as VideoChannel,
        (f, msg) => issue(at(i, f), msg),
      );
  });
  const comfy = m.kind === 'video' ? videoOptions({ ...m, provider: providerOf(m, channels) } as VideoModel) : null;
  channels.forEach((c, i) => {
    if (c.provider !== 'comfyui' || m.kind === 'chat') return;
    const kind = comfy ? { kind: 'video' as const, ...comfy } : { kind: 'image' as const };
    for (const r of comfyuiChannelIssues(c as ImageChannel | VideoChannel, kind)) issue(at(i, r.field), r.message);
  });
  if (m.kind === 'image') {
    jobChecks(m, channels, listed, issue);
    replicateImageChecks(m, channels as ImageChannel[], listed, issue);
  }
  if (m.kind === 'video') {
    strictChecks(m, issue);
    veoChecks(videoOptions({ ...m, provider: providerOf(m, channels) } as VideoModel), channels, listed, issue);
    videoProviderChecks(
      videoOptions({ ...m, provider: providerOf(m, channels) } as VideoModel),
      channels,
      listed,
      issue,
    );
  }
  return { ...m, provider: providerOf(m, channels), channels } as Model;
}

/** The model's provider: its own, else its first channel's (highest priority). */
function providerOf(m: RawModel, channels: AnyChannel[]): string {
  return m.provider ?? [...channels].sort((a, b) => b.priority - a.priority)[0]!.provider;
}

const MAX_JOB_CHECKS = 5000;

/** An image model's channels all answer within the call, or all run jobs: the workflow takes one path. */
function jobChecks(m: Raw<typeof ImageModelSchema>, channels: AnyChannel[], listed: unknown, issue: Issue) {
  const jobs = channels.filter((c) => imageRunsJobs(c.provider));
  if (jobs.length && jobs.length < channels.length)
    issue(
      listed ? ['channels'] : ['provider'],
      `channels whose upstream answers later (${[...new Set(jobs.map((c) => c.provider))].join(', ')}) ` +
        'cannot share a model with channels that answer within the call',
    );
  if (jobs.length && m.inline) issue(['inline'], `${jobs[0]!.provider} runs jobs, which an inline model cannot`);
  // A workflow an older release started pays each check a timer and an activity in its history
  // (past Temporal's history limit it could not end); a job watch pays an upstream request.
  if (jobs.length && m.overallTimeoutMs / m.pollIntervalMs > MAX_JOB_CHECKS)
    issue(
      ['pollIntervalMs'],
      `overallTimeoutMs / pollIntervalMs allows ${Math.ceil(m.overallTimeoutMs / m.pollIntervalMs)} checks of a job; ` +
        `at most ${MAX_JOB_CHECKS}: raise pollIntervalMs or lower overallTimeoutMs`,
    );
}

/**
 * An image model's `imageSizes` tiers reach a replicate channel only through its
 * inputNames.imageSize: without one, OpenAI Images' `size` and `quality` would pick a tier the
 * channel cannot send, so the model must offer none.
 */
function replicateImageChecks(
  m: Raw<typeof ImageModelSchema>,
  channels: ImageChannel[],
  listed: unknown,
  issue: Issue,
) {
  channels.forEach((c, i) => {
    if (c.provider === 'replicate' && !c.inputNames?.imageSize && m.imageSizes.length)
      issue(
        listed ? ['channels', i, 'inputNames'] : ['imageSizes'],
        'a replicate channel without inputNames.imageSize cannot send the tiers of imageSizes: set imageSizes to [] ' +
          "or inputNames.imageSize to the model's resolution input",
      );
  });
}

function inlineChecks(c: ImageChannel, issue: (field: string, message: string) => void) {
  if (c.timeoutMs > INLINE_MAX_TIMEOUT_MS)
    issue(
      'timeoutMs',
      `an inline model needs timeoutMs ≤ ${INLINE_MAX_TIMEOUT_MS} (got ${c.timeoutMs}): a cancel waits for the call`,
    );
}

/**
 * A video model's channels must each take every option the model accepts: a workflow-node channel
 * beside other providers maps each request field to a node, and a model that takes the caller's
 * `nodeInfoList` routes only over workflow-node (or local) channels.
 */
function videoChecks(
  form: 'video' | 'workflow-node',
  several: boolean,
  c: VideoChannel,
  issue: (field: string, message: string) => void,
) {
  if (c.provider === 'workflow-node' && !c.workflowId) issue('workflowId', 'workflow-node models need workflowId');
  if (several && form === 'workflow-node' && c.provider === 'openai-videos')
    issue('provider', 'openai-videos cannot take nodeInfoList, which this workflow-node model accepts');
  if (several && form === 'video' && c.provider === 'workflow-node')
    for (const field of ['prompt', 'image', 'seconds', 'size'] as const)
      if (!c.nodes[field])
        issue('nodes', `a workflow-node channel of a video model needs nodes.${field}: the model accepts ${field}`);
}

/**
 * A gemini-veo channel must be able to send every `seconds` and `size` the model accepts (Veo's
 * durations and aspect ratios), and takes no `nodeInfoList`.
 */
function veoChecks(
  opts: ReturnType<typeof videoOptions>,
  channels: AnyChannel[],
  listed: AnyChannel[] | undefined,
  issue: Issue,
) {
  channels.forEach((c, i) => {
    if (c.provider !== 'gemini-veo') return;
    const at = (field: string) => (listed ? ['channels', i, 'provider'] : [field]);
    if (opts.form === 'workflow-node') issue(at('form'), 'gemini-veo cannot take nodeInfoList (form workflow-node)');
    for (const r of veoRefusals(opts)) issue(at(r.field), r.message);
  });
}

/** Video channels of providers with limits of their own (src/config/video-makers.ts). */
function videoProviderChecks(
  offer: VideoOffer,
  channels: AnyChannel[],
  listed: AnyChannel[] | undefined,
  issue: Issue,
) {
  channels.forEach((c, i) => {
    const at = (field: string) => (listed ? ['channels', i, 'provider'] : [field]);
    for (const r of videoMakerRefusals(c.provider, offer, c.upstreamModel ?? '')) issue(at(r.field), r.message);
  });
}

function strictChecks(m: Raw<typeof VideoModelSchema>, issue: Issue) {
  const pro = { seconds: PRO_SECONDS as readonly string[], sizes: PRO_SIZES as readonly string[] };
  for (const field of ['seconds', 'sizes'] as const) {
    const bad = m.strict ? m[field]?.find((v) => !pro[field].includes(v)) : undefined;
    if (bad) issue([field], `"${bad}" is not allowed for a strict (pro) model; allowed: ${pro[field].join(', ')}`);
  }
}

/** A ComfyUI box runs one prompt at a time: its channels default to `concurrency: 1`. */
function comfyuiDefaults(raw: unknown): unknown {
  const one = (c: unknown) => {
    const o = c as Record<string, unknown> | null;
    return o && typeof o === 'object' && o.provider === 'comfyui' && o.concurrency === undefined
      ? { ...o, concurrency: 1 }
      : c;
  };
  const m = one(raw) as { channels?: unknown };
  return Array.isArray(m?.channels) ? { ...m, channels: m.channels.map(one) } : m;
}

// A model without `kind` is an image model, as in the first models files.
const ModelSchema = z
  .preprocess(
    (v) => {
      const withKind = v && typeof v === 'object' && !('kind' in v) ? { ...v, kind: 'image' } : v;
      const kind = (withKind as { kind?: unknown } | null)?.kind;
      return typeof kind === 'string' && kind in UPSTREAM_KEYS
        ? comfyuiDefaults(inheritUpstreamSettings(withKind, UPSTREAM_KEYS[kind as Model['kind']]))
        : withKind;
    },
    z.discriminatedUnion('kind', [ImageModelSchema, ChatModelSchema, VideoModelSchema]),
  )
  .transform((m, ctx) => resolveChannels(m, (path, message) => ctx.addIssue({ code: 'custom', path, message })));

const ModelsFileSchema = z.object({ models: z.array(ModelSchema).min(1) });

/** Issues of reading `workflowFile`s, as the message of a ConfigError. */
function withFiles<T>(raw: T, baseDir: string, read: (raw: unknown, issue: Issue) => unknown, lead = ''): unknown {
  const issues: string[] = [];
  const out = read(raw, (path, message) => issues.push(`${path.join('.')}: ${message}`));
  if (issues.length) throw new ConfigError(`${lead}${issues.join('; ')}`);
  return out;
}

/** One model from its models-file entry (tests and the built-in defaults); `baseDir` for its workflowFile. */
export function parseModel(raw: unknown, baseDir = process.cwd()): Model {
  const read = withFiles(raw, baseDir, (r, issue) => readWorkflowFiles(r, baseDir, issue));
  const parsed = ModelSchema.safeParse(read);
  if (!parsed.success)
    throw new ConfigError(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
  return parsed.data;
}

/** The models file's models; `baseDir` (the file's directory) is where relative workflowFile paths start. */
export function parseModels(raw: unknown, source: string, baseDir = process.cwd()): Model[] {
  const models = (raw as { models?: unknown } | null)?.models;
  const json = Array.isArray(models)
    ? {
        ...(raw as object),
        models: withFiles(
          models,
          baseDir,
          (r, issue) => readWorkflowFiles(r, baseDir, issue, ['models']),
          `${source}: `,
        ),
      }
    : raw;
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
  }
  return parsed.data.models;
}

export function modelsOfKind<K extends Model['kind']>(models: Model[], kind: K): Extract<Model, { kind: K }>[] {
  return models.filter((m): m is Extract<Model, { kind: K }> => m.kind === kind);
}

/** Activity task queue of one model: concurrency and rate limits are per model. */
export function modelTaskQueue(baseQueue: string, modelId: string): string {
  return `${baseQueue}.model.${modelId}`;
}

/**
 * The queue a new task's upstream calls go to (TEMPORAL_UPSTREAM_QUEUE): the model's own, or the
 * workflow's (eager activity execution; the worker serves both, so a switch strands no task).
 */
export function upstreamQueue(t: { taskQueue: string; upstreamQueue: 'model' | 'workflow' }, modelId: string): string {
  return t.upstreamQueue === 'workflow' ? t.taskQueue : modelTaskQueue(t.taskQueue, modelId);
}

/** A video model's allowed `seconds` and `size` values; the first of each is the default. */
export function videoOptions(m: VideoModel): VideoOffer {
  const maker = VIDEO_MAKERS[m.provider];
  return {
    seconds:
      m.seconds ??
      (m.strict
        ? PRO_SECONDS
        : (makerSeconds(m.provider, m.upstreamModel ?? m.channels?.[0]?.upstreamModel) ?? ['4', '8', '12'])),
    sizes: m.sizes ?? (m.strict ? PRO_SIZES : (maker?.sizes ?? ['720x1280', '1280x720'])),
    form: m.form ?? (m.provider === 'workflow-node' ? 'workflow-node' : 'video'),
  };
}
