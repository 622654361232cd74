// Chat completions are synchronous: no workflow, no stored state. The service checks the request
// against the model's limits, calls one of the model's channels within that channel's time budget,
// and stops the upstream call as soon as the client goes away.
//
// A call moves to the model's next channel by the tasks' rule (src/upstreams/failover.ts, with the
// same deployment-wide health), and only before the caller got a byte of an answer. A stream is relayed only once its upstream accepted it, so every
// failure after that is the accepting channel's and ends the stream.
import { randomUUID } from 'node:crypto';
import { channelPicker, type ChannelPicker } from '../upstreams/channel-picker.js';
import { movesOn, SUCCEEDED, verdictOf, type Verdict } from '../upstreams/failover.js';
import { routed } from '../config/channels.js';
import type { ChannelState } from '../channels/state.js';
import { findModel } from '../infra/models.js';
import { type Config } from '../config/env.js';
import { modelsOfKind, type ChatChannel, type ChatModel, type Model } from '../config/models.js';
import { LocalChatProvider } from './providers/local.js';
import { OpenAIChatProvider } from './providers/openai.js';
import { callerError, lenient, noChannelError, UNSHARED } from './routing.js';
import type { ChatCall, ChatChunk, ChatCompletion, ChatProvider } from './providers/types.js';
import { requestedModel, validateChat } from './validate.js';
import { KilnError } from '../shared/errors.js';
import { upstreamKey } from '../shared/credentials.js';
import { assertModelAllowed } from '../keys/allowed.js';
import type { Caller } from '../infra/callers.js';

export type ChatOutcome =
  { stream: false; completion: ChatCompletion } | { stream: true; chunks: AsyncIterable<ChatChunk> };

/** One channel's try: its answer, or the caller's error and whether the next channel may take over. */
type Attempt = { ok: true; outcome: ChatOutcome } | { ok: false; error: unknown; verdict: Verdict };

/** What one request sends, whichever channel takes it. */
interface Ask {
  caller: Caller;
  call: Pick<ChatCall, 'request' | 'images'>;
  gone: AbortSignal;
  /** The request's lease holder in the channel state. */
  holder: string;
}

/** Fallback body limit when no chat model is configured (the request is then refused anyway). */
const NO_MODEL_BODY_BYTES = 2 * 1024 * 1024;

/** A call whose client went away: no verdict on the channel. */
const CANCELED: Verdict = { outcome: 'canceled', movable: false, code: 'canceled', message: 'client went away' };

export function chatProviders(): Record<ChatModel['provider'], ChatProvider> {
  return { local: new LocalChatProvider(), openai: new OpenAIChatProvider() };
}

export class ChatService {
  /** The largest body any chat model accepts: the parser's limit; each model's own is checked after. */
  readonly bodyLimit: number;
  private readonly state: ChannelState;
  private readonly router: ChannelPicker;

  /** `channels`: the deployment's shared channel state (Redis); without it channels never cool down. */
  constructor(
    private readonly allModels: Model[],
    private readonly upstreamKeys: Config['upstreamKeys'] = {},
    private readonly providers: Record<ChatModel['provider'], ChatProvider> = chatProviders(),
    channels: ChannelState = UNSHARED,
  ) {
    const chat = modelsOfKind(allModels, 'chat');
    this.bodyLimit = chat.length ? Math.max(...chat.map((m) => m.maxBodyBytes)) : NO_MODEL_BODY_BYTES;
    this.state = lenient(channels);
    // One try per acquire: a chat caller is waiting, and lenient() already covers Redis trouble.
    this.router = channelPicker(this.state, (fn) => fn());
  }

  model(id: string): ChatModel {
    return findModel(this.allModels, 'chat', id);
  }

