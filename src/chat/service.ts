// Chat completions are synchronous: no workflow, no stored state. The service checks the request
// against the model's limits, calls the model's provider within the model's time budget, and
// stops the upstream call as soon as the client goes away.
import { findModel } from '../infra/models.js';
import { modelsOfKind, type ChatModel, type Config, type Model } from '../config.js';
import { LocalChatProvider } from './providers/local.js';
import { OpenAIChatProvider } from './providers/openai.js';
import type { ChatCall, ChatChunk, ChatCompletion, ChatProvider } from './types.js';
import { requestedModel, validateChat } from './validate.js';
import { KilnError } from '../shared/errors.js';
import { upstreamKey } from '../shared/credentials.js';
import type { Caller } from '../infra/auth.js';

export type ChatOutcome =
  { stream: false; completion: ChatCompletion } | { stream: true; chunks: AsyncIterable<ChatChunk> };

/** Fallback body limit when no chat model is configured (the request is then refused anyway). */
const NO_MODEL_BODY_BYTES = 2 * 1024 * 1024;

export class ChatService {
  /** The largest body any chat model accepts: the parser's limit; each model's own is checked after. */
  readonly bodyLimit: number;

  constructor(
    private readonly allModels: Model[],
    private readonly upstreamKeys: Config['upstreamKeys'] = {},
    private readonly providers: Record<ChatModel['provider'], ChatProvider> = {
      local: new LocalChatProvider(),
      openai: new OpenAIChatProvider(),
    },
  ) {
    const chat = modelsOfKind(allModels, 'chat');
    this.bodyLimit = chat.length ? Math.max(...chat.map((m) => m.maxBodyBytes)) : NO_MODEL_BODY_BYTES;
  }

  model(id: string): ChatModel {
    return findModel(this.allModels, 'chat', id);
  }

  /**
   * `bodyBytes` is the decompressed body size; `gone` aborts when the client disconnects.
   * A stream resolves once the upstream has accepted the request.
   */
  async complete(caller: Caller, raw: unknown, bodyBytes: number | undefined, gone: AbortSignal): Promise<ChatOutcome> {
    const model = this.model(requestedModel(raw));
    if (bodyBytes !== undefined && bodyBytes > model.maxBodyBytes) {
      throw new KilnError(
        'request_too_large',
        `The request body has ${bodyBytes} bytes after decompression; ` +
          `model ${model.id} accepts at most ${model.maxBodyBytes}.`,
      );
    }
    const { request, images } = validateChat(raw, model);
    const credential = upstreamKey(model, caller.credential, this.upstreamKeys);

    // The budget covers the wait for an answer and, when streaming, each wait for the next chunk.
    const budget = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => budget.abort(), model.timeoutMs);
    };
    const disarm = () => clearTimeout(timer);
    const call: ChatCall = { model, request, images, credential, signal: AbortSignal.any([gone, budget.signal]) };
    const failure = (err: unknown): unknown => {
      if (err instanceof KilnError) return err;
      if (budget.signal.aborted)
        return new KilnError('upstream_timeout', `The upstream gave no answer within ${model.timeoutMs} ms.`);
      if (gone.aborted) return new KilnError('invalid_request', 'The client closed the connection.');
      return err;
    };
    const provider = this.providers[model.provider];
    arm();
    try {
      if (!request.stream) return { stream: false, completion: await provider.complete(call) };
      const chunks = await provider.stream(call);
      return { stream: true, chunks: paced(chunks, arm, disarm, failure) };
    } catch (err) {
      throw failure(err);
    } finally {
      disarm();
    }
  }
}

/** Re-arms the time budget while waiting for each chunk, and maps failures as above. */
async function* paced<T>(
  chunks: AsyncIterable<T>,
  arm: () => void,
  disarm: () => void,
  failure: (err: unknown) => unknown,
): AsyncGenerator<T> {
  const it = chunks[Symbol.asyncIterator]();
  try {
    for (;;) {
      arm();
      const r = await it.next();
      disarm();
      if (r.done) return;
      yield r.value;
    }
  } catch (err) {
    throw failure(err);
  } finally {
    disarm();
    // Ends the upstream request too when the consumer stops early (client gone).
    await it.return?.();
  }
}
