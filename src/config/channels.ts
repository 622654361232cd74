// The models file's `channels`: the upstreams a model routes over. Every upstream setting of a
// model may be given on a channel; a channel takes the model's own value for what it leaves out,
// and a model without `channels` is one channel (`default`) made of its own settings.
import { z } from 'zod';

const int = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);

export const CredentialSchema = z.union([
  z.literal('passthrough'),
  z.object({ env: z.string().min(1) }),
  z.literal('none'),
]);

/** Where and how a call goes: every kind's upstreams have these. */
export const upstreamFields = {
  /** Upstream call budget for one attempt; its expiry ends a task failed/upstream_timeout. */
  timeoutMs: int(120_000, 1),
  baseUrl: z.string().url().optional(),
  upstreamModel: z.string().optional(),
  credential: CredentialSchema.default('passthrough'),
};

/** Image and video upstreams (called from workflows): idempotency and deployment-wide capacity. */
export const taskUpstreamFields = {
  ...upstreamFields,
  /** Whether a create call may be resent safely (idempotency key = task id). */
  idempotent: z.boolean().default(false),
  /** Calls in flight at once on this upstream, for the whole deployment. */
  concurrency: int(8, 1),
  /** Calls started per second on this upstream, for the whole deployment. */
  ratePerSecond: z.number().positive().optional(),
  /** local providers: simulated generation time. */
  latencyMs: int(800),
};

/** What only a channel has: its name, its place in the routing order and its health settings. */
export const channelOnlyFields = {
  id: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'channel ids use letters, digits, ".", "_" and "-"'),
  /** Higher is tried first. */
  priority: z.number().int().default(0),
  /** Share of calls within its priority tier. */
  weight: z.number().positive().default(1),
  /**
   * Fail over on a 500/502/504 too. Such an answer may follow a generation the upstream billed, so
   * the next channel may generate (and bill) the same task again: the operator's choice.
   */
  failoverOn5xx: z.boolean().default(false),
  /** Refusals or not-sent failures within cooldownWindowMs that cool the channel down … */
  cooldownAfter: int(3, 1),
  cooldownWindowMs: int(60_000, 1),
  /** … for this long (plus up to half again of jitter), before one task probes it. */
  cooldownMs: int(30_000, 1),
};

export const CHANNEL_ONLY_KEYS = Object.keys(channelOnlyFields);

/** The channel a model without `channels` routes over. */
export const DEFAULT_CHANNEL_ID = 'default';

/**
 * Defaults that differ when a model has several channels: a 429 moves the task to the next channel
 * at once rather than waiting to resend it on the same one.
 */
const LISTED_DEFAULTS = { rateLimitRetries: 0 };

/**
 * A raw model with `channels`: each channel gets the model's own upstream settings for the keys it
 * leaves out (before parsing, so defaults do not hide what the model set).
 */
export function inheritUpstreamSettings(raw: unknown, upstreamKeys: readonly string[]): unknown {
  if (!raw || typeof raw !== 'object' || !Array.isArray((raw as { channels?: unknown }).channels)) return raw;
  const model = raw as Record<string, unknown> & { channels: unknown[] };
  const inherited = {
    ...(model.channels.length > 1
      ? Object.fromEntries(Object.entries(LISTED_DEFAULTS).filter(([k]) => upstreamKeys.includes(k)))
      : {}),
    ...Object.fromEntries(upstreamKeys.filter((k) => k in model).map((k) => [k, model[k]])),
  };
  return {
    ...model,
    channels: model.channels.map((c) => (c && typeof c === 'object' ? { ...inherited, ...c } : c)),
  };
}

/** A model's channels, highest priority first (the order selection tries them in). */
export function byPriority<C extends { priority: number }>(channels: readonly C[]): C[] {
  return [...channels].sort((a, b) => b.priority - a.priority);
}

/** The channel's settings merged over its model's: what a provider calls with. */
export type Routed<M, C> = Omit<M, 'channels'> & Omit<C, 'id'> & { id: string; channel: string };

export function routed<M extends { id: string }, C extends { id: string }>(model: M, channel: C): Routed<M, C> {
  const { id: channelId, ...settings } = channel;
  return { ...model, ...settings, id: model.id, channel: channelId } as Routed<M, C>;
}

/** How many calls of a model one worker runs at once: room for every channel's deployment-wide share. */
export function workerSlots(model: { channels: readonly { concurrency: number }[] }): number {
  return model.channels.reduce((n, c) => n + c.concurrency, 0);
}
