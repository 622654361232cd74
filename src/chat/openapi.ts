// Schemas of the chat route's answer, for the OpenAPI document (routes.ts declares the
// operation): the OpenAI shape Kiln answers with; nothing validates an answer against them.
import { z } from 'zod';

const Usage = z
  .object({ prompt_tokens: z.number().int(), completion_tokens: z.number().int(), total_tokens: z.number().int() })
  .meta({ id: 'ChatUsage' });

export const ChatCompletion = z
  .object({
    id: z.string(),
    object: z.literal('chat.completion'),
    created: z.number().int().meta({ description: 'Unix seconds' }),
    model: z.string().meta({ description: "Kiln's model id" }),
    choices: z.array(
      z.object({
        index: z.number().int(),
        message: z.object({ role: z.literal('assistant'), content: z.string().nullable() }),
        finish_reason: z.string().nullable().meta({ description: '`stop`, or `length` when max_tokens cut the reply' }),
      }),
    ),
    usage: Usage.optional(),
  })
  .meta({
    id: 'ChatCompletion',
    description:
      'Upstream fields beyond these (system_fingerprint, logprobs ' +
      '…) are passed on. With `stream: true` the answer is ' +
      '`text/event-stream`: `data: <chat.completion.chunk>` events ' +
      'relayed as they arrive, then `data: [DONE]`; a failure ' +
      'after the first event ends the stream with `data: {"error": {"code", "message"}}`.',
  });
