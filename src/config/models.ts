// The models file: each model's kind, request options and the upstreams (channels) it routes over.
// Parsed once at start; anything malformed stops start-up with a message naming the field.
import { z } from 'zod';
import { channelOnlyFields, DEFAULT_CHANNEL_ID, inheritUpstreamSettings } from './channels.js';
import { PRO_SECONDS, PRO_SIZES } from '../shared/video-task.js';
import { providerChecks } from './providers.js';
import { makerSeconds, VIDEO_MAKERS, type VideoOffer } from './video-makers.js';
import { comfyuiChannelIssues } from '../shared/comfyui.js';
import { readWorkflowFiles } from './workflow-files.js';
import {
  ChatModelSchema,
  ImageModelSchema,
  UPSTREAM_KEYS,
  VideoModelSchema,
  type AnyChannel,
  type ImageChannel,
  type Model,
  type RawModel,
  type VideoChannel,
  type VideoModel,
} from './model-schemas.js';
import {
  comfyuiDefaults,
  inlineChecks,
  jobChecks,
  replicateImageChecks,
  strictChecks,
  veoChecks,
  videoChecks,
  videoProviderChecks,
  type Issue,
} from './model-checks.js';

export type {
  AnyChannel,
  ChatChannel,
  ChatModel,
  ChatUpstream,
  ImageChannel,
  ImageModel,
  ImageUpstream,
  Model,
  VideoChannel,
  VideoModel,
  VideoUpstream,
} from './model-schemas.js';
export { INLINE_MAX_TIMEOUT_MS } from './model-checks.js';

export class ConfigError extends Error {}

/** A model without `channels` is this one channel, with the model's own upstream settings. */
const DEFAULT_CHANNEL_SETTINGS = z.object(channelOnlyFields).parse({ id: DEFAULT_CHANNEL_ID });

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
  const provider = providerOf(m, channels);
  const offer = m.kind === 'video' ? videoOptions({ ...m, provider } as VideoModel) : null;
  const ids = new Set<string>();
  channels.forEach((c, i) => {
    if (ids.has(c.id)) issue(at(i, 'id'), `channel id "${c.id}" appears twice`);
    ids.add(c.id);
    if (!c.provider) issue(at(i, 'provider'), 'each channel needs provider');
    else if (c.provider !== 'local' && !c.baseUrl) issue(at(i, 'baseUrl'), `${c.provider} needs baseUrl`);
    if (c.provider) providerChecks(c, (f, msg) => issue(at(i, f), msg));
    if (m.kind === 'image' && m.inline) inlineChecks(c as ImageChannel, (f, msg) => issue(at(i, f), msg));
    if (offer) videoChecks(offer.form, listed !== undefined, c as VideoChannel, (f, msg) => issue(at(i, f), msg));
    if (c.provider === 'comfyui' && m.kind !== 'chat') {
      const kind = offer ? { kind: 'video' as const, ...offer } : { kind: 'image' as const };
      for (const r of comfyuiChannelIssues(c as ImageChannel | VideoChannel, kind)) issue(at(i, r.field), r.message);
    }
  });
  if (m.kind === 'image') {
    jobChecks(m, channels, listed, issue);
    replicateImageChecks(m, channels as ImageChannel[], listed, issue);
  }
  if (m.kind === 'video' && offer) {
    strictChecks(m, issue);
    veoChecks(offer, channels, listed, issue);
    videoProviderChecks(offer, channels, listed, issue);
  }
  return { ...m, provider, channels } as Model;
}

/** The model's provider: its own, else its first channel's (highest priority). */
function providerOf(m: RawModel, channels: AnyChannel[]): string {
  return m.provider ?? [...channels].sort((a, b) => b.priority - a.priority)[0]!.provider;
}

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
