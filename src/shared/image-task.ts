// Image task shapes shared by API, activities and workflows. Pure types and constants only.
import type { ErrorBody } from './errors.js';
import type { TaskInput, TaskRecordTail, TaskStatus } from './task.js';
import { WEBHOOK_PENDING } from './webhook-types.js';

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
export interface ImageTaskRecord extends TaskRecordTail {
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

export type ImageTaskInput = TaskInput<ImageRequest>;

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
