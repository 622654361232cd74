// The client's polling schedule on a fake clock (vi.useFakeTimers fakes Date.now and setTimeout,
// which the client's default clock uses): every assertion is on the exact time of each request.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Kiln, NotFoundError, PollTimeoutError, type PollingOptions } from '../../../src/client/index.js';
import { fakeFetch, json, submitted, succeeded, task, transportError, type Handler } from './fake-fetch.js';

const S = 1000;
const ID = 'task_0123456789abcdef0123456789abcdef';

// The contract's schedule alone (no long-poll probe) unless a test turns waits on.
function client(handler: Handler, polling: Partial<PollingOptions> = {}) {
  const fake = fakeFetch(handler);
  const options = { waitSeconds: 0, ...polling };
  return { kiln: new Kiln({ baseURL: 'http://kiln.test', apiKey: 'k', fetch: fake.fetch, polling: options }), ...fake };
}

/** Runs `p` to completion on the fake clock; resolves to its outcome (value or error). */
async function settle<T>(p: Promise<T>, ms = 2_000 * S): Promise<{ value?: T; error?: any }> {
  const out: { value?: T; error?: any } = {};
  const done = p.then(
    (value) => {
      out.value = value;
    },
    (error) => {
      out.error = error;
    },
  );
  await vi.advanceTimersByTimeAsync(ms);
  await done;
  return out;
}

