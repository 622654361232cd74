// /v1/videos: create, poll, content. Thin handlers over VideoService. The body is JSON or, as the
// official OpenAI SDK sends it, multipart/form-data (text fields only).
import { createBrotliDecompress, createGunzip } from 'node:zlib';
import type { Readable } from 'node:stream';
import Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import getRawBody from 'raw-body';
import type { Authenticator } from '../infra/auth.js';
import { LIMITS } from '../image/validate.js';
import { parseVideoBody, validateVideo } from './validate.js';
import type { VideoService } from './service.js';
import { KilnError } from '../shared/errors.js';
import { jsonBody } from '../http/body.js';
import './openapi.js';

export interface VideoRouteDeps {
  auth: Authenticator;
  videos: VideoService;
  pollAfterSeconds: number;
}

/** Form fields that carry JSON (the SDK writes nested objects as `input_reference[image_url]`). */
async function formBody(ctx: Context): Promise<Record<string, unknown>> {
  const encoding = (ctx.get('content-encoding') || 'identity').trim().toLowerCase();
  let stream: Readable = ctx.req;
  if (encoding === 'gzip') stream = ctx.req.pipe(createGunzip());
  else if (encoding === 'br') stream = ctx.req.pipe(createBrotliDecompress());
  else if (encoding !== 'identity') throw new KilnError('unsupported_content_encoding', `Content-Encoding "${encoding}" is not accepted; use gzip, br or none.`);
  let raw: Buffer;
  try {
    raw = await getRawBody(stream, { limit: LIMITS.bodyBytes });
  } catch (err) {
    if ((err as { status?: number }).status === 413) throw err;
    throw new KilnError('invalid_request', 'The request body could not be read or decompressed; check the data against its Content-Encoding.');
  }
  let form: FormData;
  try {
    form = await new Response(new Uint8Array(raw), { headers: { 'content-type': ctx.get('content-type') } }).formData();
  } catch {
    throw new KilnError('invalid_request', 'The multipart/form-data body is malformed.');
  }
  const out: Record<string, unknown> = {};
  for (const [name, value] of form) {
    if (typeof value !== 'string') {
      throw new KilnError('invalid_request', `File uploads are not accepted (field "${name}"); pass the reference image as an http(s) URL in "image".`);
    }
    if (name === 'input_reference[image_url]') out.input_reference = { image_url: value };
    else if (name === 'nodeInfoList') {
      try { out.nodeInfoList = JSON.parse(value); } catch { throw new KilnError('invalid_request', 'nodeInfoList must be a JSON array.'); }
    } else out[name] = value;
  }
  return out;
}

async function readBody(ctx: Context): Promise<unknown> {
  if (ctx.is('multipart/form-data')) return formBody(ctx);
  await jsonBody()(ctx, async () => undefined);
  return ctx.request.body;
}

export function videoRoutes({ auth, videos, pollAfterSeconds }: VideoRouteDeps): Middleware {
  const router = new Router();
  const caller = (ctx: Context) => auth.authenticate(ctx.get('authorization') || undefined);

  router.post('/v1/videos', async (ctx) => {
    const who = await caller(ctx);
    const body = parseVideoBody(await readBody(ctx));
    const model = videos.model(body.model);
    const request = validateVideo(body, model);
    ctx.status = 200;
    ctx.body = await videos.submit(who, model, request);
  });

  router.get('/v1/videos/:id', async (ctx) => {
    const video = await videos.get(await caller(ctx), ctx.params.id);
    if (video.status === 'queued' || video.status === 'in_progress') ctx.set('Retry-After', String(pollAfterSeconds));
    ctx.body = video;
  });

  router.get('/v1/videos/:id/content', async (ctx) => {
    const variant = typeof ctx.query.variant === 'string' ? ctx.query.variant : ctx.query.variant === undefined ? 'video' : '';
    const url = await videos.contentUrl(await caller(ctx), ctx.params.id, variant);
    ctx.status = 302;
    ctx.redirect(url);
  });

  const routes = router.routes() as Middleware;
  const allowed = router.allowedMethods() as Middleware;
  return (ctx, next) => routes(ctx, () => allowed(ctx, next));
}
