// What picking needs of a channel (image, video and chat channels all have it), and the limits its
// settings give it in the deployment-wide channel state.
import type { ChannelLimits } from './state.js';

/** What picking needs of a channel. */
export interface PickableChannel {
  id: string;
  priority: number;
  weight: number;
  timeoutMs: number;
  failoverOn5xx: boolean;
  cooldownAfter: number;
  cooldownWindowMs: number;
  cooldownMs: number;
  concurrency?: number;
  ratePerSecond?: number;
}

/** Chat channels have no concurrency setting: a chat call holds its client's request, not a queue slot. */
const UNBOUNDED = 1_000_000;

/**
 * A channel's limits. The only channel of a model never cools down: there is nothing to move to,
 * so each task gets the upstream's own answer at once, as a model with one upstream expects.
 */
export function limitsOf(c: PickableChannel, only = false): ChannelLimits {
  return {
    concurrency: c.concurrency ?? UNBOUNDED,
    ...(c.ratePerSecond ? { ratePerSecond: c.ratePerSecond } : {}),
    cools: !only,
    cooldownAfter: c.cooldownAfter,
    cooldownWindowMs: c.cooldownWindowMs,
    cooldownMs: c.cooldownMs,
    // A worker killed mid-call never releases: its lease lapses after the longest call it could make.
    leaseMs: c.timeoutMs + 30_000,
  };
}
