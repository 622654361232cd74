// Gemini API Veo upstream, in the wire shapes Google documents (and @google/genai's
// models.generateVideos / operations.getVideosOperation speak): POST
// {baseUrl}/v1beta/models/{model}:predictLongRunning, then GET {baseUrl}/v1beta/{operation name}
// until `done`, then the video at response.generateVideoResponse.generatedSamples[0].video.uri.
// The key goes in x-goog-api-key, never in a URL. Google has no cancel for these operations: a
// canceled task stops checking and the job may run on (the provider has no `cancel`).
import type { BlobStore } from '../../../src/blobs/local.js';
import type { SafeFetch } from '../../../src/infra/safe-fetch.js';
import { upstreamMessage } from '../../../src/upstreams/answers.js';
import { rpcName, rpcToCode, veoParameters } from '../../../src/shared/veo.js';
import type { VideoCheck, VideoJob, VideoOutput } from '../../../src/shared/video-task.js';
import { fetchText, parseUpstreamJson } from '../../../src/upstreams/http.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import { MAX_VIDEO_BYTES } from '../http.js';
import type { VideoCall, VideoFinished, VideoProvider } from '../contract.js';
import { downloadReference } from '../references.js';
import { downloadVeoVideo, VeoHttpFailure } from './veo-http.js';

/** A google.longrunning.Operation as the Gemini API answers it. */
export interface VeoOperation {
  name?: string;
  done?: boolean;
  error?: { code?: number; message?: string };
  response?: {
    generateVideoResponse?: {
      generatedSamples?: { video?: { uri?: string; encodedVideo?: string; encoding?: string } }[];
      raiMediaFilteredCount?: number;
      raiMediaFilteredReasons?: string[];
    };
  };
}

/**
 * Operation names are paths under /v1beta (`models/{model}/operations/{id}`): plain segments only,
 * so an upstream's answer cannot point a check elsewhere on the host.
 */
const OPERATION_NAME = /^(?!.*(^|\/)\.{1,2}(\/|$))[A-Za-z0-9._~-]+(\/[A-Za-z0-9._~-]+){0,7}$/;

export class GeminiVeoVideoProvider implements VideoProvider {
  /** `fetchReference`: the SSRF-guarded downloader of the caller's reference image. */
  constructor(
    private readonly blobs: BlobStore,
    private readonly fetchReference: SafeFetch,
  ) {}

  private base(call: VideoCall): string {
    return `${call.model.baseUrl!.replace(/\/+$/, '')}/v1beta`;
  }

  private headers(call: VideoCall, json = false): Record<string, string> {
    return {
      ...(call.key ? { 'x-goog-api-key': call.key } : {}),
      ...(json ? { 'content-type': 'application/json' } : {}),
    };
  }

  private async json(url: string, init: RequestInit & { signal: AbortSignal }, key?: string): Promise<VeoOperation> {
    const { res, text } = await fetchText(url, init);
    if (!res.ok) throw new VeoHttpFailure(res.status, text, key, res.headers.get('retry-after'));
    const op = parseUpstreamJson<VeoOperation>(text);
    if (!op || typeof op !== 'object')
      throw new UpstreamFailure('upstream_error', 'upstream answered with JSON that is not an operation');
    return op;
  }

