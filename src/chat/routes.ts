// POST /v1/chat/completions, mounted and documented from one declaration (see
// http/route-table.ts): a plain JSON reply, or server-sent events relayed chunk by chunk.
import { Readable } from 'node:stream';
import type { Context } from 'koa';
import { z } from 'zod';
import type { Logger } from 'pino';
import type { ChatChunk } from './providers/types.js';
import { DEFAULT_MODELS } from '../config/default-models.js';
import { modelsOfKind } from '../config/models.js';
import type { ChatService } from './service.js';
import { KilnError } from '../shared/errors.js';
import { jsonBody, rawBodyBytes } from '../http/body.js';
import { toKilnError } from '../http/errors.js';
import { route, type RouteDef } from '../http/route-table.js';
import { chatBodySchema } from './validate.js';
import { ChatCompletion } from './openapi.js';

export interface ChatRouteDeps {
  chat: ChatService;
  log: Logger;
}

async function readBody(ctx: Context, limitBytes: number): Promise<void> {
  try {
    await jsonBody({ limitBytes, keepRaw: true })(ctx, async () => undefined);
  } catch (err) {
    // The shared message names the 2 MB of task submissions; chat has its own limit.
    if ((err as { status?: unknown }).status === 413) {
      throw new KilnError(
        'request_too_large',
        `The request body is larger than ${limitBytes} bytes after decompression.`,
      );
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

// The schema validateChat uses, with the default model's limits (each chat model has its own).
const ChatRequest = chatBodySchema(modelsOfKind(DEFAULT_MODELS, 'chat')[0]).meta({ id: 'ChatCompletionRequest' });

export function chatRoutes({ chat, log }: ChatRouteDeps): RouteDef[] {
  return [
    route({
      method: 'post',
      route: '/v1/chat/completions',
      operationId: 'createChatCompletion',
      tags: ['chat'],
      summary: 'Multimodal chat completion (text and data-URI images in, text out), synchronous, optionally streamed',
      description:
        'Limits per chat model: `maxBodyBytes` (request body after ' +
        'gzip/br decompression), `maxImages`, `maxImageBytes` ' +
        '(one image, decoded), `maxOutputTokens` (highest max_tokens). ' +
        'When the client disconnects, the upstream request is aborted.',
      // The body limit and the schema depend on the model the body names: the service validates it.
      request: { body: ChatRequest, checkedByHandler: ['body'] },
      responses: {
        200: {
          description: 'The completion (or, with stream: true, server-sent events)',
          schema: ChatCompletion,
          alternatives: {
            'text/event-stream': z
              .string()
              .meta({ description: 'stream: true: `data: <chat.completion.chunk>` events, then `data: [DONE]`' }),
          },
        },
      },
      errors: [
        'invalid_request',
        'invalid_image_url',
        'too_many_images',
        'image_too_large',
        'request_too_large',
        'model_not_found',
        'unsupported_content_encoding',
        'unsupported_media_type',
        'auth_failed',
        'insufficient_balance',
        'upstream_rate_limited',
        'upstream_error',
        'upstream_timeout',
      ],
      handler: async (ctx, { caller }) => {
        await readBody(ctx, chat.bodyLimit);
        const gone = new AbortController();
        ctx.res.once('close', () => {
          if (!ctx.res.writableFinished) gone.abort();
        });
        const outcome = await chat.complete(caller, ctx.request.body, rawBodyBytes(ctx), gone.signal);
        if (!outcome.stream) {
          ctx.body = outcome.completion;
          return;
        }
        ctx.type = 'text/event-stream; charset=utf-8';
        ctx.set('Cache-Control', 'no-cache');
        // Proxies such as nginx would otherwise hold chunks back.
        ctx.set('X-Accel-Buffering', 'no');
        ctx.body = Readable.from(sse(outcome.chunks, log), { objectMode: false });
      },
    }),
  ];
}
