// Checks of a model's channels taken together, beyond each field's own schema: what one model may
// mix, what an inline model may call, what each video provider can send. Each names the field.
import { PRO_SECONDS, PRO_SIZES } from '../shared/video-task.js';
import { imageRunsJobs } from './providers.js';
import { veoRefusals } from '../shared/veo.js';
import { videoMakerRefusals, type VideoOffer } from './video-makers.js';
import type { AnyChannel, ImageChannel, RawImageModel, RawVideoModel, VideoChannel } from './model-schemas.js';

export type Issue = (path: (string | number)[], message: string) => void;

/**
 * The longest call an inline image model may make: a workflow task cannot take a signal or a
 * cancel while its local activity runs, and the owner's cancel must take effect within a second.
 */
export const INLINE_MAX_TIMEOUT_MS = 1000;

const MAX_JOB_CHECKS = 5000;

/** An image model's channels all answer within the call, or all run jobs: the workflow takes one path. */
export function jobChecks(m: RawImageModel, channels: AnyChannel[], listed: unknown, issue: Issue) {
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
export function replicateImageChecks(m: RawImageModel, channels: ImageChannel[], listed: unknown, issue: Issue) {
  channels.forEach((c, i) => {
    if (c.provider === 'replicate' && !c.inputNames?.imageSize && m.imageSizes.length)
      issue(
        listed ? ['channels', i, 'inputNames'] : ['imageSizes'],
        'a replicate channel without inputNames.imageSize cannot send the tiers of imageSizes: set imageSizes to [] ' +
          "or inputNames.imageSize to the model's resolution input",
      );
  });
}

export function inlineChecks(c: ImageChannel, issue: (field: string, message: string) => void) {
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
export function videoChecks(
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
export function veoChecks(opts: VideoOffer, channels: AnyChannel[], listed: AnyChannel[] | undefined, issue: Issue) {
  channels.forEach((c, i) => {
    if (c.provider !== 'gemini-veo') return;
    const at = (field: string) => (listed ? ['channels', i, 'provider'] : [field]);
    if (opts.form === 'workflow-node') issue(at('form'), 'gemini-veo cannot take nodeInfoList (form workflow-node)');
    for (const r of veoRefusals(opts)) issue(at(r.field), r.message);
  });
}

/** Video channels of providers with limits of their own (src/config/video-makers.ts). */
export function videoProviderChecks(
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

export function strictChecks(m: RawVideoModel, issue: Issue) {
  const pro = { seconds: PRO_SECONDS as readonly string[], sizes: PRO_SIZES as readonly string[] };
  for (const field of ['seconds', 'sizes'] as const) {
    const bad = m.strict ? m[field]?.find((v) => !pro[field].includes(v)) : undefined;
    if (bad) issue([field], `"${bad}" is not allowed for a strict (pro) model; allowed: ${pro[field].join(', ')}`);
  }
}

/** A ComfyUI box runs one prompt at a time: its channels default to `concurrency: 1`. */
export function comfyuiDefaults(raw: unknown): unknown {
  const one = (c: unknown) => {
    const o = c as Record<string, unknown> | null;
    return o && typeof o === 'object' && o.provider === 'comfyui' && o.concurrency === undefined
      ? { ...o, concurrency: 1 }
      : c;
  };
  const m = one(raw) as { channels?: unknown };
  return Array.isArray(m?.channels) ? { ...m, channels: m.channels.map(one) } : m;
}
