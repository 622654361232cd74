// Video task service: submit starts a `videoTaskWorkflow`; polls come from the Redis read model
// (behind the same limiter as image tasks) and reach Temporal only when Redis has no record.
import { startTask } from '../temporal/start-task.js';
import { findModel } from '../infra/models.js';
import { randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { modelTaskQueue, videoOptions, type Config, type VideoModel } from '../config.js';
import { KilnError } from '../shared/errors.js';
import { UNFINISHED_STATUSES } from '../shared/task.js';
import { videoStatus, type VideoRequest, type VideoTaskRecord } from '../shared/video.js';
import type { VideoTaskWorkflowInput } from '../../workflows/video-task.js';
import type { Caller } from '../infra/auth.js';
import { pollRecords, taskLimiterKey } from '../infra/poll.js';
import type { TaskStore } from '../infra/store.js';
import { SA } from '../temporal/search-attributes.js';
import { taskSummary } from '../temporal/summary.js';

export const VIDEO_ID = /^video_[a-f0-9]{32}$/;

export type VideoView = ReturnType<typeof videoView>;

/** The OpenAI video object, plus `uncertain`, `video_url` and (workflow-node) `results`. */
export function videoView(r: VideoTaskRecord) {
  const done = r.status === 'succeeded';
  return {
    id: r.id, object: 'video' as const, model: r.model, status: videoStatus(r.status),
    progress: done ? 100 : r.progress, created_at: r.created_at, completed_at: r.completed_at,
    expires_at: null, prompt: r.prompt, remixed_from_video_id: null, seconds: r.seconds, size: r.size,
    error: r.status === 'failed' ? r.error : null,
    ...(done && r.video_url ? { video_url: r.video_url } : {}),
    ...(done && r.results ? { results: r.results } : {}),
    ...(r.status === 'uncertain' ? { uncertain_reason: r.uncertain_reason } : {}),
  };
}

export class VideoService {
  constructor(
    private readonly config: Config,
    private readonly store: TaskStore,
    private readonly temporal: Client,
  ) {}

  model(id: string): VideoModel {
    return findModel(this.config.models, 'video', id);
  }

  async submit(caller: Caller, model: VideoModel, request: VideoRequest): Promise<VideoView> {
    const id = `video_${randomBytes(16).toString('hex')}`;
    const created_at = Math.floor(Date.now() / 1000);
    const input: VideoTaskWorkflowInput = {
      task: { id, owner: caller.owner, model: model.id, created_at, request, ...(caller.credential ? { credential: caller.credential } : {}) },
      policy: {
        timeoutMs: model.timeoutMs, heartbeatTimeoutMs: model.heartbeatTimeoutMs, maxAttempts: model.maxAttempts,
        pollIntervalMs: model.pollIntervalMs, overallTimeoutMs: model.overallTimeoutMs,
      },
      activityQueue: modelTaskQueue(this.config.temporal.taskQueue, model.id),
      results: videoOptions(model).form === 'workflow-node',
    };
    await startTask({ config: this.config, store: this.store, temporal: this.temporal }, {
      id, workflowType: 'videoTaskWorkflow', input, owner: caller.owner, model: model.id,
      // What a poll shows while Redis has no record (payload codec applies: encrypted at rest).
      memo: { prompt: request.prompt, seconds: request.seconds, size: request.size },
      summary: taskSummary('video', model.id, caller.owner, request.prompt, this.config.ops.summaryPromptChars),
    });
    const record: VideoTaskRecord = {
      id, kind: 'video', owner: caller.owner, model: model.id, status: 'accepted', progress: 0,
      prompt: request.prompt, seconds: request.seconds, size: request.size, created_at, completed_at: null, error: null,
    };
    // The workflow records its own transitions; this write makes an immediate poll cheap.
    await this.store.transition(record).catch(() => undefined);
    return videoView(record);
  }

  /** One video task, behind the per-task poll limiter. */
  async get(caller: Caller, id: string): Promise<VideoView> {
    return videoView(await this.read(caller, id, true));
  }

  /** Where the finished video is: the blob store's URL (never the upstream's expiring link). */
  async contentUrl(caller: Caller, id: string, variant: string): Promise<string> {
    if (variant !== 'video') throw new KilnError('invalid_request', `variant must be "video"; "${variant}" is not offered.`);
    const r = await this.read(caller, id, false);
    if (UNFINISHED_STATUSES.includes(r.status)) {
      throw new KilnError('task_not_ready', `Video ${id} is ${videoStatus(r.status)}; its content is not ready yet.`, this.config.pollAfterSeconds);
    }
    const url = r.video_url ?? r.results?.[0]?.url;
    if (r.status !== 'succeeded' || !url) {
      throw new KilnError('task_failed', `Video ${id} ended ${videoStatus(r.status)} and has no video${r.error ? `: ${r.error.message}` : '.'}`);
    }
    return url;
  }

  private async read(caller: Caller, id: string, limited: boolean): Promise<VideoTaskRecord> {
    const notFound = new KilnError('not_found', `Video ${id} was not found.`);
    if (!VIDEO_ID.test(id)) throw notFound;
    const [json] = await pollRecords(this.store, [id], limited ? taskLimiterKey(caller.owner, id) : null, limited ? this.config.rateLimitTaskMs : 0);
    const record = json ? (JSON.parse(json) as VideoTaskRecord) : await this.fromTemporal(caller.owner, id);
    if (!record || record.owner !== caller.owner || record.kind !== 'video') throw notFound;
    return record;
  }

  /** Redis has no record (lost, or Redis down): the workflow's description answers, and Redis is repaired. */
  private async fromTemporal(owner: string, id: string): Promise<VideoTaskRecord | null> {
    try {
      const handle = this.temporal.workflow.getHandle(id);
      const wf = await handle.describe();
      if (wf.type !== 'videoTaskWorkflow' || wf.typedSearchAttributes.get(SA.owner) !== owner) return null;
      let record: VideoTaskRecord;
      if (wf.status.name === 'COMPLETED') {
        record = (await handle.result()) as VideoTaskRecord;
      } else {
        const status = wf.typedSearchAttributes.get(SA.status);
        const memo = (wf.memo ?? {}) as Partial<Pick<VideoTaskRecord, 'prompt' | 'seconds' | 'size'>>;
        record = {
          id, kind: 'video', owner, model: wf.typedSearchAttributes.get(SA.model) ?? 'unknown',
          status: wf.status.name === 'RUNNING' ? (status === 'queued' || status === 'running' ? status : 'accepted') : 'failed',
          progress: 0, prompt: memo.prompt ?? '', seconds: memo.seconds ?? '', size: memo.size ?? '', created_at: Math.floor(wf.startTime.getTime() / 1000), completed_at: null, error: null,
        };
        if (record.status === 'failed') {
          record.completed_at = Math.floor((wf.closeTime ?? new Date()).getTime() / 1000);
          record.error = { code: 'upstream_error', message: `The task's workflow ended ${wf.status.name.toLowerCase()} before a result.` };
        }
      }
      await this.store.transition(record).catch(() => undefined);
      return record;
    } catch {
      // Unknown to Temporal too, or Temporal unreachable: not_found rather than a failed read.
      return null;
    }
  }
}
