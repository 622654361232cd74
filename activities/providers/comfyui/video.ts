// ComfyUI video models: the channel's stored workflow with the prompt, reference image, seconds and
// size set on the nodes the models file names, and (form workflow-node) the caller's nodeInfoList
// within the model's allowedInputs; the saved video (or animated image) copied from GET /view into
// Kiln's blob store, and in the workflow-node form every output file as results[*].url.
import type { BlobStore } from '../../../src/blobs/local.js';
import type { SafeFetch } from '../../../src/infra/safe-fetch.js';
import { videoInputs } from '../../../src/shared/comfyui.js';
import type { VideoCheck, VideoJob, VideoOutput, VideoResult } from '../../../src/shared/video-task.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import type { Dispatching } from '../../upstream-call.js';
import type { Lookup, VideoCall, VideoFinished, VideoProvider } from '../contract.js';
import { copyToBlobs } from '../http.js';
import { viewHeaders, viewUrl } from './api.js';
import { cancelPrompt, checkPrompt, createPrompt, lookupPrompt, uploadReference } from './jobs.js';

/** Output file types that are moving pictures, the video containers first. */
const MOVING = ['mp4', 'webm', 'mov', 'mkv', 'webp', 'gif', 'png'];

export class ComfyVideoProvider implements VideoProvider {
  constructor(private readonly deps: { blobs: BlobStore; fetchReference: SafeFetch }) {}

  create(call: VideoCall & { dispatching: Dispatching }): Promise<VideoJob> {
    return createPrompt(call, async () => {
      const r = call.input.request;
      const image = r.image ? await uploadReference(call, this.deps.fetchReference, { data: r.image }) : undefined;
      return videoInputs(r, call.model.nodes, image);
    });
  }

  check(call: VideoCall & { job: VideoJob }): Promise<VideoCheck> {
    return checkPrompt(call, call.job);
  }

  async fetch(call: VideoCall & { job: VideoJob; outputs: VideoOutput[]; results: boolean }): Promise<VideoFinished> {
    const video = pickVideo(call.outputs);
    if (!video) throw new UpstreamFailure('upstream_error', 'the ComfyUI prompt wrote no file');
    const copy = (o: VideoOutput) =>
      copyToBlobs(this.deps.blobs, viewUrl(call, o), o.fileType, call.signal, viewHeaders(call), call.key);
    if (!call.results) return { video_url: (await copy(video)).url };
    const results: VideoResult[] = [];
    let videoUrl: string | undefined;
    for (const o of call.outputs) {
      const stored = await copy(o);
      if (o === video) videoUrl = stored.url;
      results.push({ ...stored, ...(o.nodeId ? { node_id: o.nodeId } : {}) });
    }
    return { ...(videoUrl ? { video_url: videoUrl } : {}), results };
  }

  cancel(call: VideoCall & { job: VideoJob }): Promise<void> {
    return cancelPrompt(call, call.job);
  }

  lookup(call: VideoCall): Promise<Lookup> {
    return lookupPrompt(call);
  }
}

/** The output that is the task's video: a video file first, else an animated image, else the first file. */
export function pickVideo(outputs: VideoOutput[]): VideoOutput | undefined {
  const rank = (o: VideoOutput) => {
    const i = MOVING.indexOf(o.fileType ?? '');
    return i < 0 ? MOVING.length : i;
  };
  return [...outputs].sort((a, b) => rank(a) - rank(b))[0];
}
