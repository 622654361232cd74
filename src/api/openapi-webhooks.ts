// The webhook delivery a receiver gets, for /openapi.json: it is documented with the task objects of
// both kinds, so it is assembled here rather than in src/webhooks (which the kinds import).
import type { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import { ImageTask } from '../image/openapi.js';
import { Video } from '../video/openapi.js';

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
