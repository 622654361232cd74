// OpenAPI operation of POST /v1/chat/completions: the request schema is the one the handler
// validates with (default limits); the reply schemas describe the OpenAI shape Kiln answers with.
import { z } from 'zod';
import { DEFAULT_MODELS, modelsOfKind } from '../config.js';
import { chatBodySchema } from './validate.js';
import { registerOperation } from '../http/openapi.js';

const defaults = modelsOfKind(DEFAULT_MODELS, 'chat')[0];

const Usage = z.object({ prompt_tokens: z.number().int(), completion_tokens: z.number().int(), total_tokens: z.number().int() }).meta({ id: 'ChatUsage' });

const ChatCompletion = z.object({
  id: z.string(),
  object: z.literal('chat.completion'),
  created: z.number().int().meta({ description: 'Unix seconds' }),
  model: z.string().meta({ description: "Kiln's model id" }),
  choices: z.array(z.object({
    index: z.number().int(),
    message: z.object({ role: z.literal('assistant'), content: z.string().nullable() }),
    finish_reason: z.string().nullable().meta({ description: '`stop`, or `length` when max_tokens cut the reply' }),
  })),
  usage: Usage.optional(),
}).meta({
  id: 'ChatCompletion',
  description: 'Upstream fields beyond these (system_fingerprint, logprobs …) are passed on. With `stream: true` the answer is '
    + '`text/event-stream`: `data: <chat.completion.chunk>` events relayed as they arrive, then `data: [DONE]`; a failure '
    + 'after the first event ends the stream with `data: {"error": {"code", "message"}}`.',
});

registerOperation({
  method: 'post', route: '/v1/chat/completions', operationId: 'createChatCompletion', tags: ['chat'],
  summary: 'Multimodal chat completion (text and data-URI images in, text out), synchronous, optionally streamed',
  description: 'Limits per chat model: `maxBodyBytes` (request body after gzip/br decompression), `maxImages`, `maxImageBytes` '
    + '(one image, decoded), `maxOutputTokens` (highest max_tokens). When the client disconnects, the upstream request is aborted.',
  request: { body: chatBodySchema(defaults).meta({ id: 'ChatCompletionRequest' }) },
  responses: { 200: {
    description: 'The completion (or, with stream: true, server-sent events)', schema: ChatCompletion,
    alternatives: { 'text/event-stream': z.string().meta({ description: 'stream: true: `data: <chat.completion.chunk>` events, then `data: [DONE]`' }) },
  } },
  errors: [
    'invalid_request', 'invalid_image_url', 'too_many_images', 'image_too_large', 'request_too_large', 'model_not_found',
    'unsupported_content_encoding', 'unsupported_media_type',
    'auth_failed', 'insufficient_balance', 'upstream_rate_limited', 'upstream_error', 'upstream_timeout',
  ],
});
