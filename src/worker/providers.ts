// The providers a worker runs, by the models file's `provider`: the one place that names them all.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../infra/project-root.js';
import type { ImageModel, VideoModel } from '../config/models.js';
import type { BlobStore } from '../blobs/local.js';
import type { SafeFetch } from '../infra/safe-fetch.js';
import { referenceFetcher } from '../../activities/providers/references.js';
import type { ImageProvider, VideoProvider } from '../../activities/providers/contract.js';

const BOOTSTRAPPED_FFMPEG = join(PROJECT_ROOT, '.tools', 'bin', 'ffmpeg');

/** FFMPEG_BIN, else the one scripts/bootstrap.sh linked into .tools/bin, else `ffmpeg` on PATH. */
export function ffmpegBinary(env: NodeJS.ProcessEnv): string {
  return env.FFMPEG_BIN || (existsSync(BOOTSTRAPPED_FFMPEG) ? BOOTSTRAPPED_FFMPEG : 'ffmpeg');
}

/** What providers are built with: Kiln's blob store, configured upstream keys and the environment. */
export interface ProviderDeps {
  blobs: BlobStore;
  /** Configured upstream keys (`credential: {env}`), by variable name. */
  keys: Record<string, string>;
  env: NodeJS.ProcessEnv;
  /** The SSRF-guarded downloader of reference images (providers that send their bytes). */
  fetchReference?: SafeFetch;
}

type Loader<P> = (deps: Required<ProviderDeps>) => Promise<P>;
// Each provider is imported only when a configured model names it: together they cost a worker
// ~14 MiB (the openai SDK alone ~5), which a deployment of one provider should not carry (issue 42).
const IMAGE: Record<ImageModel['provider'], Loader<ImageProvider>> = {
  local: async (d) => new (await import('../../activities/providers/local/image.js')).LocalImageProvider(d.blobs),
  gemini: async ({ blobs, keys, fetchReference }) =>
    new (await import('../../activities/providers/gemini/image.js')).GeminiImageProvider({
      blobs,
      keys,
      fetchReference,
    }),
  dashscope: async (d) =>
    new (await import('../../activities/providers/dashscope/image.js')).DashScopeImageProvider(d.blobs),
  'openai-images': async ({ blobs, fetchReference }) =>
    new (await import('../../activities/providers/openai-images/image.js')).OpenAIImagesProvider({
      blobs,
      fetchReference,
    }),
  fal: async ({ blobs, fetchReference }) =>
    new (await import('../../activities/providers/fal/image.js')).FalImageProvider({ blobs, fetchReference }),
  replicate: async (d) =>
    new (await import('../../activities/providers/replicate/image.js')).ReplicateImageProvider(
      d.blobs,
      d.fetchReference,
    ),
  comfyui: async ({ blobs, fetchReference }) =>
    new (await import('../../activities/providers/comfyui/image.js')).ComfyImageProvider({ blobs, fetchReference }),
};

const VIDEO: Record<VideoModel['provider'], Loader<VideoProvider>> = {
  local: async (d) =>
    new (await import('../../activities/providers/local/video.js')).LocalVideoProvider(d.blobs, ffmpegBinary(d.env)),
  'openai-videos': async (d) =>
    new (await import('../../activities/providers/openai-videos/video.js')).OpenAIVideoProvider(d.blobs),
  'workflow-node': async (d) =>
    new (await import('../../activities/providers/workflow-node/video.js')).WorkflowNodeVideoProvider(d.blobs),
  'gemini-veo': async (d) =>
    new (await import('../../activities/providers/gemini/veo.js')).GeminiVeoVideoProvider(d.blobs, d.fetchReference),
  dashscope: async (d) =>
    new (await import('../../activities/providers/dashscope/video.js')).DashScopeVideoProvider(d.blobs),
  fal: async (d) => new (await import('../../activities/providers/fal/video.js')).FalVideoProvider(d.blobs),
  replicate: async (d) =>
    new (await import('../../activities/providers/replicate/video.js')).ReplicateVideoProvider(d.blobs),
  minimax: async (d) => new (await import('../../activities/providers/minimax/video.js')).MinimaxVideoProvider(d.blobs),
  kling: async (d) => new (await import('../../activities/providers/kling/video.js')).KlingVideoProvider(d.blobs),
  runway: async (d) => new (await import('../../activities/providers/runway/video.js')).RunwayVideoProvider(d.blobs),
  seedance: async (d) =>
    new (await import('../../activities/providers/seedance/video.js')).SeedanceVideoProvider(d.blobs),
  comfyui: async ({ blobs, fetchReference }) =>
    new (await import('../../activities/providers/comfyui/video.js')).ComfyVideoProvider({ blobs, fetchReference }),
};

async function load<N extends string, P>(
  loaders: Record<N, Loader<P>>,
  names: Iterable<N>,
  deps: ProviderDeps,
): Promise<Partial<Record<N, P>>> {
  const full = { ...deps, fetchReference: deps.fetchReference ?? referenceFetcher() };
  const unique = [...new Set(names)].filter((n) => n in loaders);
  return Object.fromEntries(await Promise.all(unique.map(async (n) => [n, await loaders[n](full)]))) as Partial<
    Record<N, P>
  >;
}

/** The image providers a worker runs: those `names` (the configured models' channels) name. */
export const imageProviders = (deps: ProviderDeps, names: Iterable<ImageModel['provider']> = IMAGE_NAMES) =>
  load(IMAGE, names, deps);

/** The video providers a worker runs: those `names` (the configured models' channels) name. */
export const videoProviders = (deps: ProviderDeps, names: Iterable<VideoModel['provider']> = VIDEO_NAMES) =>
  load(VIDEO, names, deps);

export const IMAGE_NAMES = Object.keys(IMAGE) as ImageModel['provider'][];
export const VIDEO_NAMES = Object.keys(VIDEO) as VideoModel['provider'][];
