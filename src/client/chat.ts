// Chat completions (OpenAI shape): text and images in, text out; optionally streamed as SSE.
import { EventSourceParserStream } from 'eventsource-parser/stream';
import type { KilnCore } from './core.js';
import { KilnClientError } from './errors.js';
import { dataUri } from './results.js';
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionCreateParams,
  ChatContentItem,
  ChatMessage,
} from './types.js';

export interface UserMessageInput {
  text: string;
  /** Images as raw bytes with their MIME type (turned into data URIs) or as ready data URIs. */
  images?: ({ mimeType: string; bytes: Uint8Array } | string)[];
}

/** A `user` message in the contract's shape: content is always an array of items. */
export function userMessage({ text, images = [] }: UserMessageInput): ChatMessage {
  const content: ChatContentItem[] = [{ type: 'text', text }];
  for (const img of images)
    content.push({
      type: 'image_url',
      image_url: { url: typeof img === 'string' ? img : dataUri(img.mimeType, img.bytes) },
    });
  return { role: 'user', content };
}

export function systemMessage(text: string): ChatMessage {
  return { role: 'system', content: [{ type: 'text', text }] };
}

class Completions {
  constructor(private readonly core: KilnCore) {}

  async create(params: ChatCompletionCreateParams, opts: { signal?: AbortSignal } = {}): Promise<ChatCompletion> {
    const { stream: _s, ...body } = params;
    return (await this.core.request<ChatCompletion>('POST', '/v1/chat/completions', { body, signal: opts.signal }))
      .data;
  }

  /** Streams the completion: yields each `chat.completion.chunk` until `[DONE]`. */
  async *stream(
    params: ChatCompletionCreateParams,
    opts: { signal?: AbortSignal } = {},
  ): AsyncGenerator<ChatCompletionChunk> {
    const { response } = await this.core.request<void>('POST', '/v1/chat/completions', {
      body: { ...params, stream: true },
      signal: opts.signal,
      raw: true,
    });
    if (!response.body) throw new KilnClientError('The chat stream answered without a body.');
    const events = response.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
    for await (const ev of events as unknown as AsyncIterable<{ event?: string; data: string }>) {
      if (ev.data === '[DONE]') return;
      let chunk: unknown;
      try {
        chunk = JSON.parse(ev.data);
      } catch {
        throw new KilnClientError(`The chat stream sent an event that is not JSON: ${ev.data.slice(0, 100)}`);
      }
      const err = (chunk as { error?: { code?: string; message?: string } }).error;
      if (err)
        throw new KilnClientError(`The chat stream ended with an error: ${err.code ?? 'error'}: ${err.message ?? ''}`);
      yield chunk as ChatCompletionChunk;
    }
  }
}

export class Chat {
  readonly completions: Completions;
  constructor(core: KilnCore) {
    this.completions = new Completions(core);
  }
}

/** The text of a stream's chunks, in order. */
export async function* streamText(chunks: AsyncIterable<ChatCompletionChunk>): AsyncGenerator<string> {
  for await (const c of chunks) {
    const t = c.choices?.[0]?.delta?.content;
    if (typeof t === 'string' && t) yield t;
  }
}
