// What the models file knows of each provider beside its name: the kinds it serves, whether its
// image upstream answers later (a job) or within the request, and the fields a channel of it must
// have. The worker's registry (src/worker/providers.ts) holds the code; this is the pure side the
// API, the workflow policy and start-up checks read.

export const IMAGE_PROVIDERS = [
  'local',
  'gemini',
  'openai-images',
  'fal',
  'replicate',
  'dashscope',
  'comfyui',
] as const;
export const VIDEO_PROVIDERS = [
  'local',
  'openai-videos',
  'workflow-node',
  'gemini-veo',
  'fal',
  'replicate',
  'dashscope',
  'minimax',
  'kling',
  'runway',
  'seedance',
  'comfyui',
] as const;
export type ImageProviderName = (typeof IMAGE_PROVIDERS)[number];
export type VideoProviderName = (typeof VIDEO_PROVIDERS)[number];

/** Image providers whose upstream answers later: their tasks create a job and watch it (activities/job-watch.ts). */
const IMAGE_JOB_PROVIDERS: ReadonlySet<string> = new Set<ImageProviderName>([
  'fal',
  'replicate',
  'dashscope',
  'comfyui',
]);

export function imageRunsJobs(provider: string): boolean {
  return IMAGE_JOB_PROVIDERS.has(provider);
}

/** What a provider's channel checks see: the channel's settings over its model's. */
export interface CheckedChannel {
  provider: string;
  baseUrl?: string | undefined;
  upstreamModel?: string | undefined;
  [field: string]: unknown;
}

type ChannelCheck = (c: CheckedChannel, issue: (field: string, message: string) => void) => void;

const needs =
  (...fields: string[]): ChannelCheck =>
  (c, issue) => {
    for (const f of fields) if (c[f] === undefined || c[f] === '') issue(f, `${c.provider} needs ${f}`);
  };

/** A provider's own required fields, beyond `baseUrl` (which every provider but local needs). */
/** Replicate's model references: `owner/name` (its predictions route), `owner/name:version` or a bare version id. */
export const REPLICATE_MODEL = /^(?:[A-Za-z0-9][\w.-]{0,99}\/[\w.-]{1,100}(?::[0-9a-f]{64})?|[0-9a-f]{64})$/;

const replicateCheck: ChannelCheck = (c, issue) => {
  needs('upstreamModel')(c, issue);
  if (typeof c.upstreamModel === 'string' && c.upstreamModel !== '' && !REPLICATE_MODEL.test(c.upstreamModel))
    issue('upstreamModel', 'replicate takes owner/name, owner/name:version or a 64-hex version id');
};

/** Kling signs every call with the access and secret keys: a channel that sends none cannot be authorised. */
const klingCheck: ChannelCheck = (c, issue) => {
  needs('upstreamModel')(c, issue);
  if (c.credential === 'none')
    issue('credential', 'kling needs a credential: {"env": NAME} holding ACCESS_KEY:SECRET_KEY (or passthrough)');
};

const CHANNEL_CHECKS: Partial<Record<ImageProviderName | VideoProviderName, ChannelCheck>> = {
  fal: needs('upstreamModel'),
  replicate: replicateCheck,
  dashscope: needs('upstreamModel'),
  // The model's name decides what a channel can send (its resolutions, durations, whether it takes an image).
  minimax: needs('upstreamModel'),
  kling: klingCheck,
  runway: needs('upstreamModel'),
  seedance: needs('upstreamModel'),
};

export function providerChecks(c: CheckedChannel, issue: (field: string, message: string) => void): void {
  CHANNEL_CHECKS[c.provider as ImageProviderName]?.(c, issue);
}
