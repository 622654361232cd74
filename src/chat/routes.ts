// POST /v1/chat/completions: a plain JSON reply, or server-sent events relayed chunk by chunk.
import { Readable } from 'node:stream';
import Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import type { Logger } from 'pino';
import type { ChatChunk } from './types.js';
import type { Authenticator } from '../infra/auth.js';
import type { ChatService } from './service.js';
import { KilnError } from '../shared/errors.js';
import { jsonBody, rawBodyBytes } from '../http/body.js';
import { toKilnError } from '../http/errors.js';
import './openapi.js';

export interface ChatRouteDeps {
  auth: Authenticator;
  chat: ChatService;
  log: Logger;
}

async function readBody(ctx: Context, limitBytes: number): Promise<void> {
  try {
    await jsonBody({ limitBytes, keepRaw: true })(ctx, async () => undefined);
  } catch (err) {
    // The shared message names the 2 MB of task submissions; chat has its own limit.
    if ((err as { status?: unknown }).status === 413) {
      throw new KilnError('request_too_large', `The request body is larger than ${limitBytes} bytes after decompression.`);
    }
    throw err;
  }
}

/** Once the reply has started, a failure can only be told as a last event (the OpenAI SDK throws it). */
async function* sse(chunks: AsyncIterable<ChatChunk>, log: Logger): AsyncGenerator<string> {
  try {
    for await (const c of chunks) yield `data: ${JSON.stringify(c)}\n\n`;
    yield 'data: [DONE]\n\n';
  } catch (err) {
    const known = toKilnError(err);
    if (!known) log.error({ err }, 'chat stream failed');
    const e = known ?? new KilnError('internal_error', 'Internal error; it has been logged.');
    yield `data: ${JSON.stringify(e.toBody())}\n\n`;
  }
}

export function chatRoutes({ auth, chat, log }: ChatRouteDeps): Middleware {
  const router = new Router();

  router.post('/v1/chat/completions', async (ctx) => {
    const who = await auth.authenticate(ctx.get('authorization') || undefined);
    await readBody(ctx, chat.bodyLimit);
    const gone = new AbortController();
    ctx.res.once('close', () => { if (!ctx.res.writableFinished) gone.abort(); });
    const outcome = await chat.complete(who, ctx.request.body, rawBodyBytes(ctx), gone.signal);
    if (!outcome.stream) {
      ctx.body = outcome.completion;
      return;
    }
    ctx.type = 'text/event-stream; charset=utf-8';
    ctx.set('Cache-Control', 'no-cache');
    // Proxies such as nginx would otherwise hold chunks back.
    ctx.set('X-Accel-Buffering', 'no');
    ctx.body = Readable.from(sse(outcome.chunks, log), { objectMode: false });
  });

  const routes = router.routes() as Middleware;
  const allowed = router.allowedMethods() as Middleware;
  return (ctx, next) => routes(ctx, () => allowed(ctx, next));
}
