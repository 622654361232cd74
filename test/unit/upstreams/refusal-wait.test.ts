// Which refusals wait and come back (the rest end the task or move it), and how long the wait is.
import { describe, expect, it } from 'vitest';
import { REFUSAL_WAIT, refusalWaitMs, verdictOf, waitsOut } from '../../../src/upstreams/failover.js';
import { TransportFailure, UpstreamFailure } from '../../../src/upstreams/failures.js';

const channel = { failoverOn5xx: false };
const how = { timedOut: false, canceled: false };
const answered = (code: ConstructorParameters<typeof UpstreamFailure>[0], status: number, refused: boolean) =>
  verdictOf(new UpstreamFailure(code, `upstream answered ${status}`, false, { status, refused }), channel, how);

describe('waitsOut', () => {
  it('passing refusals and requests that never left wait; lasting refusals and ambiguous ends do not', () => {
    expect(waitsOut(answered('upstream_rate_limited', 429, true))).toBe(true);
    expect(waitsOut(answered('upstream_error', 503, true))).toBe(true);
    expect(waitsOut(verdictOf(new TransportFailure('ECONNREFUSED', false), channel, how))).toBe(true);
    expect(waitsOut(answered('auth_failed', 401, true))).toBe(false);
    expect(waitsOut(answered('insufficient_balance', 402, true))).toBe(false);
    // May have been processed: never sent again to a non-idempotent channel.
    expect(waitsOut(answered('upstream_error', 500, false))).toBe(false);
    expect(waitsOut(verdictOf(new TransportFailure('socket hang up', true), channel, how))).toBe(false);
    expect(waitsOut(verdictOf(new Error('x'), channel, { timedOut: true, canceled: false }))).toBe(false);
    expect(waitsOut(verdictOf(new Error('x'), channel, { timedOut: false, canceled: true }))).toBe(false);
  });
});

describe('refusalWaitMs', () => {
  it('doubles from 1 s to 30 s, jittered over the upper half', () => {
    expect(refusalWaitMs(0, undefined, 0)).toBe(500);
    expect(refusalWaitMs(0, undefined, 1)).toBe(1000);
    expect(refusalWaitMs(3, undefined, 1)).toBe(8000);
    expect(refusalWaitMs(5, undefined, 1)).toBe(REFUSAL_WAIT.maxMs);
    expect(refusalWaitMs(500, undefined, 0)).toBe(REFUSAL_WAIT.maxMs / 2);
    for (let n = 0; n < 40; n++) {
      const w = refusalWaitMs(n, undefined, Math.random());
      expect(w).toBeGreaterThanOrEqual(REFUSAL_WAIT.firstMs / 2);
      expect(w).toBeLessThanOrEqual(REFUSAL_WAIT.maxMs);
    }
  });

  it("is never shorter than the upstream's Retry-After, even past the cap", () => {
    expect(refusalWaitMs(0, 2000, 0)).toBe(2000);
    expect(refusalWaitMs(0, 100, 1)).toBe(1000);
    expect(refusalWaitMs(10, 60_000, 1)).toBe(60_000);
  });
});
