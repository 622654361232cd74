// Wire shapes of the Kiln API as the client sees them (the contract's resources).

export type TaskStatus = 'accepted' | 'queued' | 'running' | 'succeeded' | 'failed' | 'uncertain';

export interface ErrorObject {
  code: string;
  message: string;
}

// The result parts are the same shapes the server stores: one definition (src/shared is pure).
import type { Candidate, Part } from '../shared/image-task.js';
import type { WebhookState } from '../shared/webhook-types.js';
export type { Part, Candidate } from '../shared/image-task.js';
export type { WebhookEvents, WebhookState } from '../shared/webhook-types.js';

/**
 * Extension fields of image and video tasks (contract clients ignore them): where the time went,
 * and the deliveries of a task submitted with a webhook.
 */
export interface TaskTiming {
  /** When the upstream call began (epoch s); null before. `started_at - created_at` is the queue time. */
  started_at?: number | null;
  /** Upstream attempts made so far, across the model's channels. */
  attempts?: number;
  /** The model's channel (upstream) that served the task, or the last one tried; null before. */
  channel?: string | null;
  /** Present when the task was submitted with a webhook: `{status, attempts, last_error}`. */
  webhook?: WebhookState;
}

/** `image.task`: which fields are present depends on the status (see the contract). */
export interface ImageTask extends TaskTiming {
  id: string;
  object?: 'image.task';
  model?: string;
  status: TaskStatus;
  created_at?: number;
  finished_at?: number | null;
  response_id?: string;
  model_version?: string;
  candidates?: Candidate[] | null;
  error?: ErrorObject | null;
  uncertain_reason?: string;
}

export interface SubmitResponse {
  id: string;
  object: 'image.task';
  model: string;
  /** `accepted`; a repeated Idempotency-Key returns the earlier task as it is now. */
  status: TaskStatus;
  created_at?: number;
  polling_url: string;
  content_url: string;
}

/** A batch item: an image task, or `{id, object, status: not_found, error}`. */
export type BatchItem = Omit<ImageTask, 'status'> & { status: TaskStatus | 'not_found' };

export interface BatchTaskList {
  object: 'batch.task.list';
  items: BatchItem[];
  next_poll_after_ms: number;
}

export interface TaskListItem {
  id: string;
  model: string;
  status: TaskStatus;
  created_at: number;
  finished_at: number | null;
  started_at?: number | null;
  attempts?: number;
  content_url: string;
}

export interface TaskListPage {
  object: 'list';
  days: number;
  items: TaskListItem[];
}

/** generateContent request body (task form). */
export interface GenerateContentRequest {
  contents: { role?: string; parts: Part[] }[];
  generationConfig?: {
    responseModalities?: string[];
    topP?: number;
    imageConfig?: { aspectRatio?: string; imageSize?: string; output?: 'url'; [k: string]: unknown };
    [k: string]: unknown;
  };
  tools?: Record<string, unknown>[];
  systemInstruction?: { parts: { text: string }[] };
}

// ---- chat ----

export type ChatContentItem = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } };

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: ChatContentItem[];
}

export interface ChatCompletionCreateParams {
  model: string;
  messages: ChatMessage[];
  max_tokens?: number;
  temperature?: number;
  seed?: number;
  [k: string]: unknown;
}

export interface ChatCompletion {
  id?: string;
  object?: string;
  model?: string;
  created?: number;
  choices: {
    index?: number;
    message: { role?: string; content: string | { type: string; text?: string }[] | null };
    finish_reason?: string | null;
  }[];
  usage?: Record<string, number>;
  [k: string]: unknown;
}

export interface ChatCompletionChunk {
  id?: string;
  object?: string;
  choices: { index?: number; delta: { role?: string; content?: string | null }; finish_reason?: string | null }[];
  [k: string]: unknown;
}

// ---- video ----

/** OpenAI's four: an uncertain video is `failed` with `error.code: "uncertain"` (see `isUncertainVideo`). */
export type VideoStatus = 'queued' | 'in_progress' | 'completed' | 'failed';

export interface NodeInfo {
  nodeId: string;
  fieldName: string;
  fieldValue: string | number | boolean;
}

export interface VideoCreateParams {
  model: string;
  prompt: string;
  /** Publicly reachable image URL (image-to-video). */
  image?: string;
  /** The pro model accepts only "10", "15", "25". */
  seconds?: string;
  /** The pro model accepts only "1792x1024", "1024x1792". */
  size?: string;
  /** Workflow-node models: values to set on the workflow's nodes. */
  nodeInfoList?: NodeInfo[];
  [k: string]: unknown;
}

export interface Video extends TaskTiming {
  id: string;
  object?: 'video';
  model?: string;
  status: VideoStatus | string;
  progress?: number;
  created_at?: number;
  completed_at?: number | null;
  seconds?: string;
  size?: string;
  error?: ErrorObject | null;
  video_url?: string | null;
  data?: { video_url?: string | null } | null;
  results?: { url: string }[] | null;
  [k: string]: unknown;
}