beforeEach(() => {
  vi.useFakeTimers({ now: 1_700_000_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('single task', () => {
  it('checks first 50 s after submit, then every 10 s, and resolves on success', async () => {
    const c = client((call, n) => {
      if (call.method === 'POST') return { status: 202, json: submitted(ID) };
      return n < 5 ? { json: task(ID, 'running') } : { json: succeeded(ID) };
    });
    const r = await settle(c.kiln.tasks.createAndWait({ model: 'm', prompt: 'p' }));
    expect(r.value?.status).toBe('succeeded');
    expect(c.times('/v1beta/models/m:generateContent')).toEqual([0]);
    expect(c.times(`/v1/tasks/${ID}`)).toEqual([50 * S, 60 * S, 70 * S, 80 * S]);
    expect(c.calls[0].query.get('output')).toBe('url');
    expect(c.calls[0].headers.get('authorization')).toBe('Bearer k');
  });

  it('obeys a longer Retry-After, but a shorter one does not speed polling up', async () => {
    const longer = client((_c, n) =>
      n < 3 ? { json: task(ID, 'running'), headers: { 'retry-after': '30' } } : { json: succeeded(ID) },
    );
    await settle(longer.kiln.tasks.wait(ID));
    expect(longer.times()).toEqual([50 * S, 80 * S, 110 * S]);

    const shorter = client((_c, n) =>
      n < 3 ? { json: task(ID, 'queued'), headers: { 'retry-after': '2' } } : { json: succeeded(ID) },
    );
    await settle(shorter.kiln.tasks.wait(ID));
    expect(shorter.times()).toEqual([50 * S, 60 * S, 70 * S]);
  });

  it('honours 429 rate_limited: waits its Retry-After when longer than the interval, else the interval', async () => {
    const c = client((_c, n) => {
      if (n === 1)
        return {
          status: 429,
          json: { error: { code: 'rate_limited', message: 'slow down' } },
          headers: { 'retry-after': '25' },
        };
      if (n === 2)
        return {
          status: 429,
          json: { error: { code: 'rate_limited', message: 'slow down' } },
          headers: { 'retry-after': '1' },
        };
      return { json: succeeded(ID) };
    });
    const r = await settle(c.kiln.tasks.wait(ID));
    expect(r.value?.status).toBe('succeeded');
    expect(c.times()).toEqual([50 * S, 75 * S, 85 * S]);
  });

  it('retries transport errors (no HTTP status) with exponential backoff, then resumes the rhythm', async () => {
    const c = client((_c, n) =>
      n <= 3 ? transportError() : n === 4 ? { json: task(ID, 'running') } : { json: succeeded(ID) },
    );
    const r = await settle(c.kiln.tasks.wait(ID));
    expect(r.value?.status).toBe('succeeded');
    // 1 s, 2 s, 4 s of backoff after three failures; then the 10 s interval again.
    expect(c.times()).toEqual([50 * S, 51 * S, 53 * S, 57 * S, 67 * S]);
  });

  it('caps the backoff and keeps retrying until the total timeout', async () => {
    const c = client(() => transportError('ECONNREFUSED'), { retryMaxMs: 8 * S, timeoutMs: 100 * S });
    const r = await settle(c.kiln.tasks.wait(ID));
    expect(r.error).toBeInstanceOf(PollTimeoutError);
    expect(c.times()).toEqual([50, 51, 53, 57, 65, 73, 81, 89, 97].map((x) => x * S));
  });

  it('surfaces uncertain as its own outcome after one check, without retrying or resubmitting', async () => {
    const c = client((call) =>
      call.method === 'POST'
        ? { status: 202, json: submitted(ID) }
        : { json: task(ID, 'uncertain', { finished_at: 2, uncertain_reason: 'lost' }) },
    );
    const r = await settle(c.kiln.tasks.createAndWait({ model: 'm', prompt: 'p' }));
    expect(r.value?.status).toBe('uncertain');
    expect(c.calls.map((x) => `${x.method} ${x.t}`)).toEqual(['POST 0', `GET ${50 * S}`]);
  });

  it('gives up after 1200 s with a PollTimeoutError that carries the task id', async () => {
    const c = client(() => ({ json: task(ID, 'running'), headers: { 'retry-after': '10' } }));
    const r = await settle(c.kiln.tasks.wait(ID), 1_300 * S);
    expect(r.error).toBeInstanceOf(PollTimeoutError);
    expect(r.error.taskId).toBe(ID);
    expect(r.error.message).toContain(ID);
    expect(r.error.lastStatus).toEqual({ [ID]: 'running' });
    expect(r.error.elapsedMs).toBe(1200 * S);
    // Checks at 50, 60, …, 1200 s: the last one exactly at the deadline, none after it.
    const t = c.times();
    expect(t.length).toBe(116);
    expect(t[0]).toBe(50 * S);
    expect(t.at(-1)).toBe(1200 * S);
  });

  it('a task that finishes at the last check (1200 s) is a success, not a timeout', async () => {
    const c = client((_c, n) => (n < 116 ? { json: task(ID, 'running') } : { json: succeeded(ID) }));
    const r = await settle(c.kiln.tasks.wait(ID), 1_300 * S);
    expect(r.value?.status).toBe('succeeded');
    expect(c.times().at(-1)).toBe(1200 * S);
  });

  it('does not retry errors that will not change (404 not_found)', async () => {
    const c = client(() => ({ status: 404, json: { error: { code: 'not_found', message: 'no such task' } } }));
    const r = await settle(c.kiln.tasks.wait(ID));
    expect(r.error).toBeInstanceOf(NotFoundError);
    expect(c.calls.length).toBe(1);
  });

  it('takes every interval from options', async () => {
    const c = client((_c, n) => (n < 3 ? { json: task(ID, 'running') } : { json: succeeded(ID) }), {
      firstCheckMs: 2 * S,
      intervalMs: 500,
    });
    await settle(c.kiln.tasks.wait(ID));
    expect(c.times()).toEqual([2000, 2500, 3000]);
  });

  it('starts the first check 50 s after the given submit time, not after the call', async () => {
    const c = client(() => ({ json: succeeded(ID) }));
    await settle(c.kiln.tasks.wait(ID, { submittedAt: Date.now() - 45 * S }));
    expect(c.times()).toEqual([5 * S]);
  });

  it('stops waiting when the signal aborts', async () => {
    const c = client(() => ({ json: task(ID, 'running') }));
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error('stop')), 65 * S);
    const r = await settle(c.kiln.tasks.wait(ID, { signal: ac.signal }));
    expect(r.error?.message).toBe('stop');
    expect(c.times()).toEqual([50 * S, 60 * S]);
  });
});

describe('batch', () => {
  const ids = Array.from({ length: 250 }, (_, i) => `task_${i.toString(16).padStart(32, '0')}`);

  it('polls 250 pending ids as 3 batches (100, 100, 50) in the same cycle, and only unfinished ids after', async () => {
    const c = client((call, n) => {
      const items = (call.body.ids as string[]).map((id) => {
        const i = ids.indexOf(id);
        // First cycle: every 10th id is done (succeeded, failed, uncertain or not_found in turn).
        if (n <= 3 && i % 10 === 0)
          return [
            succeeded(id),
            task(id, 'failed', { error: { code: 'upstream_error', message: 'x' } }),
            task(id, 'uncertain'),
            { id, object: 'image.task', status: 'not_found', error: { code: 'not_found', message: 'x' } },
          ][(i / 10) % 4];
        return n <= 3 ? task(id, i % 2 ? 'queued' : 'running') : succeeded(id);
      });
      return { json: { object: 'batch.task.list', items, next_poll_after_ms: 10_000 } };
    });
    const r = await settle(c.kiln.tasks.waitMany(ids));
    const batches = c.calls.map((x) => ({ t: x.t, n: x.body.ids.length }));
    expect(batches).toEqual([
      { t: 50 * S, n: 100 },
      { t: 50 * S, n: 100 },
      { t: 50 * S, n: 50 },
      // 25 terminal ids dropped: 225 left → 100, 100, 25.
      { t: 60 * S, n: 100 },
      { t: 60 * S, n: 100 },
      { t: 60 * S, n: 25 },
    ]);
    const second = c.calls.slice(3).flatMap((x) => x.body.ids as string[]);
    expect(second).toEqual(ids.filter((_, i) => i % 10 !== 0));
    expect(c.calls.every((x) => x.body.ids.length <= 100)).toBe(true);
    expect(r.value!.size).toBe(250);
    expect([...r.value!.keys()]).toEqual(ids);
    expect(r.value!.get(ids[10])!.status).toBe('failed');
    expect(r.value!.get(ids[20])!.status).toBe('uncertain');
    expect(r.value!.get(ids[30])!.status).toBe('not_found');
    expect(r.value!.get(ids[1])!.status).toBe('succeeded');
  });

  it('obeys a longer next_poll_after_ms', async () => {
    const c = client((call, n) => ({
      json: {
        object: 'batch.task.list',
        items: call.body.ids.map((id: string) => (n < 3 ? task(id, 'running') : succeeded(id))),
        next_poll_after_ms: 25_000,
      },
    }));
    await settle(c.kiln.tasks.waitMany(ids.slice(0, 3)));
    expect(c.times()).toEqual([50 * S, 75 * S, 100 * S]);
  });

  it('exactly 100 ids go in one request; 101 in two', async () => {
    const reply: Handler = (call) => ({
      json: {
        object: 'batch.task.list',
        items: call.body.ids.map((id: string) => succeeded(id)),
        next_poll_after_ms: 10_000,
      },
    });
    const a = client(reply);
    await settle(a.kiln.tasks.waitMany(ids.slice(0, 100)));
    expect(a.calls.map((x) => x.body.ids.length)).toEqual([100]);
    const b = client(reply);
    await settle(b.kiln.tasks.waitMany(ids.slice(0, 101)));
    expect(b.calls.map((x) => x.body.ids.length)).toEqual([100, 1]);
  });

  it(
    'retries a batch lost to a transport error with backoff, but ' +
      'never repeats a batch that succeeded sooner than allowed',
    async () => {
      const c = client((call, n) => {
        if (n === 2) return transportError();
        return {
          json: {
            object: 'batch.task.list',
            items: call.body.ids.map((id: string) => (n === 1 ? task(id, 'running') : succeeded(id))),
            next_poll_after_ms: 10_000,
          },
        };
      });
      await settle(c.kiln.tasks.waitMany(ids.slice(0, 150)));
      // Cycle 1: batch 2 fails; cycle 2 waits the full interval (batch 1 went through), not the 1 s backoff.
      expect(c.calls.map((x) => x.t)).toEqual([50 * S, 50 * S, 60 * S, 60 * S]);

      const all = client((call, n) =>
        n <= 2
          ? transportError()
          : {
              json: {
                object: 'batch.task.list',
                items: call.body.ids.map((id: string) => succeeded(id)),
                next_poll_after_ms: 10_000,
              },
            },
      );
      await settle(all.kiln.tasks.waitMany(ids.slice(0, 150)));
      // Every batch of the cycle failed: the next cycle comes after the backoff.
      expect(all.calls.map((x) => x.t)).toEqual([50 * S, 50 * S, 51 * S, 51 * S]);
    },
  );

  it('honours 429 on a batch and times out with every unfinished id', async () => {
    const c = client(
      (call, n) =>
        n === 1
          ? json({ error: { code: 'rate_limited', message: 'same batch too fast' } }, 429, { 'retry-after': '40' })
          : {
              json: {
                object: 'batch.task.list',
                items: call.body.ids.map((id: string) => task(id, 'running')),
                next_poll_after_ms: 10_000,
              },
            },
      { timeoutMs: 120 * S },
    );
    const r = await settle(c.kiln.tasks.waitMany(ids.slice(0, 2)));
    expect(c.times()).toEqual([50 * S, 90 * S, 100 * S, 110 * S, 120 * S]);
    expect(r.error).toBeInstanceOf(PollTimeoutError);
    expect(r.error.taskIds).toEqual(ids.slice(0, 2));
  });
});

describe('long-poll (Prefer: wait)', () => {
  const APPLIED = { 'preference-applied': 'wait=30' };
  const longPoll = (handler: Handler, polling: Partial<PollingOptions> = {}) =>
    client(handler, { waitSeconds: 30, ...polling });

  it('asks to wait right after submit, and again at once while the server applies it', async () => {
    const c = longPoll((call, n) => {
      if (call.method === 'POST') return { status: 202, json: submitted(ID) };
      // The fake answers at once; a real server would hold each until a change.
      return n < 4 ? { json: task(ID, 'running'), headers: APPLIED } : { json: succeeded(ID), headers: APPLIED };
    });
    const r = await settle(c.kiln.tasks.createAndWait({ model: 'm', prompt: 'p' }));
    expect(r.value?.status).toBe('succeeded');
    // At once (the clock's next tick), never on the 50 s / 10 s schedule.
    expect(c.times(`/v1/tasks/${ID}`).every((t) => t < 10)).toBe(true);
    expect(c.times(`/v1/tasks/${ID}`)).toHaveLength(3);
    expect(c.calls.slice(1).map((x) => x.headers.get('prefer'))).toEqual(['wait=30', 'wait=30', 'wait=30']);
  });

  it('falls back to the schedule after one probe when the answer lacks Preference-Applied', async () => {
    const c = longPoll((call, n) => {
      if (call.method === 'POST') return { status: 202, json: submitted(ID) };
      return n < 4 ? { json: task(ID, 'running') } : { json: succeeded(ID) };
    });
    await settle(c.kiln.tasks.createAndWait({ model: 'm', prompt: 'p' }));
    expect(c.times(`/v1/tasks/${ID}`)).toEqual([0, 50 * S, 60 * S]);
  });

  it('obeys 429 between long-polls as before: its Retry-After, at least the interval', async () => {
    const c = longPoll((_call, n) =>
      n === 1
        ? { json: task(ID, 'queued'), headers: APPLIED }
        : n === 2
          ? {
              status: 429,
              json: { error: { code: 'rate_limited', message: 'slow' } },
              headers: { 'retry-after': '12' },
            }
          : { json: succeeded(ID), headers: APPLIED },
    );
    await settle(c.kiln.tasks.wait(ID));
    const [a, b, t] = c.times();
    expect([a, b < 10, t - b]).toEqual([0, true, 12 * S]);
  });

  it('never asks to wait past the total timeout', async () => {
    for (const [timeoutMs, asked] of [
      [65 * S, 'wait=60'],
      [20 * S, 'wait=20'],
    ] as const) {
      const c = longPoll(
        (_call, n) => (n === 1 ? { json: task(ID, 'running'), headers: APPLIED } : { json: succeeded(ID) }),
        {
          timeoutMs,
          waitSeconds: 60,
        },
      );
      await settle(c.kiln.tasks.wait(ID));
      expect(c.calls[0].headers.get('prefer')).toBe(asked);
    }
  });

  it('batches send "wait" in the body and go again at once while it is applied', async () => {
    const ids = [ID, 'task_00000000000000000000000000000001'];
    const c = longPoll((call, n) => ({
      json: {
        object: 'batch.task.list',
        items: call.body.ids.map((id: string) => task(id, n < 2 ? 'running' : 'succeeded')),
        next_poll_after_ms: 10_000,
      },
      headers: APPLIED,
    }));
    const r = await settle(c.kiln.tasks.waitMany(ids));
    expect([...r.value!.values()].map((t) => t.status)).toEqual(['succeeded', 'succeeded']);
    expect(c.calls.map((x) => [x.t < 10, x.body.wait])).toEqual([
      [true, 30],
      [true, 30],
    ]);
  });
});
