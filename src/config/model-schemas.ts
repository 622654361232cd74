// The models file's schemas (zod) and the model and channel types Kiln uses; models.ts resolves
// a parsed entry's channels and checks them together.
import { z } from 'zod';
import { channelOnlyFields, type Routed, taskUpstreamFields, upstreamFields } from './channels.js';
import { IMAGE_PROVIDERS, VIDEO_PROVIDERS } from './providers.js';
import { comfyuiFields, inputName, int, openaiImagesFields } from './provider-fields.js';

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

export const ImageModelSchema = z.object({
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
  /** Providers that answer later (fal, replicate, dashscope, comfyui): the wait between two checks of the job (activities/job-watch.ts). */
  pollIntervalMs: int(2000, 50),
  /** Providers that answer later: whole-task budget from the workflow's start (failed / upstream_timeout past it). */
  overallTimeoutMs: int(10 * 60_000, 1000),
});

/** Chat is synchronous (no workflow): its limits bound what one request may hold in memory. */
export const ChatModelSchema = z.object({
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

export const VideoModelSchema = z.object({
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
  /** The wait between two checks of the upstream job (activities/job-watch.ts). */
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

export type RawImageModel = Raw<typeof ImageModelSchema>;
export type RawVideoModel = Raw<typeof VideoModelSchema>;
export type RawModel = RawImageModel | Raw<typeof ChatModelSchema> | RawVideoModel;

/** The upstream settings of each kind: a model's own, inherited by the channels it lists. */
export const UPSTREAM_KEYS: Record<Model['kind'], string[]> = {
  image: Object.keys(imageUpstream),
  video: Object.keys(videoUpstream),
  chat: Object.keys(chatUpstream),
};
