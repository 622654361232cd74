// The providers a worker runs, by the models file's `provider`: the one place that names them all.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../infra/project-root.js';
import type { ImageModel, VideoModel } from '../config/models.js';
import type { BlobStore } from '../blobs/local.js';
import type { SafeFetch } from '../infra/safe-fetch.js';
import { referenceFetcher } from '../../activities/providers/references.js';
import { GeminiVeoVideoProvider } from '../../activities/providers/gemini/veo.js';
import { LocalVideoProvider } from '../../activities/providers/local/video.js';
import { OpenAIVideoProvider } from '../../activities/providers/openai-videos/video.js';
import type { ImageProvider, VideoProvider } from '../../activities/providers/contract.js';
import { DashScopeImageProvider } from '../../activities/providers/dashscope/image.js';
import { DashScopeVideoProvider } from '../../activities/providers/dashscope/video.js';
import { KlingVideoProvider } from '../../activities/providers/kling/video.js';
import { GeminiImageProvider } from '../../activities/providers/gemini/image.js';
import { FalImageProvider } from '../../activities/providers/fal/image.js';
import { FalVideoProvider } from '../../activities/providers/fal/video.js';
import { MinimaxVideoProvider } from '../../activities/providers/minimax/video.js';
import { LocalImageProvider } from '../../activities/providers/local/image.js';
import { OpenAIImagesProvider } from '../../activities/providers/openai-images/image.js';
import { ReplicateImageProvider } from '../../activities/providers/replicate/image.js';
import { ReplicateVideoProvider } from '../../activities/providers/replicate/video.js';
import { RunwayVideoProvider } from '../../activities/providers/runway/video.js';
import { SeedanceVideoProvider } from '../../activities/providers/seedance/video.js';
import { WorkflowNodeVideoProvider } from '../../activities/providers/workflow-node/video.js';
import { ComfyImageProvider } from '../../activities/providers/comfyui/image.js';
import { ComfyVideoProvider } from '../../activities/providers/comfyui/video.js';

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

/** The image providers a worker runs, by the models file's `provider`. */
export function imageProviders(deps: ProviderDeps): Partial<Record<ImageModel['provider'], ImageProvider>> {
  const { blobs, keys, fetchReference = referenceFetcher() } = deps;
  return {
    local: new LocalImageProvider(blobs),
    gemini: new GeminiImageProvider({ blobs, keys, fetchReference }),
    dashscope: new DashScopeImageProvider(blobs),
    'openai-images': new OpenAIImagesProvider({ blobs, fetchReference }),
    fal: new FalImageProvider({ blobs, fetchReference }),
    replicate: new ReplicateImageProvider(blobs, fetchReference),
    comfyui: new ComfyImageProvider({ blobs, fetchReference }),
  };
}

/** The video providers a worker runs, by the models file's `provider`. */
export function videoProviders(deps: ProviderDeps): Partial<Record<VideoModel['provider'], VideoProvider>> {
  const { blobs, env, fetchReference = referenceFetcher() } = deps;
  return {
    local: new LocalVideoProvider(blobs, ffmpegBinary(env)),
    'openai-videos': new OpenAIVideoProvider(blobs),
    'workflow-node': new WorkflowNodeVideoProvider(blobs),
    'gemini-veo': new GeminiVeoVideoProvider(blobs, fetchReference),
    dashscope: new DashScopeVideoProvider(blobs),
    fal: new FalVideoProvider(blobs),
    replicate: new ReplicateVideoProvider(blobs),
    minimax: new MinimaxVideoProvider(blobs),
    kling: new KlingVideoProvider(blobs),
    runway: new RunwayVideoProvider(blobs),
    seedance: new SeedanceVideoProvider(blobs),
    comfyui: new ComfyVideoProvider({ blobs, fetchReference }),
  };
}
