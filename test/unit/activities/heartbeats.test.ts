// How often an upstream attempt heartbeats (activities/heartbeats.ts): quietly while the cancel
// notice feed listens, at once and often when a notice for its task arrives or the feed cannot hear
// one; and the feed itself (activities/cancel-notices.ts) over a stand-in subscriber connection.
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { createActivities } from '../../../activities/image/index.js';
import { CancelNotices, cancelNoticeSinks, type CancelFeed } from '../../../activities/cancel-notices.js';
import { beatGaps } from '../../../activities/heartbeats.js';
import type { RedisClient } from '../../../src/infra/redis.js';
import type { GenerationResult } from '../../../src/shared/image-task.js';
import { modelsOfKind, parseModels } from '../../../src/config/models.js';
import { MemoryStore } from '../../support/unit-store.js';
import { MemoryChannelState } from '../../support/unit-channel-state.js';
import { imageTaskInput } from '../../support/records.js';

const models = parseModels({ models: [{ id: 'img', kind: 'image', provider: 'local' }] }, 'unit models');
const RESULT: GenerationResult = {
  response_id: 'r1',
  model_version: 'v1',
  candidates: [
    { content: { parts: [{ inlineData: { mimeType: 'image/png', data: 'https://blobs.example/x.png' } }] } },
  ],
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A feed the test drives: `listening` as set, `notify(id)` as a notice from Redis would. */
class TestFeed implements CancelFeed {
  listening = true;
  private readonly watchers = new Map<string, () => void>();
  watch(taskId: string, heard: () => void) {
    this.watchers.set(taskId, heard);
    return () => this.watchers.delete(taskId);
  }
  notify(taskId: string) {
    this.watchers.get(taskId)?.();
  }
  get watching() {
    return this.watchers.size;
  }
}

/**
 * generateImage with a call of `callMs` under a 3 s heartbeat timeout (quiet gap 1 s, pending
 * 400 ms); `during` runs once the call has begun. Returns each heartbeat's time since the call began.
 */
async function attempt(
  callMs: number,
  cancels: CancelFeed | undefined,
  during?: (taskId: string) => void,
  heartbeatTimeoutMs = 3000,
) {
  let began = 0;
  const acts = createActivities({
    store: new MemoryStore(),
    channels: new MemoryChannelState(),
    models: modelsOfKind(models, 'image'),
    providers: {
      local: {
        generate: async (call) => {
          await call.dispatching();
          began = Date.now();
          during?.(call.input.id);
          await sleep(callMs);
          return RESULT;
        },
      },
    },
    ...(cancels ? { cancels } : {}),
  });
  const env = new MockActivityEnvironment({ heartbeatTimeoutMs }, { logger: new DefaultLogger('ERROR') });
  const beats: { at: number; details: unknown }[] = [];
  env.on('heartbeat', (details: unknown) => beats.push({ at: Date.now() - began, details }));
  await env.run(acts.generateImage, imageTaskInput('img'));
  return beats;
}

describe('heartbeat gaps', () => {
  it('quiet at a third of the heartbeat timeout; 400 ms (or a third, if less) once a cancel may be pending', () => {
    expect(beatGaps(10_000)).toEqual({ quiet: 3333, pending: 400 });
    expect(beatGaps(30_000)).toEqual({ quiet: 10_000, pending: 400 });
    expect(beatGaps(1000)).toEqual({ quiet: 333, pending: 333 });
    expect(beatGaps(300)).toEqual({ quiet: 200, pending: 200 });
    expect(beatGaps()).toEqual({ quiet: 3333, pending: 400 }); // no timeout set: the model default, 10 s
  });
});

describe('an upstream attempt heartbeats', () => {
  it('quietly while the feed listens: a 700 ms call sends none (each beat is a write of the workflow in Temporal)', async () => {
    const feed = new TestFeed();
    expect(await attempt(700, feed)).toEqual([]);
    expect(feed.watching).toBe(0); // the attempt stopped watching when it ended
  });

  it('at once and every 400 ms after a cancel notice for its task, with the dispatch mark', async () => {
    const feed = new TestFeed();
    const beats = await attempt(1000, feed, (id) => setTimeout(() => feed.notify(id), 200));
    expect(beats.length).toBeGreaterThanOrEqual(2);
    expect(beats[0].at).toBeGreaterThanOrEqual(190);
    expect(beats[0].at).toBeLessThan(600); // at the notice, not at the 1 s quiet gap
    expect(beats[1].at - beats[0].at).toBeGreaterThanOrEqual(390);
    expect(beats[1].at - beats[0].at).toBeLessThan(900);
    expect(beats[0].details).toEqual({ dispatched: true, channel: 'default' });
  });

  it('an activity with no heartbeat timeout (0) beats as for the 10 s default: quiet for a 1 s call', async () => {
    expect(await attempt(1000, new TestFeed(), undefined, 0)).toEqual([]);
  });

  it('a notice for another task changes nothing', async () => {
    const feed = new TestFeed();
    expect(await attempt(700, feed, () => setTimeout(() => feed.notify('task_other'), 100))).toEqual([]);
  });

  it('every 400 ms while the feed cannot hear a notice (no feed, or its connection down)', async () => {
    for (const feed of [undefined, Object.assign(new TestFeed(), { listening: false })]) {
      // The quiet gap (1 s) would allow one beat at most in 1 s.
      const beats = await attempt(1000, feed);
      expect(beats.length).toBeGreaterThanOrEqual(2);
      expect(beats[0].at).toBeGreaterThanOrEqual(380);
      expect(beats[0].at).toBeLessThan(800);
    }
  });

  it('quickens when the feed drops during the call: at the next quiet beat, then every 400 ms', async () => {
    const feed = new TestFeed();
    const beats = await attempt(1700, feed, () => setTimeout(() => (feed.listening = false), 300));
    expect(beats.length).toBeGreaterThanOrEqual(2);
    expect(beats[0].at).toBeGreaterThanOrEqual(900); // the quiet gap (1 s) found the feed down
    expect(beats[1].at - beats[0].at).toBeGreaterThanOrEqual(390);
    expect(beats[1].at - beats[0].at).toBeLessThan(900);
  });
});

/** A stand-in for ioredis's subscriber connection: events, status and SUBSCRIBE. */
class FakeSubscriber extends EventEmitter {
  status = 'ready';
  subscribed: string[] = [];
  failNext = false;
  subscribe(channel: string) {
    if (this.failNext) {
      this.failNext = false;
      return Promise.reject(new Error('NOPERM'));
    }
    this.subscribed.push(channel);
    return Promise.resolve(1);
  }
  disconnect() {
    this.status = 'end';
  }
}

describe('the cancel notice feed', () => {
  it('listens once SUBSCRIBE is answered, calls the watchers of the id published, stops at close', async () => {
    const sub = new FakeSubscriber();
    const notices = new CancelNotices(sub as unknown as RedisClient, 'kiln:cancel');
    await sleep(0);
    expect(sub.subscribed).toEqual(['kiln:cancel']);
    expect(notices.listening).toBe(true);
    const heard: string[] = [];
    const unwatch = notices.watch('task_a', () => heard.push('a'));
    notices.watch('task_b', () => heard.push('b'));
    sub.emit('message', 'kiln:other', 'task_a');
    sub.emit('message', 'kiln:cancel', 'task_a');
    expect(heard).toEqual(['a']);
    unwatch();
    sub.emit('message', 'kiln:cancel', 'task_a');
    expect(heard).toEqual(['a']);
    // A connection that closes may miss notices until it is subscribed again: every attempt watching
    // is told at once, so it beats often.
    sub.emit('close');
    expect(notices.listening).toBe(false);
    expect(heard).toEqual(['a', 'b']);
    sub.emit('ready');
    await sleep(0);
    expect(notices.listening).toBe(true);
    notices.close();
    expect(notices.listening).toBe(false);
  });

  it('an attempt that starts just after its notice still hears it', async () => {
    const sub = new FakeSubscriber();
    const notices = new CancelNotices(sub as unknown as RedisClient, 'kiln:cancel');
    sub.emit('message', 'kiln:cancel', 'task_late');
    let heard = 0;
    notices.watch('task_late', () => heard++);
    expect(heard).toBe(1);
  });

  it('a refused SUBSCRIBE leaves it not listening and is reported', async () => {
    const sub = new FakeSubscriber();
    sub.failNext = true;
    const errors: string[] = [];
    const notices = new CancelNotices(sub as unknown as RedisClient, 'kiln:cancel', (e) => errors.push(e.message));
    await sleep(0);
    expect(notices.listening).toBe(false);
    expect(errors).toEqual(['NOPERM']);
  });

  it("the workflow's sink publishes the task id, not on replay, and a failed PUBLISH is reported, not thrown", async () => {
    const sent: [string, string][] = [];
    const errors: unknown[] = [];
    let fail = false;
    const sinks = cancelNoticeSinks(
      {
        publish: (ch: string, msg: string) => {
          sent.push([ch, msg]);
          return fail ? Promise.reject(new Error('down')) : Promise.resolve(1);
        },
      } as never,
      'kiln:cancel',
      (e) => errors.push(e),
    );
    const { fn, callDuringReplay } = sinks.cancelNotice.requested;
    expect(callDuringReplay).toBe(false);
    fn({} as never, 'task_x');
    fail = true;
    fn({} as never, 'task_y');
    await sleep(0);
    expect(sent).toEqual([
      ['kiln:cancel', 'task_x'],
      ['kiln:cancel', 'task_y'],
    ]);
    expect(errors).toHaveLength(1);
  });
});
