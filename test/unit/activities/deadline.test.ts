// The call budget's timer: it fires as AbortSignal.timeout does, and a call that ended leaves
// nothing behind. AbortSignal.timeout's timer (combined with the activity's cancellation by
// AbortSignal.any) outlived each call by the model's whole timeout, holding the activity (Node 24
// keeps the async context a timer was made in), ~9 KiB a call.
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import { describe, expect, it } from 'vitest';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { underBudget } from '../../../activities/upstream-budget.js';
import { IMAGE_CALL } from '../../../src/shared/call-wording.js';
import { deadline, withDeadline } from '../../../src/shared/deadline.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Collects until `ref` is gone or `tries` full collections have run. */
async function collected(ref: WeakRef<object>, tries = 10): Promise<boolean> {
  for (let i = 0; i < tries && ref.deref(); i++) {
    await new Promise((r) => setImmediate(r));
    gc();
  }
  return ref.deref() === undefined;
}

/** Runs `call` as an activity in its own environment; a WeakRef to that activity's context. */
async function activityRun(call: () => Promise<unknown>): Promise<WeakRef<object>> {
  const env = new MockActivityEnvironment({ heartbeatTimeoutMs: 10_000 }, { logger: new DefaultLogger('ERROR') });
  await env.run(call);
  return new WeakRef(env.context);
}

const MODEL = { timeoutMs: 120_000, idempotent: true };
const listening = { taskId: 'task-deadline' };

describe('deadline', () => {
  it('aborts with a TimeoutError once its time has passed', async () => {
    const d = deadline(30);
    expect(d.expired).toBe(false);
    await new Promise((r) => setTimeout(r, 60));
    expect(d.expired).toBe(true);
    expect((d.signal.reason as DOMException).name).toBe('TimeoutError');
  });

  it('never fires once cleared', async () => {
    const d = deadline(20);
    d.clear();
    await new Promise((r) => setTimeout(r, 50));
    expect(d.signal.aborted).toBe(false);
    expect(d.expired).toBe(false);
  });

  it('withDeadline hands its signal to the work and clears it when the work ends, either way', async () => {
    let seen: AbortSignal | undefined;
    await expect(withDeadline(20, async (s) => ((seen = s), 'done'))).resolves.toBe('done');
    await expect(withDeadline(20, async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    await new Promise((r) => setTimeout(r, 50));
    expect(seen?.aborted).toBe(false);
  });

  it('a budget spent ends the call with upstream_timeout', async () => {
    const env = new MockActivityEnvironment({ heartbeatTimeoutMs: 10_000 }, { logger: new DefaultLogger('ERROR') });
    const run = (signal: AbortSignal) =>
      new Promise<never>((_, fail) => signal.addEventListener('abort', () => fail(signal.reason)));
    await expect(
      env.run(() => underBudget({ ...MODEL, timeoutMs: 30 }, IMAGE_CALL, listening, undefined, run, async () => {})),
    ).rejects.toMatchObject({ type: 'upstream_timeout', nonRetryable: true });
  });
});

describe('an upstream call that ended', () => {
  it('leaves its activity collectable long before the model timeout', async () => {
    const ok = await activityRun(() =>
      underBudget(
        MODEL,
        IMAGE_CALL,
        listening,
        undefined,
        async () => 'image',
        async () => {},
      ),
    );
    expect(await collected(ok)).toBe(true);
    const failed = await activityRun(() =>
      underBudget(
        MODEL,
        IMAGE_CALL,
        listening,
        undefined,
        async () => Promise.reject(new Error('transport')),
        async () => {},
      ).catch(() => 'failed'),
    );
    expect(await collected(failed)).toBe(true);
  });

  it('(the check can fail) an uncleared timer made inside the activity keeps it', async () => {
    // What underBudget did before: Node keeps a timeout signal that feeds AbortSignal.any alive.
    const held = await activityRun(async () => {
      AbortSignal.any([AbortSignal.timeout(MODEL.timeoutMs), new AbortController().signal]);
    });
    expect(await collected(held, 3)).toBe(false);
  });
});
