// The caller's webhook signing secret: shown and rotated. Redis holds only the generation number;
// the secret is derived again on every request (and by the delivery activity when it signs).
import type { RedisClient } from '../tasks/store/task-store.js';
import { KilnError } from '../shared/errors.js';
import { currentGeneration, rotateGeneration, secretText, signingKey, webhookRoot } from './secret.js';

export interface WebhookSecret {
  object: 'webhook.secret';
  /** `whsec_` and base64 of the 32-byte key, as Standard Webhooks libraries take it. */
  secret: string;
  /** Bumped by every rotation; deliveries are signed with the current one's secret. */
  generation: number;
}

export class WebhookSecrets {
  private readonly root: Buffer;
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    ownerKey: Buffer,
  ) {
    this.root = webhookRoot(ownerKey);
  }

  async current(owner: string): Promise<WebhookSecret> {
    return this.answer(owner, await currentGeneration(this.redis, this.prefix, owner).catch(unavailable));
  }

  async rotate(owner: string): Promise<WebhookSecret> {
    return this.answer(owner, await rotateGeneration(this.redis, this.prefix, owner).catch(unavailable));
  }

  private answer(owner: string, generation: number): WebhookSecret {
    return { object: 'webhook.secret', secret: secretText(signingKey(this.root, owner, generation)), generation };
  }
}

function unavailable(): never {
  throw new KilnError('service_unavailable', 'Webhook settings are unavailable for a moment; retry shortly.', 1);
}
