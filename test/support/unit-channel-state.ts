// The unit tier's stand-in for the channels' shared state (src/channels/redis-state.ts): every
// channel always has room and never cools down; it records each release so a test can see which
// channel a call went to and how it ended. The integration tier runs the Redis implementation.
import type { CallReport, ChannelRef, ChannelSnapshot, ChannelState } from '../../src/channels/state.js';
import { CALL_OUTCOMES, LATENCY_BUCKETS_MS } from '../../src/channels/state.js';

export class MemoryChannelState implements ChannelState {
  readonly releases: (ChannelRef & { holder: string; report: CallReport })[] = [];

  async acquire() {
    return { ok: true as const, probe: false };
  }

  async release(ref: ChannelRef, holder: string, _limits: unknown, report: CallReport) {
    this.releases.push({ ...ref, holder, report });
  }

  async snapshot(): Promise<ChannelSnapshot> {
    const zero = Object.fromEntries(CALL_OUTCOMES.map((o) => [o, 0])) as ChannelSnapshot['recent'];
    return {
      state: 'closed',
      coolingUntil: null,
      inFlight: 0,
      recent: zero,
      successRate: null,
      p50Ms: null,
      p95Ms: null,
      lastError: null,
      totals: { ...zero },
      latency: { buckets: LATENCY_BUCKETS_MS.map(() => 0).concat(0), count: 0, sumMs: 0 },
    };
  }
}
