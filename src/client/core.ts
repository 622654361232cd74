// The HTTP layer of the client: base URL and key, injectable fetch, typed errors, retries of
// one-shot calls. Polling has its own schedule (polling.ts) and calls with retries off.
import {
  APIConnectionError,
  APIConnectionTimeoutError,
  errorFromResponse,
  isRetryable,
  KilnClientError,
  parseRetryAfter,
} from './errors.js';
import { deadline, type Deadline } from '../shared/deadline.js';
import { DEFAULT_POLLING, realClock, retryDelay, type Clock, type PollingOptions } from './polling.js';

export interface ClientOptions {
  /** Default: env KILN_BASE_URL, else http://localhost:8787. */
  baseURL?: string;
  /** Default: env KILN_API_KEY. Sent as `Authorization: Bearer <key>`. */
  apiKey?: string;
  /** Any WHATWG-compatible fetch (tests inject a fake). Default: the global fetch. */
  fetch?: typeof fetch;
  /** Budget of one HTTP request, ms. Default 60 000. */
  timeoutMs?: number;
  /**
   * Retries of one-shot calls (submit, chat, video create) after a transport error, 429 or
   * 502/503/504. Default 2. Submits and video creates carry one Idempotency-Key over all their
   * retries, so a retry after a lost answer returns the task the first attempt created.
   */
  maxRetries?: number;
  /** Polling schedule; defaults follow the contract's guidance (50 s, 10 s, 1200 s). */
  polling?: Partial<PollingOptions>;
  /** Time source for polling and retries (tests inject a fake). */
  clock?: Clock;
  defaultHeaders?: Record<string, string>;
}

export interface RequestOptions {
  body?: unknown;
  query?: Record<string, string | number | undefined>;
  signal?: AbortSignal;
  /** Retries on retryable errors; polling passes 0 and applies its own schedule. */
  maxRetries?: number;
  /** Return 3xx responses instead of following them (content redirects). */
  manualRedirect?: boolean;
  /** Return the raw response (streams, downloads) instead of parsed JSON. */
  raw?: boolean;
  /** Extra headers of this call, sent alike on every retry (e.g. `Idempotency-Key`). */
  headers?: Record<string, string>;
  /** Added to the request budget: a long-poll the server may hold this long. */
  extraTimeoutMs?: number;
}

export interface APIResponse<T> {
  data: T;
  response: Response;
}

export class KilnCore {
  readonly baseURL: string;
  readonly polling: PollingOptions;
  readonly clock: Clock;
  private readonly apiKey: string;
  private readonly fetchImpl: typeof fetch;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly defaultHeaders: Record<string, string>;

  constructor(opts: ClientOptions = {}) {
    // Read through globalThis: in a browser there is no `process` (and no Node types to name it).
    const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env ?? {};
    this.baseURL = (opts.baseURL ?? env.KILN_BASE_URL ?? 'http://localhost:8787').replace(/\/+$/, '');
    const apiKey = opts.apiKey ?? env.KILN_API_KEY;
    if (!apiKey) throw new KilnClientError('No API key: pass { apiKey } or set KILN_API_KEY.');
    this.apiKey = apiKey;
    this.fetchImpl = opts.fetch ?? globalThis.fetch.bind(globalThis);
    this.timeoutMs = opts.timeoutMs ?? 60_000;
    this.maxRetries = opts.maxRetries ?? 2;
    this.polling = { ...DEFAULT_POLLING, ...opts.polling };
    this.clock = opts.clock ?? realClock;
    this.defaultHeaders = opts.defaultHeaders ?? {};
  }

