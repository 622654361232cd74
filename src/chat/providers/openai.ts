// OpenAI-compatible upstream: POST {baseUrl}/v1/chat/completions, plain or as server-sent events.
// Replies keep the upstream's fields; `model` becomes Kiln's public model id. Failures are told as
// the task upstreams tell theirs (UpstreamFailure with the answer's status, TransportFailure with
// whether the request may have left), so routing judges a chat call by the same rule; the service
// turns them into KilnErrors for the caller.
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { TransportFailure, UpstreamFailure } from '../../upstreams/failures.js';
import { parseRetryAfter } from '../../upstreams/retry-after.js';
import { causeCode, isRefusalStatus, notDispatched, statusToCode, upstreamMessage } from '../../upstreams/answers.js';
import type { ChatCall, ChatChunk, ChatCompletion, ChatProvider } from './types.js';

/** One SSE event may not grow past this: a hostile or broken upstream cannot exhaust memory. */
const MAX_EVENT_BYTES = 4 * 1024 * 1024;

/** `answered`: an answer had begun, so the request certainly arrived whatever the error says. */
function transportFailure(err: unknown, phase: string, answered: boolean): TransportFailure {
  const code = causeCode(err) ?? '';
  const unsent = !answered && notDispatched(code);
  return new TransportFailure(
    `The upstream connection failed ${phase} (${code || ((err as Error).message ?? 'unknown error')}); retry later.`,
    !unsent,
  );
}

export class OpenAIChatProvider implements ChatProvider {
  async complete(call: ChatCall): Promise<ChatCompletion> {
    const res = await this.send(call);
    let text: string;
    try {
      text = await res.text();
    } catch (err) {
      if (call.signal.aborted) throw err;
      throw transportFailure(err, 'while reading the answer', true);
    }
    let body: ChatCompletion;
    try {
      body = JSON.parse(text);
    } catch {
      throw new UpstreamFailure('upstream_error', 'The upstream answered with a body that is not JSON.');
    }
    if (
      !body ||
      typeof body !== 'object' ||
      !Array.isArray(body.choices) ||
      body.choices.length === 0 ||
      !body.choices.every((c) => c && typeof c.message === 'object')
    ) {
      throw new UpstreamFailure('upstream_error', 'The upstream answered without choices[].message.');
    }
    return { ...body, object: 'chat.completion', model: call.model.id };
  }

  async stream(call: ChatCall): Promise<AsyncIterable<ChatChunk>> {
    const res = await this.send(call);
    if (!res.body)
      throw new UpstreamFailure('upstream_error', 'The upstream answered the stream request without a body.');
    return relay(res.body, call);
  }

  private async send({ model, request, credential, signal }: ChatCall): Promise<Response> {
    const url = `${model.baseUrl!.replace(/\/+$/, '')}/v1/chat/completions`;
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: request.stream ? 'text/event-stream' : 'application/json',
    };
    if (credential) headers.authorization = `Bearer ${credential}`;
    const body = { model: model.upstreamModel ?? model.id, ...request, stream: request.stream || undefined };
    let res: Response;
    try {
      res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body), signal });
    } catch (err) {
      if (signal.aborted) throw err;
      throw transportFailure(err, 'before an answer', false);
    }
    if (res.ok) return res;
    let text = '';
    try {
      text = await res.text();
    } catch (err) {
      if (signal.aborted) throw err;
    }
    const retryAfterS = res.status === 429 ? parseRetryAfter(res.headers.get('retry-after')) : undefined;
    throw new UpstreamFailure(
      statusToCode(res.status),
      `The upstream answered ${res.status}: ${upstreamMessage(text, credential)}`,
      false,
      {
        status: res.status,
        refused: isRefusalStatus(res.status),
        ...(retryAfterS !== undefined ? { retryAfterMs: retryAfterS * 1000 } : {}),
      },
    );
  }
}

/** Upstream events to chunks, one by one as they arrive; ends at `[DONE]`. */
async function* relay(
  body: ReadableStream<Uint8Array>,
  { model, credential, signal }: ChatCall,
): AsyncGenerator<ChatChunk> {
  const events = body
    // Node's TextDecoderStream typing takes any BufferSource; fetch bodies are Uint8Array.
    .pipeThrough(new TextDecoderStream() as unknown as TransformStream<Uint8Array, string>)
    .pipeThrough(new EventSourceParserStream({ maxBufferSize: MAX_EVENT_BYTES, onError: 'terminate' }));
  let done = false;
  let finished = false;
  try {
    for await (const ev of events) {
      if (ev.data === '[DONE]') {
        done = true;
        break;
      }
      let chunk: ChatChunk & { error?: unknown };
      try {
        chunk = JSON.parse(ev.data);
      } catch {
        throw new UpstreamFailure('upstream_error', 'The upstream sent a stream event that is not JSON.');
      }
      if (chunk && typeof chunk === 'object' && chunk.error) {
        throw new UpstreamFailure(
          'upstream_error',
          `The upstream reported an error during the stream: ${upstreamMessage(ev.data, credential)}`,
        );
      }
      if (!chunk || typeof chunk !== 'object' || !Array.isArray(chunk.choices)) continue;
      if (chunk.choices.some((c) => c?.finish_reason)) finished = true;
      yield { ...chunk, object: 'chat.completion.chunk', model: model.id };
    }
  } catch (err) {
    if (err instanceof UpstreamFailure || signal.aborted) throw err;
    throw transportFailure(err, 'during the stream', true);
  }
  // Some compatible servers omit [DONE]; a finish_reason is as good an end. Without either the
  // answer is incomplete, like a dropped connection.
  if (!done && !finished) throw new TransportFailure('The upstream stream ended before its end.', true);
}
