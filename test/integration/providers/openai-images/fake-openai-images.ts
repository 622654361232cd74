// A fake images upstream for tests: one real HTTP server speaking OpenAI's images API, and Seedream's
// dialect of it on Volcengine Ark / BytePlus ModelArk, as their public references give them:
//   POST /v1/images/generations   JSON {model, prompt, n?, size?, quality?, background?, output_format?,
//                                 response_format?}  → {created, data: [{b64_json | url, revised_prompt?}],
//                                 output_format?, usage?}
//   POST /v1/images/edits         multipart/form-data: the same text fields, files as `image[]` (what
//                                 openai-node sends for an array) → the same answer
//   POST /api/v3/images/generations  Seedream: JSON {model, prompt, image? (URL or data URI, string or
//                                 array), size, response_format (url by default), watermark?} →
//                                 {model, created, data: [{url | b64_json, size} | {error: {code, message}}], usage}
//   GET  /files/{id}.{png|jpeg|webp}  the images answered as URLs (no key needed, as a CDN's link)
// Errors carry OpenAI's body {error: {message, type, param, code}} (Ark's has the same keys with its
// own codes: InvalidParameter, QuotaExceeded, ServerOverloaded, …). The key is checked as a Bearer
// token: missing or wrong → 401 `invalid_api_key` (Ark: AuthenticationError).
// Fault injection: error answers (with Retry-After), delays, held answers, dropped connections.
// Sources (read, not copied):
//   - OpenAI API reference, Images: https://platform.openai.com/docs/api-reference/images/create and
//     …/images/createEdit; error codes: https://platform.openai.com/docs/guides/error-codes
//   - openai-node 7.57 (node_modules/openai/src): resources/images.ts (ImageGenerateParams,
//     ImageEditParams, ImagesResponse), internal/uploads.ts (array fields as `key[]`), core/error.ts
//     and client.ts makeStatusError (the `error` object's message/type/param/code; no idempotency header)
//   - Volcengine Ark image generation API: https://www.volcengine.com/docs/82379/1541523; BytePlus
//     ModelArk common error codes: https://docs.byteplus.com/en/docs/ModelArk/1299023
import { randomBytes } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { answerLater, FakeServer, sendJson } from '../../../support/fake-server.js';
import { TINY_PNG } from '../gemini/fake-gemini.js';

export interface ImagesRecorded {
  n: number;
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The JSON body, or the multipart form's text fields. */
  body: any;
  /** The multipart form's files, in order. */
  files: { field: string; name: string; type: string; bytes: Buffer }[];
  at: number;
  /** When the client closed the connection before the answer (Date.now()); unset otherwise. */
  closedAt?: number;
}

export type ImagesFault =
  | {
      kind: 'ok';
      /** How the images come: as the request asked (default: b64_json, url for Ark), or forced. */
      as?: 'b64_json' | 'url';
      /** The bytes of each image (default the tiny PNG). */
      image?: Buffer;
      /** An image URL answered as is (instead of one this fake serves). */
      url?: string;
      /** Images answered (default: the request's n, else 1). */
      count?: number;
      revisedPrompt?: string;
      /** Seedream: error entries in the data beside (or instead of) the images. */
      itemErrors?: { code: string; message: string }[];
      delayMs?: number;
      /** The answer waits for this promise: a test holds a call open, then releases it (or cancels). */
      hold?: Promise<unknown>;
    }
  | {
      kind: 'error';
      status: number;
      message: string;
      type?: string;
      code?: string | null;
      param?: string | null;
      retryAfter?: string;
      delayMs?: number;
    }
  /** Destroys the socket once the request has arrived, without answering. */
  | { kind: 'drop'; delayMs?: number };

export const ok = (extra: Partial<Extract<ImagesFault, { kind: 'ok' }>> = {}): ImagesFault => ({
  kind: 'ok',
  ...extra,
});
export const fail = (
  status: number,
  message: string,
  extra: Partial<Extract<ImagesFault, { kind: 'error' }>> = {},
): ImagesFault => ({ kind: 'error', status, message, ...extra });
export const drop = (delayMs = 0): ImagesFault => ({ kind: 'drop', delayMs });

const OPENAI_TYPE: Record<number, string> = { 400: 'invalid_request_error', 401: 'invalid_request_error' };
const ARK_TYPE: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  429: 'TooManyRequests',
  500: 'InternalServiceError',
};

export class FakeOpenAIImages extends FakeServer<ImagesRecorded> {
  /** The key a caller must send (`Authorization: Bearer …`); unset accepts any, or none. */
  key: string | undefined;
  /** Answers the next calls, in order; then `onCall`, then success. */
  private readonly queue: ImagesFault[] = [];
  onCall: ((c: ImagesRecorded) => ImagesFault | undefined) | undefined;
  /** Images served under /files/ (the `url` answers), and how often each was fetched. */
  readonly files = new Map<string, { bytes: Buffer; type: string; gets: number }>();

  constructor() {
    super('fake openai images');
  }

  enqueue(...faults: ImagesFault[]): this {
    this.queue.push(...faults);
    return this;
  }

  reset(): void {
    this.forget();
    this.queue.length = 0;
    this.onCall = undefined;
    this.key = undefined;
    this.files.clear();
  }

  /** The generations and edits calls (not the file downloads). */
  calls(): ImagesRecorded[] {
    return this.requests.filter((r) => r.method === 'POST');
  }