  url(path: string, query?: RequestOptions['query']): string {
    const u = new URL(path.startsWith('http') ? path : `${this.baseURL}${path.startsWith('/') ? '' : '/'}${path}`);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) u.searchParams.set(k, String(v));
    return u.toString();
  }

  /** True when `url` points at this Kiln: only then does the API key go along. */
  isOwnOrigin(url: string): boolean {
    return new URL(url, this.baseURL).origin === new URL(this.baseURL).origin;
  }

  async request<T>(method: string, path: string, opts: RequestOptions = {}): Promise<APIResponse<T>> {
    const retries = opts.maxRetries ?? this.maxRetries;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once<T>(method, path, opts);
      } catch (err) {
        if (attempt >= retries || !isRetryable(err) || opts.signal?.aborted) throw err;
        const hint = (err as { retryAfter?: number }).retryAfter;
        await this.clock.sleep(
          retryDelay(this.polling, attempt + 1, hint !== undefined ? hint * 1000 : undefined),
          opts.signal,
        );
      }
    }
  }

  /** GET of any URL (a generated file, a content redirect target); the key is sent only to this Kiln. */
  async fetchUrl(url: string, signal?: AbortSignal): Promise<Response> {
    const abs = this.url(url);
    const headers: Record<string, string> = this.isOwnOrigin(abs) ? { authorization: `Bearer ${this.apiKey}` } : {};
    const { res, timeout } = await this.send(abs, { method: 'GET', headers, redirect: 'follow' }, signal);
    if (res.ok) return res; // the caller reads the body, still within the timeout
    throw errorFromResponse(res.status, res.headers, await readBody(res).finally(timeout.clear));
  }

  private async once<T>(method: string, path: string, opts: RequestOptions): Promise<APIResponse<T>> {
    const headers: Record<string, string> = {
      accept: 'application/json',
      ...this.defaultHeaders,
      ...opts.headers,
      authorization: `Bearer ${this.apiKey}`,
    };
    let body: string | undefined;
    if (opts.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(opts.body);
    }
    const { res, timeout } = await this.send(
      this.url(path, opts.query),
      { method, headers, body, redirect: opts.manualRedirect ? 'manual' : 'follow' },
      opts.signal,
      opts.extraTimeoutMs,
    );
    try {
      if (res.status >= 400) throw errorFromResponse(res.status, res.headers, await readBody(res));
      if (opts.raw || (opts.manualRedirect && res.status >= 300 && res.status < 400))
        return { data: undefined as T, response: res };
      const data = await readBody(res);
      return { data: data as T, response: res };
    } finally {
      // A raw body is read by the caller, still within the timeout; any other exchange is over.
      if (!opts.raw || res.status >= 400) timeout.clear();
    }
  }

  /** The response's headers; `timeout` also bounds reading its body, and is the caller's to clear. */
  private async send(
    url: string,
    init: RequestInit,
    signal?: AbortSignal,
    extraMs = 0,
  ): Promise<{ res: Response; timeout: Deadline }> {
    const timeout = deadline(this.timeoutMs + extraMs);
    try {
      const res = await this.fetchImpl(url, {
        ...init,
        signal: signal ? AbortSignal.any([signal, timeout.signal]) : timeout.signal,
      });
      return { res, timeout };
    } catch (err) {
      timeout.clear();
      if (signal?.aborted) throw signal.reason;
      if (timeout.expired)
        throw new APIConnectionTimeoutError(`${init.method} ${url}: no response within ${this.timeoutMs} ms`, {
          cause: err,
        });
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      const detail = cause?.code ?? cause?.message ?? (err as Error).message;
      throw new APIConnectionError(`${init.method} ${url}: connection failed (${detail})`, { cause: err });
    }
  }
}

/**
 * A fresh `Idempotency-Key` for one logical submit: a random UUID (Node 20 and browsers). Where
 * `crypto.randomUUID` is missing (a browser page outside a secure context) it is built from
 * `crypto.getRandomValues`, still 122 random bits.
 */
export function newIdempotencyKey(): string {
  const c = globalThis.crypto;
  if (typeof c?.randomUUID === 'function') return c.randomUUID();
  const b = c.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

async function readBody(res: Response): Promise<unknown> {
  const text = await res.text().catch(() => '');
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The long-poll headers of a check that may wait `seconds` (none for 0). */
export function waitRequest(seconds: number): Pick<RequestOptions, 'headers' | 'extraTimeoutMs'> {
  return seconds > 0 ? { headers: { prefer: `wait=${seconds}` }, extraTimeoutMs: seconds * 1000 } : {};
}

/** True when the server honoured a wait (`Preference-Applied: wait=N`). */
export function waitApplied(res: Response): boolean {
  return /(^|[,\s])wait=/i.test(res.headers.get('preference-applied') ?? '');
}

/** ms of a `Retry-After` header, or undefined. */
export function retryAfterMs(res: Response): number | undefined {
  const s = parseRetryAfter(res.headers.get('retry-after'));
  return s === undefined ? undefined : s * 1000;
}
