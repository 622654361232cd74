// Shapes of a validated chat request, of the OpenAI-style reply, and of a chat provider.
import type { ChatUpstream } from '../../config/models.js';

export type TextItem = { type: 'text'; text: string };
export type ImageItem = { type: 'image_url'; image_url: { url: string; detail?: 'auto' | 'low' | 'high' } };
export type ContentItem = TextItem | ImageItem;
export type Role = 'system' | 'user' | 'assistant';
export interface ChatMessage {
  role: Role;
  content: ContentItem[];
}

/** What the checks learned from an image's decoded bytes, in order of appearance. */
export interface ImageInfo {
  /** Position as `messages[i].content[j]`. */
  where: string;
  /** Subtype declared by the data URI (`png` in `data:image/png;base64,`). */
  declared: string;
  /** Format read from the bytes (`png`, `jpg`, `webp` …). */
  format: string;
  width: number;
  height: number;
  bytes: number;
}

/** A request that passed every check; only these fields travel upstream. */
export interface ChatRequest {
  messages: ChatMessage[];
  max_tokens?: number;
  temperature?: number;
  seed?: number;
  stream: boolean;
  stream_options?: { include_usage?: boolean };
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: {
    index: number;
    message: { role: 'assistant'; content: string | null; [k: string]: unknown };
    finish_reason: string | null;
    [k: string]: unknown;
  }[];
  usage?: Usage;
  [k: string]: unknown;
}

export interface ChatChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: {
    index: number;
    delta: { role?: 'assistant'; content?: string | null; [k: string]: unknown };
    finish_reason: string | null;
    [k: string]: unknown;
  }[];
  usage?: Usage | null;
  [k: string]: unknown;
}

export interface ChatCall {
  /** The channel the call goes to, its settings merged over its model's (`id` is the model's). */
  model: ChatUpstream;
  request: ChatRequest;
  images: ImageInfo[];
  /** The upstream credential: the caller's key (passthrough) or the configured one. */
  credential?: string;
  /** Aborts on the model's timeout or when the client goes away. */
  signal: AbortSignal;
}

export interface ChatProvider {
  complete(call: ChatCall): Promise<ChatCompletion>;
  /**
   * Resolves once the upstream has accepted the request (so refusals are still plain HTTP errors);
   * the chunks follow as they arrive. A failure after that throws from the iteration.
   */
  stream(call: ChatCall): Promise<AsyncIterable<ChatChunk>>;
}
