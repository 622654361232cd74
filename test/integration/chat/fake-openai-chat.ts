// A fake OpenAI-compatible upstream for tests: a real HTTP server on 127.0.0.1 that speaks
// `POST /v1/chat/completions` (JSON, or server-sent events when the request says `stream: true`),
// records every request and how its connection ended, and answers each call as programmed.
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { answerLater, FakeServer, readBody, sendJson } from '../../support/fake-server.js';

export interface RecordedChat {
  n: number;
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: any;
  /** Resolves `aborted` when the client closed the connection before the answer was complete. */
  ended: Promise<'finished' | 'aborted'>;
}

/** Lets a test hold a streamed answer at a point and let it go on later. */
export class Gate {
  private open!: () => void;
  readonly opened = new Promise<void>((r) => {
    this.open = r;
  });
  release(): void {
    this.open();
  }
}

export type ChatBehaviour =
  /** A normal answer: JSON, or SSE word by word when the request asked to stream. */
  | {
      kind: 'ok';
      content: string;
      finishReason?: string;
      delayMs?: number;
      holdAfter?: number;
      gate?: Gate;
      done?: boolean;
      extra?: Record<string, unknown>;
    }
  | { kind: 'error'; status: number; message: string; retryAfter?: string; delayMs?: number }
  /** Streams `after` chunks, then sends an error event (`data: {"error": …}`) and ends. */
  | { kind: 'stream-error'; after: number; message: string }
  /** Streams `after` chunks (0: only the headers), then destroys the socket. */
  | { kind: 'drop'; after: number }
  /** Streams `after` chunks, then ends the response cleanly without a finish_reason or [DONE]. */
  | { kind: 'end-early'; after: number }
  /** Never answers. */
  | { kind: 'hang' }
  /** Reads the whole request, then closes the connection without a byte of an answer. */
  | { kind: 'hangup'; delayMs?: number }
  | { kind: 'raw'; status: number; contentType: string; body: string };

export const ok = (
  content = 'Hello from the fake upstream.',
  extra: Partial<Extract<ChatBehaviour, { kind: 'ok' }>> = {},
): ChatBehaviour => ({ kind: 'ok', content, ...extra });
export const fail = (
  status: number,
  message: string,
  extra: Partial<Extract<ChatBehaviour, { kind: 'error' }>> = {},
): ChatBehaviour => ({ kind: 'error', status, message, ...extra });

const ERROR_TYPE: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'insufficient_quota',
  429: 'rate_limit_exceeded',
  500: 'server_error',
};

export class FakeOpenAI extends FakeServer<RecordedChat> {
  private readonly queue: ChatBehaviour[] = [];

  constructor() {
    super('fake openai');
  }

  protected handle(req: IncomingMessage, res: ServerResponse): void {
    readBody(req, (_raw, body) => {
      const ended = new Promise<'finished' | 'aborted'>((r) =>
        res.once('close', () => r(res.writableFinished ? 'finished' : 'aborted')),
      );
      const call: RecordedChat = {
        n: this.requests.length + 1,
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body,
        ended,
      };
      this.record(call);
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions')
        return sendJson(res, 404, { error: { message: `no route ${req.method} ${req.url}`, type: 'not_found' } });
      const b = this.queue.shift() ?? ok();
      answerLater(res, { delayMs: 'delayMs' in b ? b.delayMs : undefined, drop: b.kind === 'hangup' }, () => {
        void this.answer(call, b, res);
      });
    });
  }

  /** Behaviours for the next calls, in order; once used up, `ok()` answers. */
  enqueue(...b: ChatBehaviour[]): this {
    this.queue.push(...b);
    return this;
  }

  reset(): void {
    this.forget();
    this.queue.length = 0;
  }

  /** Resolves with the `n`-th request (1-based, since the last reset) once it has arrived. */
  async request(n: number, timeoutMs = 10_000): Promise<RecordedChat> {
    return (await this.waitForRequests(n, timeoutMs))[n - 1];
  }

  private async answer(call: RecordedChat, b: ChatBehaviour, res: ServerResponse): Promise<void> {
    if (res.destroyed) return;
    const model = typeof call.body?.model === 'string' ? call.body.model : 'fake-model';
    const id = `chatcmpl-fake-${call.n}`;
    switch (b.kind) {
      case 'hang':
      case 'hangup':
        return;
      case 'raw':
        res.writeHead(b.status, { 'content-type': b.contentType });
        res.end(b.body);
        return;
      case 'error': {
        const headers: Record<string, string> = b.retryAfter !== undefined ? { 'retry-after': b.retryAfter } : {};
        sendJson(
          res,
          b.status,
          { error: { message: b.message, type: ERROR_TYPE[b.status] ?? 'api_error', code: null } },
          headers,
        );
        return;
      }
      default:
        break;
    }
    const content = b.kind === 'ok' ? b.content : 'partial answer before trouble';
    if (call.body?.stream !== true && b.kind === 'ok') {
      sendJson(res, 200, {
        id,
        object: 'chat.completion',
        created: 1_700_000_000,
        model,
        system_fingerprint: 'fp_fake',
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content, refusal: null },
            logprobs: null,
            finish_reason: b.finishReason ?? 'stop',
          },
        ],
        usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 },
        ...b.extra,
      });
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.flushHeaders();
    const chunk = (delta: object, finish: string | null = null) => {
      const choices = [{ index: 0, delta, finish_reason: finish }];
      const event = { id, object: 'chat.completion.chunk', created: 1_700_000_000, model, choices };
      return `data: ${JSON.stringify(event)}\n\n`;
    };
    const events = [
      chunk({ role: 'assistant', content: '' }),
      ...content.split(/(?<= )/).map((w) => chunk({ content: w })),
    ];
    const limit = b.kind === 'ok' ? events.length : b.after;
    for (let i = 0; i < Math.min(limit, events.length); i++) {
      if (res.destroyed) return;
      res.write(events[i]);
      if (b.kind === 'ok' && b.gate && b.holdAfter === i + 1) await b.gate.opened;
      await new Promise((r) => setImmediate(r));
    }
    if (res.destroyed) return;
    if (b.kind === 'drop') {
      res.socket?.destroy();
      return;
    }
    if (b.kind === 'end-early') {
      res.end();
      return;
    }
    if (b.kind === 'stream-error') {
      res.end(`data: ${JSON.stringify({ error: { message: b.message, type: 'server_error' } })}\n\n`);
      return;
    }
    res.write(chunk({}, b.finishReason ?? 'stop'));
    res.end(b.done === false ? '' : 'data: [DONE]\n\n');
  }
}

export async function startFakeOpenAI(): Promise<FakeOpenAI> {
  return new FakeOpenAI().start();
}
