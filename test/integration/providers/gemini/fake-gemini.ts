// A fake Gemini upstream for tests: a real HTTP server on 127.0.0.1 that speaks
// `POST /v1beta/models/{model}:generateContent`, records every request it receives and answers
// each call as programmed (queue of behaviours, a function of the call, or a default).
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { answerLater, closedPortUrl, FakeServer, readBody, sendJson } from '../../../support/fake-server.js';

export interface RecordedRequest {
  /** 1-based call number, in order of arrival. */
  n: number;
  method: string;
  path: string;
  /** `{model}` of the path, or null when the path is not a generateContent call. */
  model: string | null;
  headers: IncomingHttpHeaders;
  raw: string;
  /** The parsed JSON body (null if the body is not JSON). */
  body: unknown;
  /** Date.now() when the whole request body had arrived. */
  at: number;
}

export type FakePart =
  | { text: string; thought?: boolean }
  | { inlineData: { mimeType?: string; data: string }; thought?: boolean }
  /** Anything else an upstream may send (function calls, file data, malformed parts). */
  | Record<string, unknown>;

export type Behaviour =
  | {
      kind: 'ok';
      parts: FakePart[];
      responseId?: string;
      modelVersion?: string;
      finishReason?: string;
      delayMs?: number;
      /** Further candidates after the first (whose parts are `parts`). */
      more?: FakePart[][];
      /** The answer waits for this promise (after `delayMs`): a test holds a call open, then releases it. */
      hold?: Promise<unknown>;
    }
  | { kind: 'error'; status: number; message: string; googleStatus?: string; retryAfter?: string; delayMs?: number }
  /** Destroys the socket once the whole request has arrived, without answering (after `delayMs`). */
  | { kind: 'drop'; delayMs?: number };

export type Program = Behaviour | ((call: RecordedRequest) => Behaviour);

/** A 1×1 red PNG. */
export const TINY_PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC',
  'base64',
);

const GOOGLE_STATUS: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  402: 'FAILED_PRECONDITION',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  408: 'DEADLINE_EXCEEDED',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

// Behaviour builders.
export const ok = (
  parts: FakePart[] = [{ inlineData: { mimeType: 'image/png', data: TINY_PNG.toString('base64') } }],
  extra: Partial<Extract<Behaviour, { kind: 'ok' }>> = {},
): Behaviour => ({ kind: 'ok', parts, ...extra });
export const fail = (
  status: number,
  message: string,
  extra: Partial<Extract<Behaviour, { kind: 'error' }>> = {},
): Behaviour => ({ kind: 'error', status, message, ...extra });
export const drop = (delayMs = 0): Behaviour => ({ kind: 'drop', delayMs });
export const delayed = (delayMs: number, b: Behaviour): Behaviour => ({ ...b, delayMs });

const PATH = /^\/v1beta\/models\/([^/:]+):generateContent$/;

export class FakeGemini extends FakeServer<RecordedRequest> {
  private readonly queue: Program[] = [];
  private fallback: Program = ok();

  constructor() {
    super('fake gemini');
  }

  protected handle(req: IncomingMessage, res: ServerResponse): void {
    readBody(req, (raw, body) => {
      const url = new URL(req.url ?? '/', 'http://fake');
      const m = PATH.exec(url.pathname);
      const call: RecordedRequest = {
        n: this.requests.length + 1,
        method: req.method ?? '',
        path: url.pathname,
        model: m ? decodeURIComponent(m[1]) : null,
        headers: req.headers,
        raw,
        body,
        at: Date.now(),
      };
      this.record(call);
      if (req.method !== 'POST' || !m) {
        return send(res, 404, {
          error: { code: 404, message: `no route ${req.method} ${url.pathname}`, status: 'NOT_FOUND' },
        });
      }
      const program = this.queue.shift() ?? this.fallback;
      const b = typeof program === 'function' ? program(call) : program;
      answerLater(res, { delayMs: b.delayMs, drop: b.kind === 'drop' }, () => {
        if (b.kind === 'ok' && b.hold) void b.hold.then(() => answerLater(res, {}, () => this.answer(call, b, res)));
        else this.answer(call, b, res);
      });
    });
  }

  /** Behaviours for the next calls, in order; once used up, the default answers. */
  enqueue(...programs: Program[]): this {
    this.queue.push(...programs);
    return this;
  }

  /** The behaviour (or function of the call) used when the queue is empty. */
  setDefault(program: Program): this {
    this.fallback = program;
    return this;
  }

  /** Forgets recorded requests and queued behaviours; the default goes back to `ok()`. */
  reset(): void {
    this.forget();
    this.queue.length = 0;
    this.fallback = ok();
  }

  /** Resolves with the next request to arrive. */
  async nextRequest(timeoutMs?: number): Promise<RecordedRequest> {
    const all = await this.waitForRequests(this.requests.length + 1, timeoutMs);
    return all[all.length - 1];
  }

  private answer(call: RecordedRequest, b: Behaviour, res: ServerResponse): void {
    if (b.kind === 'drop') return;
    if (b.kind === 'error') {
      const headers: Record<string, string> = b.retryAfter !== undefined ? { 'retry-after': b.retryAfter } : {};
      send(
        res,
        b.status,
        {
          error: { code: b.status, message: b.message, status: b.googleStatus ?? GOOGLE_STATUS[b.status] ?? 'UNKNOWN' },
        },
        headers,
      );
      return;
    }
    send(res, 200, {
      candidates: [b.parts, ...(b.more ?? [])].map((parts, index) => ({
        content: { role: 'model', parts },
        finishReason: b.finishReason ?? 'STOP',
        index,
      })),
      usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 1290, totalTokenCount: 1300 },
      modelVersion: b.modelVersion ?? call.model ?? 'fake-model',
      responseId: b.responseId ?? `fake-response-${call.n}`,
    });
  }
}

const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) =>
  sendJson(res, status, body, headers, 'application/json; charset=UTF-8');

export async function startFakeGemini(): Promise<FakeGemini> {
  return new FakeGemini().start();
}

export { closedPortUrl };

/** A Kiln gemini model pointed at this fake: short timeouts so failure tests stay quick. */
export function fakeGeminiModel(fake: FakeGemini, over: Record<string, unknown> = {}) {
  return {
    provider: 'gemini',
    baseUrl: fake.baseUrl,
    credential: 'passthrough',
    timeoutMs: 5000,
    heartbeatTimeoutMs: 1000,
    ...over,
  };
}

/**
 * An image model over two channels: `primary` on this fake (it cools down after 2 refusals, and
 * stays cooling for the whole test file) and a local `backup` that always answers.
 */
export function dualChannelModel(fake: FakeGemini, id: string) {
  return {
    id,
    kind: 'image',
    heartbeatTimeoutMs: 1000,
    channels: [
      {
        id: 'primary',
        provider: 'gemini',
        baseUrl: fake.baseUrl,
        priority: 10,
        timeoutMs: 5000,
        cooldownAfter: 2,
        cooldownMs: 300_000,
      },
      { id: 'backup', provider: 'local', latencyMs: 20, concurrency: 4, idempotent: true },
    ],
  };
}
