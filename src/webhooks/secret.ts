// Per-owner webhook signing secrets (Standard Webhooks `whsec_…`). A secret is never stored: it is
// derived from KILN_SECRET (through the owner key), the owner and the owner's generation, and
// Redis keeps only the generation, which a rotation bumps. The API derives it to show it; the
// delivery activity derives it again to sign, so it never travels in a workflow's history.
import { createHmac, hkdfSync } from 'node:crypto';
import type { RedisClient } from '../tasks/store/task-store.js';

const SECRET_PREFIX = 'whsec_';

/** The root of every owner's signing key, derived from the owner key (itself derived from KILN_SECRET). */
export function webhookRoot(ownerKey: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', ownerKey, Buffer.alloc(0), 'kiln webhook signing v1', 32));
}

/** The 32-byte HMAC key of one owner's generation (the owner length-prefixed, as idempotent ids are). */
export function signingKey(root: Buffer, owner: string, generation: number): Buffer {
  return createHmac('sha256', root).update(`${owner.length}:${owner}\n${generation}`).digest();
}

/** The secret as receivers configure it: `whsec_` and the key in base64. */
export function secretText(key: Buffer): string {
  return `${SECRET_PREFIX}${key.toString('base64')}`;
}

/** Standard Webhooks signature of one attempt: `v1,` and base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`. */
export function signature(key: Buffer, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** Where an owner's generation lives: a plain counter, in the owner's slot. */
function generationKey(prefix: string, owner: string): string {
  return `${prefix}webhook-gen:{${owner}}`;
}

/** The owner's current generation (0 until the first rotation). */
export async function currentGeneration(redis: RedisClient, prefix: string, owner: string): Promise<number> {
  return Number((await redis.get(generationKey(prefix, owner))) ?? 0);
}

/** Moves the owner to a new generation and returns it: the previous secret no longer signs anything. */
export async function rotateGeneration(redis: RedisClient, prefix: string, owner: string): Promise<number> {
  return redis.incr(generationKey(prefix, owner));
}
