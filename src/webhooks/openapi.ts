// OpenAPI pieces of webhooks: the submit's query parameters and the secret's answer.
import { z } from 'zod';
import { WEBHOOK_URL_MAX } from './target.js';

/** `?webhook=` and `?webhook_events=` of generateContent (checked by the handler). */
export const WebhookQuery = {
  webhook: z
    .string()
    .max(WEBHOOK_URL_MAX)
    .optional()
    .meta({
      // What a schema can say of checkWebhookUrl's rules; the rest (no credentials, public host) is in words.
      pattern: '^https://',
      description:
        'https URL (at most 2048 characters, no credentials, no private or loopback address) that receives ' +
        'the task object, signed (Standard Webhooks), when the task ends; retried for up to 24 h. ' +
        'Invalid: 400 `invalid_webhook_url`.',
    }),
  webhook_events: z
    .enum(['terminal', 'all'])
    .optional()
    .meta({ description: '`terminal` (default): the final state only; `all`: also queued and running' }),
};

export const WebhookSecretBody = z
  .object({
    object: z.literal('webhook.secret'),
    secret: z.string().meta({
      description: '`whsec_` and base64 of the signing key: give it to a Standard Webhooks library to verify',
      example: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    }),
    generation: z.number().int().min(0).meta({ description: 'Bumped by every rotation' }),
  })
  .meta({ id: 'WebhookSecret' });
