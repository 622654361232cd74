// Every configured channel's snapshot, read together: what GET /admin/v1/channels and the
// Prometheus series show. One Redis round trip per channel (src/channels/redis-state.ts), all in
// flight at once, so the answer takes one round trip's time whatever the number of channels.
import { limitsOf } from './limits.js';
import type { AnyChannel, Model } from '../config/models.js';
import { byPriority } from '../config/channels.js';
import type { ChannelSnapshot, ChannelState } from './state.js';

export interface ChannelReading {
  model: Model;
  channel: AnyChannel;
  snapshot: ChannelSnapshot;
}

/**
 * Models in the models file's order, each one's channels in the order routing tries them (highest
 * priority first). Rejects when any read fails: a partial list would pass a missing channel off as
 * one that is not configured.
 */
export function readChannels(
  state: ChannelState,
  models: readonly Model[],
  windowMs?: number,
): Promise<ChannelReading[]> {
  return Promise.all(
    models.flatMap((model) =>
      byPriority<AnyChannel>(model.channels).map(async (channel) => ({
        model,
        channel,
        snapshot: await state.snapshot({ model: model.id, channel: channel.id }, limitsOf(channel), windowMs),
      })),
    ),
  );
}

/** `p`, or null once `ms` have passed or when it fails: a read of a hung Redis must not hold its caller. */
export function within<T>(p: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.catch(() => null),
    new Promise<null>((r) => {
      timer = setTimeout(() => r(null), ms);
      timer.unref();
    }),
  ]).finally(() => clearTimeout(timer));
}
