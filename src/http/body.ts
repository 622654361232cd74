// JSON body parsing with the contract's limits: gzip or br only, 2 MB counted after decompression.
// raw-body stops reading (and so stops the inflater) as soon as the limit is passed, so a
// decompression bomb costs at most the limit in memory.
import { createBrotliDecompress, createGunzip } from 'node:zlib';
import type { Readable } from 'node:stream';
import type { Context, Middleware } from 'koa';
import { koaBody } from 'koa-body';
import getRawBody from 'raw-body';
import { KilnError, type ErrorCode } from '../shared/errors.js';
import { LIMITS } from '../shared/limits.js';
import { REPLAYED_HEADER } from '../shared/idempotency.js';
import { UNFINISHED_STATUSES, type TaskStatus } from '../shared/task.js';

const ALLOWED_ENCODINGS = new Set(['identity', 'gzip', 'br']);

/** What reading a request body refuses (too large, an unknown coding, not JSON): operations with a body document them. */
export const BODY_ERRORS = [
  'request_too_large',
  'unsupported_content_encoding',
  'unsupported_media_type',
] as const satisfies readonly ErrorCode[];

/** The request's content coding, checked: gzip, br or none (unsupported_content_encoding otherwise). */
function contentEncoding(ctx: Context): string {
  const encoding = (ctx.get('content-encoding') || 'identity').trim().toLowerCase();
  if (!ALLOWED_ENCODINGS.has(encoding)) {
    throw new KilnError(
      'unsupported_content_encoding',
      `Content-Encoding "${encoding}" is not accepted; use gzip, br or none.`,
    );
  }
  return encoding;
}

/** Corrupt or truncated gzip/br data, or a broken request stream: the client's doing, never a 500. */
const unreadable = () =>
  new KilnError(
    'invalid_request',
    'The request body could not be read or decompressed; check the data against its Content-Encoding.',
  );

/** The decompressed body as bytes, at most `limitBytes` of them (413 past that), for non-JSON bodies. */
export async function rawBody(ctx: Context, limitBytes = LIMITS.bodyBytes): Promise<Buffer> {
  const encoding = contentEncoding(ctx);
  let stream: Readable = ctx.req;
  if (encoding === 'gzip') stream = ctx.req.pipe(createGunzip());
  else if (encoding === 'br') stream = ctx.req.pipe(createBrotliDecompress());
  try {
    return await getRawBody(stream, { limit: limitBytes });
  } catch (err) {
    if ((err as { status?: number }).status === 413) throw err;
    throw unreadable();
  }
}

export interface JsonBodyOptions {
  /** Decompressed size limit; the contract's 2 MB unless an endpoint documents its own. */
  limitBytes?: number;
  /** Keep the raw text (see `rawBodyBytes`), for limits that depend on the parsed body. */
  keepRaw?: boolean;
}

/** Decompressed size of a body parsed with `keepRaw`. */
export function rawBodyBytes(ctx: Context): number | undefined {
  const raw = (ctx.request as { rawBody?: unknown }).rawBody;
  return typeof raw === 'string' ? Buffer.byteLength(raw) : undefined;
}

export function jsonBody({ limitBytes = LIMITS.bodyBytes, keepRaw = false }: JsonBodyOptions = {}): Middleware {
  const parse = koaBody({
    json: true,
    jsonStrict: true,
    jsonLimit: limitBytes,
    includeUnparsed: keepRaw,
    multipart: false,
    urlencoded: false,
    text: false,
    // Errors without an HTTP status come from the inflater or the request stream.
    onError: (err) => {
      if (typeof (err as { status?: unknown }).status === 'number') throw err;
      throw unreadable();
    },
  });
  return async (ctx, next) => {
    const encoding = contentEncoding(ctx);
    // Content codings are case-insensitive (RFC 9110); the inflater compares them as written.
    if (ctx.req.headers['content-encoding'] !== undefined) ctx.req.headers['content-encoding'] = encoding;
    if (!ctx.is('application/json')) {
      throw new KilnError('unsupported_media_type', 'Send the body as Content-Type: application/json.');
    }
    await parse(ctx, next);
  };
}

/** Answers with JSON that is already serialised (stored views): no parse, no stringify. */
export function sendJsonText(ctx: Context, json: string | Buffer): void {
  ctx.type = 'application/json; charset=utf-8';
  ctx.body = json;
}

/** A poll's answer: the stored view as is, with Retry-After while the task is unfinished. */
export function sendView(ctx: Context, view: { status: TaskStatus; json: string }, pollAfterSeconds: number): void {
  if (UNFINISHED_STATUSES.includes(view.status)) ctx.set('Retry-After', String(pollAfterSeconds));
  sendJsonText(ctx, view.json);
}

/** A content endpoint's answer: 302 to the file. */
export function redirectTo(ctx: Context, url: string): void {
  ctx.status = 302;
  ctx.redirect(url);
}

/** A submit's answer; a keyed submit that named an earlier task says so (Idempotent-Replayed: true). */
export function sendSubmitted(ctx: Context, status: number, body: unknown, replayed: boolean): void {
  if (replayed) ctx.set(REPLAYED_HEADER, 'true');
  ctx.status = status;
  ctx.body = body;
}
