// Inline image models (the upstream call as a local activity): what the models file accepts, and
// the per-model slots their calls share with the model's activity queue (activities/inline-slots.ts).
import { describe, expect, it } from 'vitest';
import { INLINE_MAX_TIMEOUT_MS, parseModels, type ImageModel } from '../../../src/config/models.js';
import { Slots } from '../../../activities/inline-slots.js';

const image = (over: Record<string, unknown>) => ({ id: 'fast', provider: 'local', ...over });
const parse = (over: Record<string, unknown>) => parseModels({ models: [image(over)] }, 'models.json');

describe('inline models in the models file', () => {
  it('are off unless asked for', () => {
    expect((parse({}) as ImageModel[])[0].inline).toBe(false);
  });

  it(`accept timeoutMs up to ${INLINE_MAX_TIMEOUT_MS} and refuse one past it, saying why`, () => {
    expect((parse({ inline: true, timeoutMs: INLINE_MAX_TIMEOUT_MS }) as ImageModel[])[0]).toMatchObject({
      inline: true,
      timeoutMs: 1000,
    });
    expect(() => parse({ inline: true, timeoutMs: INLINE_MAX_TIMEOUT_MS + 1 })).toThrow(
      /models\.json.*timeoutMs.*inline model needs timeoutMs ≤ 1000 \(got 1001\)/s,
    );
    // The default timeout (120 s) is far past it: inline must be chosen with a budget.
    expect(() => parse({ inline: true })).toThrow(/got 120000/);
    // Without inline, the same timeout is fine.
    expect((parse({ timeoutMs: 120_000 }) as ImageModel[])[0].timeoutMs).toBe(120_000);
  });

  it('take ratePerSecond: the channel keeps it in Redis, for inline calls too', () => {
    const [m] = parse({ inline: true, timeoutMs: 500, ratePerSecond: 5 }) as ImageModel[];
    expect(m.channels[0]).toMatchObject({ id: 'default', ratePerSecond: 5, timeoutMs: 500 });
  });
});

describe('Slots', () => {
  it('hands out `size` slots at once, then none until one is released', () => {
    const slots = new Slots(2);
    const a = slots.tryTake();
    const b = slots.tryTake();
    expect(a).toBeTypeOf('function');
    expect(b).toBeTypeOf('function');
    expect(slots.tryTake()).toBeUndefined();
    a!();
    a!(); // a second release of the same slot frees nothing more
    const c = slots.tryTake();
    expect(c).toBeTypeOf('function');
    expect(slots.tryTake()).toBeUndefined();
  });

  it('passes a released slot to the longest waiter, before any new caller', async () => {
    const slots = new Slots(1);
    const held = slots.tryTake()!;
    const order: string[] = [];
    const first = slots.take(new AbortController().signal).then((r) => (order.push('first'), r));
    const second = slots.take(new AbortController().signal).then((r) => (order.push('second'), r));
    expect(slots.queued).toBe(2);
    held();
    // The freed slot went to `first`: a caller trying now gets none.
    expect(slots.tryTake()).toBeUndefined();
    (await first)();
    (await second)();
    expect(order).toEqual(['first', 'second']);
    expect(slots.tryTake()).toBeTypeOf('function');
  });

  it('lets a waiter give up when its signal aborts, without losing the slot it never got', async () => {
    const slots = new Slots(1);
    const held = slots.tryTake()!;
    const ac = new AbortController();
    const waiting = slots.take(ac.signal);
    ac.abort(new Error('canceled by its owner'));
    await expect(waiting).rejects.toThrow('canceled by its owner');
    expect(slots.queued).toBe(0);
    held();
    expect(slots.tryTake()).toBeTypeOf('function');
    // An aborted signal is refused at once.
    await expect(slots.take(ac.signal)).rejects.toThrow('canceled by its owner');
  });
});