  /**
   * `bodyBytes` is the decompressed body size; `gone` aborts when the client disconnects.
   * A stream resolves once an upstream has accepted the request.
   */
  async complete(caller: Caller, raw: unknown, bodyBytes: number | undefined, gone: AbortSignal): Promise<ChatOutcome> {
    const model = this.model(requestedModel(raw));
    // A key limited to some models: refused before the body is validated or any channel called.
    assertModelAllowed(caller, model.id);
    if (bodyBytes !== undefined && bodyBytes > model.maxBodyBytes) {
      throw new KilnError(
        'request_too_large',
        `The request body has ${bodyBytes} bytes after decompression; ` +
          `model ${model.id} accepts at most ${model.maxBodyBytes}.`,
      );
    }
    const ask: Ask = { caller, call: validateChat(raw, model), gone, holder: `chat-${randomUUID()}` };
    const tried: string[] = [];
    let last: unknown;
    // Each channel at most once: one that refused a moment ago would most likely refuse again. When
    // every channel refused, the caller gets the last one's answer, as one channel gives it.
    for (;;) {
      const channel = await this.pick(model, ask, tried, last);
      tried.push(channel.id);
      const r = await this.attempt(model, channel, ask);
      if (r.ok) return r.outcome;
      if (!movesOn(r.verdict, { channel: channel.id, channels: model.channels, tried })) throw r.error;
      last = r.error;
    }
  }

  /** The next channel to try (its lease taken), by priority and weight, skipping those cooling down. */
  private async pick(model: ChatModel, ask: Ask, tried: string[], last: unknown): Promise<ChatChannel> {
    const taken = await this.router.take(model, ask.holder, { tried, wait: false, signal: ask.gone });
    if (taken) return taken;
    // A refusal this request already got says more than that the other channels are cooling down.
    if (last !== undefined) throw last;
    throw await noChannelError(this.state, model);
  }

  private async attempt(model: ChatModel, channel: ChatChannel, ask: Ask): Promise<Attempt> {
    const { gone } = ask;
    const upstream = routed(model, channel);
    // The budget covers the wait for an answer and, when streaming, each wait for the next chunk.
    const budget = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => budget.abort(), upstream.timeoutMs);
    };
    const disarm = () => clearTimeout(timer);
    const call: ChatCall = {
      ...ask.call,
      model: upstream,
      credential: upstreamKey(upstream, ask.caller.credential, this.upstreamKeys),
      signal: AbortSignal.any([gone, budget.signal]),
    };
    const failure = (err: unknown) =>
      callerError(err, budget.signal.aborted ? upstream.timeoutMs : undefined, gone.aborted);
    const judge = (err: unknown) =>
      verdictOf(err, channel, { timedOut: budget.signal.aborted, canceled: gone.aborted });
    const began = Date.now();
    let released = false;
    // The admin view, the metrics and the channel's health read what each call reports here.
    const release = async (v: Verdict) => {
      if (released) return;
      released = true;
      await this.router.release(model, channel, ask.holder, v, Date.now() - began);
    };
    const provider = this.providers[upstream.provider];
    arm();
    try {
      if (!call.request.stream) {
        const completion = await provider.complete(call);
        await release(SUCCEEDED);
        return { ok: true, outcome: { stream: false, completion } };
      }
      const chunks = await provider.stream(call);
      // A stream the route never reads (its client left first) gives its lease back all the same.
      const left = () => void release(CANCELED);
      gone.addEventListener('abort', left, { once: true });
      const ended = (how: StreamEnd) => {
        gone.removeEventListener('abort', left);
        return release(how === 'done' ? SUCCEEDED : how === 'stopped' ? CANCELED : judge(how.err));
      };
      return { ok: true, outcome: { stream: true, chunks: paced(chunks, arm, disarm, failure, ended) } };
    } catch (err) {
      const v = judge(err);
      await release(v);
      return { ok: false, error: failure(err), verdict: v };
    } finally {
      disarm();
    }
  }
}

/** How a relayed stream ended: complete, stopped by its consumer (client gone), or failed. */
type StreamEnd = 'done' | 'stopped' | { err: unknown };

/** Re-arms the time budget while waiting for each chunk, maps failures as above, and reports the end. */
async function* paced<T>(
  chunks: AsyncIterable<T>,
  arm: () => void,
  disarm: () => void,
  failure: (err: unknown) => unknown,
  ended: (how: StreamEnd) => Promise<void>,
): AsyncGenerator<T> {
  const it = chunks[Symbol.asyncIterator]();
  let how: StreamEnd = 'stopped';
  try {
    for (;;) {
      arm();
      const r = await it.next();
      disarm();
      if (r.done) {
        how = 'done';
        return;
      }
      yield r.value;
    }
  } catch (err) {
    how = { err };
    throw failure(err);
  } finally {
    disarm();
    try {
      // Ends the upstream request too when the consumer stops early (client gone).
      await it.return?.();
    } finally {
      await ended(how);
    }
  }
}
