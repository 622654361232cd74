// GET /v1/webhooks/secret and POST /v1/webhooks/secret/rotate: the caller's signing secret.
import type { Context } from 'koa';
import { route, type RouteDef } from '../http/route-table.js';
import { WebhookSecretBody } from './openapi.js';
import type { WebhookSecrets } from './service.js';

const describe =
  'Deliveries carry `webhook-id`, `webhook-timestamp` and `webhook-signature: v1,<base64 HMAC-SHA256 of ' +
  '"{id}.{timestamp}.{body}">` (Standard Webhooks); verify them with this secret, e.g. with the ' +
  '`standardwebhooks` package.';

function send(ctx: Context, body: unknown) {
  // A secret must not stay in a shared cache.
  ctx.set('Cache-Control', 'no-store');
  ctx.body = body;
}

export function webhookRoutes(secrets: WebhookSecrets): RouteDef[] {
  return [
    route({
      method: 'get',
      route: '/v1/webhooks/secret',
      operationId: 'getWebhookSecret',
      tags: ['webhooks'],
      summary: "The caller's webhook signing secret",
      description: describe,
      responses: { 200: { description: 'The current secret', schema: WebhookSecretBody } },
      errors: ['service_unavailable'],
      handler: async (ctx, { caller }) => send(ctx, await secrets.current(caller.owner)),
    }),
    route({
      method: 'post',
      route: '/v1/webhooks/secret/rotate',
      operationId: 'rotateWebhookSecret',
      tags: ['webhooks'],
      summary: 'Replace the webhook signing secret',
      description:
        'Every delivery from now on, retries of earlier ones included, is signed with the new secret; ' +
        'the old one no longer verifies anything.',
      responses: { 200: { description: 'The new secret', schema: WebhookSecretBody } },
      errors: ['service_unavailable'],
      handler: async (ctx, { caller }) => send(ctx, await secrets.rotate(caller.owner)),
    }),
  ];
}
