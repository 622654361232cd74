// OpenAPI pieces of webhooks: the submit's query parameters and the secret's answer.
import type { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import { ImageTask } from '../image/openapi.js';
import { Video } from '../video/openapi.js';
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

/**
 * The delivery a receiver gets, as an OpenAPI `webhooks` entry: a POST of the task object, exactly
 * as a poll answers for that state (without its `webhook` member), signed per Standard Webhooks.
 */
export function registerWebhookDelivery(registry: OpenAPIRegistry): void {
  registry.registerWebhook({
    method: 'post',
    path: 'taskStatus',
    summary: 'A task reached a state its webhook reports',
    description:
      'Sent to the `webhook` URL of a submit (image tasks, direct form and videos) when the task ends ' +
      '(`webhook_events=all`: also when it is queued and when it turns running). The body is ' +
      'the task object as `GET /v1/tasks/{id}` (or `GET /v1/videos/{id}`) answers for that state, ' +
      'without its `webhook` member; the read model shows that state before the delivery is sent. ' +
      'Verify the signature with the secret from `GET /v1/webhooks/secret`, e.g. ' +
      '`new Webhook(secret).verify(body, headers)` of the `standardwebhooks` package, and deduplicate by ' +
      '`webhook-id`. Answer 2xx within 10 s to acknowledge; 410 stops the delivery; anything else (or ' +
      'no answer) is retried with doubling backoff for up to 24 h. Redirects are not followed; the ' +
      'address connected to must be public.',
    tags: ['webhooks'],
    request: {
      headers: z.object({
        'webhook-id': z
          .string()
          .meta({ description: 'The delivery id, `msg_<task id>_<status>`: the same on every retry' }),
        'webhook-timestamp': z.string().meta({ description: 'Unix seconds of this attempt (signed)' }),
        'webhook-signature': z
          .string()
          .meta({ description: '`v1,` and base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}`' }),
      }),
      body: { required: true, content: { 'application/json': { schema: z.union([ImageTask, Video]) } } },
    },
    responses: {
      200: { description: 'Any 2xx: delivered (the body is not read)' },
      410: { description: 'Gone: the delivery stops (`webhook.status: stopped`)' },
    },
  });
}