  protected handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => void this.route(req, res, Buffer.concat(chunks)));
  }

  private async route(req: IncomingMessage, res: ServerResponse, raw: Buffer): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://fake').pathname;
    if (req.method === 'GET' && path.startsWith('/files/')) return this.serveFile(path, res);
    const ark = path.startsWith('/api/v3/');
    const call: ImagesRecorded = {
      n: this.requests.length + 1,
      method: req.method ?? '',
      path,
      headers: req.headers,
      body: null,
      files: [],
      at: Date.now(),
    };
    const multipart = /^multipart\/form-data/i.test(req.headers['content-type'] ?? '');
    try {
      if (multipart) await readForm(raw, req.headers['content-type']!, call);
      else call.body = JSON.parse(raw.toString('utf8'));
    } catch {
      /* left null: answered 400 below */
    }
    this.record(call);
    res.once('close', () => {
      if (!res.writableFinished) call.closedAt = Date.now();
    });
    const known = ['/v1/images/generations', '/v1/images/edits', '/api/v3/images/generations'];
    if (req.method !== 'POST' || !known.includes(path))
      return this.error(res, ark, { kind: 'error', status: 404, message: `Invalid URL (${req.method} ${path})` });
    const auth = req.headers.authorization;
    if (this.key !== undefined && auth !== `Bearer ${this.key}`)
      return this.error(res, ark, {
        kind: 'error',
        status: 401,
        message: ark
          ? 'The API key or AK/SK in the request is missing or invalid.'
          : `Incorrect API key provided: ${auth ? 'sk-…' : 'none'}. You can find your API key at https://platform.openai.com/account/api-keys.`,
        code: ark ? 'AuthenticationError' : 'invalid_api_key',
      });
    if (!call.body || typeof call.body.prompt !== 'string')
      return this.error(res, ark, {
        kind: 'error',
        status: 400,
        message: 'Missing required parameter: prompt.',
        code: ark ? 'MissingParameter' : 'missing_required_parameter',
        param: 'prompt',
      });
    const fault = this.queue.shift() ?? this.onCall?.(call) ?? ok();
    answerLater(res, { delayMs: fault.delayMs, drop: fault.kind === 'drop' }, () => {
      if (fault.kind === 'error') return this.error(res, ark, fault);
      if (fault.kind !== 'ok') return;
      const answer = () => answerLater(res, {}, () => sendJson(res, 200, this.images(call, ark, fault)));
      if (fault.hold) void fault.hold.then(answer, answer);
      else answer();
    });
  }

  private images(call: ImagesRecorded, ark: boolean, f: Extract<ImagesFault, { kind: 'ok' }>) {
    const body = call.body;
    const as = f.as ?? body.response_format ?? (ark ? 'url' : 'b64_json');
    const count = f.count ?? Number(body.n ?? 1);
    const bytes = f.image ?? TINY_PNG;
    const format = body.output_format ?? 'png';
    const data: Record<string, unknown>[] = [];
    for (let i = 0; i < count; i++) {
      const item: Record<string, unknown> =
        as === 'url' ? { url: f.url ?? this.serve(bytes, format) } : { b64_json: bytes.toString('base64') };
      if (f.revisedPrompt) item.revised_prompt = f.revisedPrompt;
      if (ark) item.size = body.size ?? '2048x2048';
      data.push(item);
    }
    for (const e of f.itemErrors ?? []) data.push({ error: e });
    const created = Math.floor(Date.now() / 1000);
    return ark
      ? {
          model: body.model,
          created,
          data,
          usage: { generated_images: count, output_tokens: 4096, total_tokens: 4096 },
        }
      : {
          created,
          data,
          ...(body.background ? { background: body.background } : {}),
          output_format: format,
          size: body.size ?? '1024x1024',
          usage: { input_tokens: 10, output_tokens: 4160, total_tokens: 4170 },
        };
  }

  private serve(bytes: Buffer, format: string): string {
    const id = `${randomBytes(8).toString('hex')}.${format}`;
    this.files.set(id, { bytes, type: `image/${format}`, gets: 0 });
    return `${this.baseUrl}/files/${id}`;
  }

  private serveFile(path: string, res: ServerResponse): void {
    const f = this.files.get(path.slice('/files/'.length));
    if (!f) return void res.writeHead(404, { 'content-type': 'text/plain' }).end('not here');
    f.gets++;
    res.writeHead(200, { 'content-type': f.type, 'content-length': f.bytes.length }).end(f.bytes);
  }

  private error(res: ServerResponse, ark: boolean, f: Extract<ImagesFault, { kind: 'error' }>): void {
    const type =
      f.type ??
      (ark ? ARK_TYPE[f.status] : OPENAI_TYPE[f.status]) ??
      (f.status >= 500 ? 'server_error' : 'invalid_request_error');
    const message = ark ? `${f.message} Request id: 0217${randomBytes(6).toString('hex')}` : f.message;
    const headers: Record<string, string> = f.retryAfter ? { 'retry-after': f.retryAfter } : {};
    sendJson(res, f.status, { error: { message, type, param: f.param ?? null, code: f.code ?? null } }, headers);
  }
}

/** The form's text fields into `call.body`, its files into `call.files` (Node's own multipart reader). */
async function readForm(raw: Buffer, contentType: string, call: ImagesRecorded): Promise<void> {
  const form = await new Response(new Uint8Array(raw), { headers: { 'content-type': contentType } }).formData();
  const body: Record<string, string> = {};
  for (const [field, value] of form.entries()) {
    if (typeof value === 'string') body[field] = value;
    else call.files.push({ field, name: value.name, type: value.type, bytes: Buffer.from(await value.arrayBuffer()) });
  }
  call.body = body;
}

/** A fake on `host` (127.0.0.2 stands in for a public host, so its URL answers pass the SSRF guard). */
export function startFakeOpenAIImages(host = '127.0.0.2'): Promise<FakeOpenAIImages> {
  return new FakeOpenAIImages().start(host);
}