  async create(call: VideoCall & { dispatching(): Promise<void> }): Promise<VideoJob> {
    const { input, model, signal } = call;
    const r = input.request;
    const parameters = veoParameters(r.seconds, r.size);
    // The models file is refused at start-up for such values; a task accepted under an older file may still carry one.
    if (!parameters)
      throw new UpstreamFailure(
        'invalid_request',
        `seconds "${r.seconds}" with size "${r.size}" cannot be expressed as Veo parameters.`,
      );
    const image = r.image ? await this.reference(r.image, signal) : undefined;
    const body = { instances: [{ prompt: r.prompt, ...(image ? { image } : {}) }], parameters };
    const name = (model.upstreamModel ?? model.id).replace(/^models\//, '');
    const headers = this.headers(call, true);
    // Google does not deduplicate; a relay in front of it may, on the header the other providers send.
    if (model.idempotent) headers['idempotency-key'] = input.id;
    await call.dispatching();
    const op = await this.json(
      `${this.base(call)}/models/${encodeURIComponent(name)}:predictLongRunning`,
      { method: 'POST', headers, body: JSON.stringify(body), signal },
      call.key,
    );
    if (typeof op.name !== 'string' || !OPERATION_NAME.test(op.name))
      throw new UpstreamFailure('upstream_error', 'upstream accepted the video without a usable operation name');
    if (op.done && op.error) throw operationFailed(op.error, call.key);
    return { upstreamId: op.name };
  }

  private async operation(call: VideoCall & { job: VideoJob }): Promise<VeoOperation> {
    if (!OPERATION_NAME.test(call.job.upstreamId))
      throw new UpstreamFailure('upstream_error', 'the upstream operation name is not usable');
    return this.json(
      `${this.base(call)}/${call.job.upstreamId}`,
      { headers: this.headers(call), signal: call.signal },
      call.key,
    );
  }

  async check(call: VideoCall & { job: VideoJob }): Promise<VideoCheck> {
    const op = await this.operation(call);
    // Veo operations report no progress while they run.
    if (op.done !== true) return { state: 'running' };
    if (op.error) throw operationFailed(op.error, call.key);
    const video = generatedVideo(op, call.key);
    const outputs: VideoOutput[] = video.uri ? [{ url: video.uri, fileType: 'mp4' }] : [];
    return { state: 'completed', outputs };
  }

  async fetch(call: VideoCall & { job: VideoJob; outputs: VideoOutput[]; results: boolean }): Promise<VideoFinished> {
    const uri = call.outputs[0]?.url;
    const stored = uri
      ? await downloadVeoVideo(this.blobs, call, uri)
      : { url: await this.blobs.put(await this.inlineBytes(call), 'video/mp4'), file_type: 'mp4' };
    return { video_url: stored.url, ...(call.results ? { results: [stored] } : {}) };
  }

  /** A video sent in the operation itself (`encodedVideo`): too large for workflow history, so read again here. */
  private async inlineBytes(call: VideoCall & { job: VideoJob }): Promise<Buffer> {
    const encoded = generatedVideo(await this.operation(call), call.key).encodedVideo;
    if (!encoded)
      throw new UpstreamFailure('upstream_error', 'the finished operation has neither a video uri nor bytes');
    if ((encoded.length * 3) / 4 > MAX_VIDEO_BYTES)
      throw new UpstreamFailure('upstream_error', `the finished file is over ${MAX_VIDEO_BYTES} bytes`);
    return Buffer.from(encoded, 'base64');
  }

  /** The caller's reference image as Veo takes it: bytes and media type, downloaded through the SSRF guard. */
  private async reference(url: string, signal: AbortSignal): Promise<{ bytesBase64Encoded: string; mimeType: string }> {
    const { data, mimeType } = await downloadReference(this.fetchReference, url, signal, 'The reference image');
    return { bytesBase64Encoded: data, mimeType };
  }
}

/** The first generated sample; a finished operation without one was filtered (or is malformed). */
function generatedVideo(op: VeoOperation, key?: string): { uri?: string; encodedVideo?: string } {
  const res = op.response?.generateVideoResponse;
  const video = res?.generatedSamples?.[0]?.video;
  const uri = typeof video?.uri === 'string' && /^https?:\/\//.test(video.uri) ? video.uri : undefined;
  const encodedVideo = typeof video?.encodedVideo === 'string' ? video.encodedVideo : undefined;
  if (uri || encodedVideo) return { ...(uri ? { uri } : {}), ...(encodedVideo ? { encodedVideo } : {}) };
  if (res?.raiMediaFilteredCount) {
    const reasons = (res.raiMediaFilteredReasons ?? []).join(' ');
    throw new UpstreamFailure(
      'invalid_request',
      `the upstream filtered the video (${res.raiMediaFilteredCount}): ${upstreamMessage(reasons, key)}`,
    );
  }
  throw new UpstreamFailure('upstream_error', 'the upstream operation finished without a video');
}

/** An operation that ended with a google.rpc.Status: its code says why. */
function operationFailed(error: NonNullable<VeoOperation['error']>, key?: string): UpstreamFailure {
  const message = upstreamMessage(JSON.stringify({ error: { message: error.message ?? 'no message' } }), key);
  return new UpstreamFailure(
    rpcToCode(error.code),
    `the upstream video operation failed (${rpcName(error.code)}): ${message}`,
  );
}
