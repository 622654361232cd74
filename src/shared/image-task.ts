// Image task shapes shared by API, activities and workflows. Pure types and constants only.
import type { ChannelTrail } from '../shared/channel-trail.js';
import type { ErrorBody } from './errors.js';
import type { TaskStatus } from './task.js';
import { WEBHOOK_PENDING, type WebhookState, type WebhookTarget } from './webhook-types.js';

export interface Part {
  text?: string;
  inlineData?: { mimeType?: string; data: string };
}

export interface Candidate {
  content: { role?: string; parts: Part[] };
  finishReason?: string;
  index?: number;
}

/** The task as stored in Redis (the read model) and returned by the workflow. */
export interface ImageTaskRecord {
  id: string;
  kind: 'image';
  owner: string;
  model: string;
  status: TaskStatus;
  created_at: number;
  finished_at: number | null;
  response_id?: string;
  model_version?: string;
  candidates: Candidate[] | null;
  error: ErrorBody | null;
  /** Why the outcome cannot be confirmed (status uncertain only; `error` stays null as the contract says). */
  uncertain_reason?: string;
  /** Timing extension fields: when the upstream call began (epoch s) and how many attempts were made. */
  started_at?: number | null;
  attempts?: number;
  /** The channel of the model that served the task, or the last one tried. */
  channel?: string;
  /** Present when the task was submitted with a webhook. */
  webhook?: WebhookState;
}

/** What the image generation request carries into the workflow (Kiln's own `output` field removed). */
export interface ImageRequest {
  contents: { role?: string; parts: Part[] }[];
  generationConfig?: Record<string, unknown> & {
    imageConfig?: { aspectRatio?: string; imageSize?: string; [k: string]: unknown };
  };
  tools?: unknown[];
  systemInstruction?: { parts: { text: string }[] };
}

export interface ImageTaskInput {
  id: string;
  owner: string;
  model: string;
  created_at: number;
  request: ImageRequest;
  /** The caller's upstream key in passthrough mode; travels only inside encrypted payloads. */
  credential?: string;
  webhook?: WebhookTarget;
  /** Set by the workflow once a channel refused the task (see src/upstreams/failover.ts). */
  route?: ChannelTrail;
}

/** The result of one upstream generation, before it is turned into a task record. */
export interface GenerationResult {
  response_id: string;
  model_version: string;
  candidates: Candidate[];
}

/** An image task's record before any result: what a submit writes (accepted) and the workflow starts from (queued). */
export function newImageRecord(
  task: Pick<ImageTaskInput, 'id' | 'owner' | 'model' | 'created_at' | 'webhook'>,
  status: TaskStatus,
): ImageTaskRecord {
  return {
    id: task.id,
    kind: 'image',
    owner: task.owner,
    model: task.model,
    status,
    created_at: task.created_at,
    finished_at: null,
    candidates: null,
    error: null,
    ...(task.webhook ? { webhook: WEBHOOK_PENDING } : {}),
  };
}
