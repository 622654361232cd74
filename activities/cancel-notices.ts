// Cancel notices: a workflow that is asked to cancel publishes its task id on a Redis channel (a
// sink: no history event), and every worker hears it. The attempt that holds the task's upstream
// call then heartbeats at once and often, so Temporal's cancel, which only a heartbeat's answer
// carries to an activity, arrives within a second. Without a notice an attempt heartbeats only as
// often as Temporal needs to tell a dead worker (activities/heartbeats.ts): each heartbeat is a
// write of the workflow's state, and a call of 30 s used to cost 75 of them.
import type { Sinks } from '@temporalio/workflow';
import type { InjectedSinks } from '@temporalio/worker';
import type { RedisClient } from '../src/infra/redis.js';

/** The sink workflow code calls (`proxySinks<CancelNoticeSinks>()`) when it is asked to cancel. */
export interface CancelNoticeSinks extends Sinks {
  cancelNotice: {
    requested(taskId: string): void;
  };
}

/** How long a notice is remembered: an attempt that starts just after the cancel still hears it. */
const REMEMBER_MS = 60_000;

/** What an attempt asks of the feed (activities/heartbeats.ts); tests hand in their own. */
export interface CancelFeed {
  /** False while the channel is not subscribed: a notice could be missed, so attempts beat often. */
  readonly listening: boolean;
  /**
   * Calls `heard` when a notice for `taskId` arrives (at once if one arrived lately), or when the
   * feed stops listening and could miss one. Returns the unwatch.
   */
  watch(taskId: string, heard: () => void): () => void;
}

export class CancelNotices implements CancelFeed {
  private readonly watchers = new Map<string, Set<() => void>>();
  private readonly recent = new Map<string, number>();
  private subscribed = false;

  /** `subscriber`: a connection of its own (a subscribed connection sends no other commands). */
  constructor(
    private readonly subscriber: RedisClient,
    private readonly channel: string,
    private readonly onError: (err: Error) => void = () => undefined,
  ) {
    subscriber.on('message', (ch: string, id: string) => {
      if (ch === this.channel) this.heard(id);
    });
    subscriber.on('close', () => {
      this.subscribed = false;
      // A notice may now go unheard: every attempt beats often until it ends.
      for (const set of this.watchers.values()) for (const fn of set) fn();
    });
    subscriber.on('ready', () => void this.subscribe());
    if (subscriber.status === 'ready') void this.subscribe();
  }

  get listening(): boolean {
    return this.subscribed;
  }

  watch(taskId: string, heard: () => void): () => void {
    const at = this.recent.get(taskId);
    if (at !== undefined && Date.now() - at < REMEMBER_MS) heard();
    let set = this.watchers.get(taskId);
    if (!set) this.watchers.set(taskId, (set = new Set()));
    set.add(heard);
    return () => {
      set.delete(heard);
      if (!set.size && this.watchers.get(taskId) === set) this.watchers.delete(taskId);
    };
  }

  close(): void {
    this.subscribed = false;
    this.subscriber.disconnect();
  }

  private heard(taskId: string): void {
    const now = Date.now();
    this.recent.set(taskId, now);
    // Oldest first (insertion order): drop what is past remembering.
    for (const [id, at] of this.recent) {
      if (now - at < REMEMBER_MS) break;
      this.recent.delete(id);
    }
    for (const fn of this.watchers.get(taskId) ?? []) fn();
  }

  private async subscribe(): Promise<void> {
    try {
      await this.subscriber.subscribe(this.channel);
      this.subscribed = this.subscriber.status === 'ready';
    } catch (err) {
      this.onError(err as Error);
    }
  }
}

/** The worker's side of the sink: PUBLISH, not awaited by the workflow task; a lost notice costs speed only. */
export function cancelNoticeSinks(
  publisher: Pick<RedisClient, 'publish'>,
  channel: string,
  onError: (err: unknown) => void = () => undefined,
): InjectedSinks<CancelNoticeSinks> {
  return {
    cancelNotice: {
      requested: {
        fn: (_info, taskId) => {
          publisher.publish(channel, taskId).catch(onError);
        },
        callDuringReplay: false,
      },
    },
  };
}
