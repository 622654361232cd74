// The video providers a worker runs, by provider name.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../src/infra/project-root.js';
import type { VideoModel } from '../../src/config/env.js';
import type { BlobStore } from '../../src/blobs/local.js';
import type { SafeFetch } from '../../src/infra/safe-fetch.js';
import { referenceFetcher } from '../image/references.js';
import { GeminiVeoVideoProvider } from './gemini-veo.js';
import { LocalVideoProvider } from './local.js';
import { OpenAIVideoProvider } from './openai.js';
import type { VideoProvider } from './types.js';
import { WorkflowNodeVideoProvider } from './workflow-node.js';

const BOOTSTRAPPED_FFMPEG = join(PROJECT_ROOT, '.tools', 'bin', 'ffmpeg');

/** FFMPEG_BIN, else the one scripts/bootstrap.sh linked into .tools/bin, else `ffmpeg` on PATH. */
export function ffmpegBinary(env: NodeJS.ProcessEnv): string {
  return env.FFMPEG_BIN || (existsSync(BOOTSTRAPPED_FFMPEG) ? BOOTSTRAPPED_FFMPEG : 'ffmpeg');
}

/** `fetchReference`: the SSRF-guarded downloader of reference images (gemini-veo sends their bytes). */
export function videoProviders(
  blobs: BlobStore,
  env: NodeJS.ProcessEnv,
  fetchReference: SafeFetch = referenceFetcher(),
): Record<VideoModel['provider'], VideoProvider> {
  return {
    local: new LocalVideoProvider(blobs, ffmpegBinary(env)),
    'openai-videos': new OpenAIVideoProvider(blobs),
    'workflow-node': new WorkflowNodeVideoProvider(blobs),
    'gemini-veo': new GeminiVeoVideoProvider(blobs, fetchReference),
  };
}
