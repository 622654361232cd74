// Video task shapes shared by API, activities and workflows. Pure types and constants only.
import type { ErrorBody } from './errors.js';
import type { ActivityPolicy, TaskInput, TaskRecordTail, TaskStatus } from './task.js';
import { WEBHOOK_PENDING } from './webhook-types.js';
import type { JobCheck, JobOutput, UpstreamJob } from './upstream-job.js';

/** The contract's strict rules for the pro model: any other value is refused before it can reach the upstream. */
export const PRO_SECONDS = ['10', '15', '25'] as const;
export const PRO_SIZES = ['1792x1024', '1024x1792'] as const;

/** `{nodeId, fieldName, fieldValue}` of a RunningHub-style workflow. */
export interface NodeInfo {
  nodeId: string;
  fieldName: string;
  fieldValue: string | number | boolean;
}

/** One output of a finished task, copied into Kiln's blob store. */
export interface VideoResult {
  url: string;
  file_type: string;
  node_id?: string;
}

/** The task as stored in Redis and returned by `videoTaskWorkflow`. Statuses use the image ranks. */
export interface VideoTaskRecord extends TaskRecordTail {
  id: string;
  kind: 'video';
  owner: string;
  model: string;
  status: TaskStatus;
  /** 0–100; only ever moves forward. */
  progress: number;
  prompt: string;
  seconds: string;
  size: string;
  created_at: number;
  completed_at: number | null;
  /** When a finished video leaves Kiln (its record's expiry; set by its terminal write). */
  expires_at?: number;
  video_url?: string;
  /** Workflow-node tasks: every output file, in the upstream's order. */
  results?: VideoResult[];
  error: ErrorBody | null;
}

/** What a video request carries into the workflow, validated and with defaults filled in. */
export interface VideoRequest {
  prompt: string;
  seconds: string;
  size: string;
  image?: string;
  /** Workflow-node models: extra node fields sent as given. */
  nodeInfoList?: NodeInfo[];
}

export type VideoTaskInput = TaskInput<VideoRequest>;

/** The upstream job of a video task (src/shared/upstream-job.ts). */
export type VideoJob = UpstreamJob;
export type VideoOutput = JobOutput;
/** One look at the upstream job. */
export type VideoCheck = JobCheck;

export interface VideoPolicy extends ActivityPolicy {
  /** Durable timer between two checks of the upstream job. */
  pollIntervalMs: number;
  /** From the workflow's start: past it the task ends failed / upstream_timeout. */
  overallTimeoutMs: number;
}

/**
 * Internal status → the OpenAI video status. An `uncertain` video is `failed` (with error code
 * `uncertain`): OpenAI's SDK types and pollers know four statuses, and a poller must stop there.
 */
export function videoStatus(status: TaskStatus): 'queued' | 'in_progress' | 'completed' | 'failed' {
  switch (status) {
    case 'accepted':
    case 'queued':
      return 'queued';
    case 'running':
      return 'in_progress';
    case 'succeeded':
      return 'completed';
    default:
      return 'failed';
  }
}

/** A video task's record before any result: what a submit writes (accepted) and the workflow starts from (queued). */
export function newVideoRecord(
  task: Pick<VideoTaskInput, 'id' | 'owner' | 'model' | 'created_at' | 'request' | 'webhook'>,
  status: TaskStatus,
): VideoTaskRecord {
  return {
    id: task.id,
    kind: 'video',
    owner: task.owner,
    model: task.model,
    status,
    progress: 0,
    prompt: task.request.prompt,
    seconds: task.request.seconds,
    size: task.request.size,
    created_at: task.created_at,
    completed_at: null,
    error: null,
    ...(task.webhook ? { webhook: WEBHOOK_PENDING } : {}),
  };
}
