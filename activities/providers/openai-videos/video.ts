// OpenAI-videos upstream: POST /v1/videos, GET /v1/videos/{id}, GET /v1/videos/{id}/content.
import type { BlobStore } from '../../../src/blobs/local.js';
import { TASK_FAILURE_CODES, type TaskFailureCode } from '../../../src/shared/errors.js';
import { upstreamMessage } from '../../../src/upstreams/answers.js';
import type { VideoCheck, VideoJob } from '../../../src/shared/video-task.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import { copyToBlobs, requestJson } from '../http.js';
import type { VideoCall, VideoFinished, VideoProvider } from '../contract.js';

interface UpstreamVideo {
  id?: string;
  status?: string;
  progress?: number;
  error?: { code?: string; message?: string } | null;
}

export class OpenAIVideoProvider implements VideoProvider {
  constructor(private readonly blobs: BlobStore) {}

  private base(call: VideoCall) {
    return `${call.model.baseUrl!.replace(/\/+$/, '')}/v1/videos`;
  }

  private headers(call: VideoCall, json = false): Record<string, string> {
    return {
      ...(call.key ? { authorization: `Bearer ${call.key}` } : {}),
      ...(json ? { 'content-type': 'application/json' } : {}),
    };
  }

  async create(call: VideoCall & { dispatching(): Promise<void> }): Promise<VideoJob> {
    const { input, model, signal } = call;
    const r = input.request;
    const body = {
      model: model.upstreamModel ?? model.id,
      prompt: r.prompt,
      seconds: r.seconds,
      size: r.size,
      ...(r.image ? { input_reference: { image_url: r.image } } : {}),
    };
    const headers = this.headers(call, true);
    if (model.idempotent) headers['idempotency-key'] = input.id;
    await call.dispatching();
    const v = (await requestJson(
      this.base(call),
      { method: 'POST', headers, body: JSON.stringify(body), signal },
      call.key,
    )) as UpstreamVideo;
    if (typeof v?.id !== 'string' || v.id === '')
      throw new UpstreamFailure('upstream_error', 'upstream accepted the video without an id');
    if (v.status === 'failed') throw jobFailed(v, call.key);
    return { upstreamId: v.id };
  }

  async check(call: VideoCall & { job: VideoJob }): Promise<VideoCheck> {
    const v = (await requestJson(
      `${this.base(call)}/${encodeURIComponent(call.job.upstreamId)}`,
      { headers: this.headers(call), signal: call.signal },
      call.key,
    )) as UpstreamVideo;
    if (v?.status === 'completed') return { state: 'completed' };
    if (v?.status === 'failed') throw jobFailed(v, call.key);
    if (v?.status !== 'queued' && v?.status !== 'in_progress')
      throw new UpstreamFailure(
        'upstream_error',
        `upstream reported an unknown video status "${String(v?.status).slice(0, 40)}"`,
      );
    return { state: 'running', ...(typeof v.progress === 'number' ? { progress: v.progress } : {}) };
  }

  async fetch(call: VideoCall & { job: VideoJob; results: boolean }): Promise<VideoFinished> {
    const url = `${this.base(call)}/${encodeURIComponent(call.job.upstreamId)}/content?variant=video`;
    const stored = await copyToBlobs(this.blobs, url, 'mp4', call.signal, this.headers(call), call.key);
    return { video_url: stored.url, ...(call.results ? { results: [stored] } : {}) };
  }
}

/** A job the upstream itself ended failed: its own code when Kiln knows it, else upstream_error. */
function jobFailed(v: UpstreamVideo, key?: string): UpstreamFailure {
  const upstreamCode = v.error?.code ?? 'unknown';
  const code: TaskFailureCode = (TASK_FAILURE_CODES as readonly string[]).includes(upstreamCode)
    ? (upstreamCode as TaskFailureCode)
    : /moderation|policy|invalid/i.test(upstreamCode)
      ? 'invalid_request'
      : 'upstream_error';
  const message = upstreamMessage(JSON.stringify({ error: { message: v.error?.message ?? 'no message' } }), key);
  return new UpstreamFailure(code, `the upstream video job failed (${upstreamCode.slice(0, 60)}): ${message}`);
}
