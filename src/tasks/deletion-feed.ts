// The deletion feed: a deleted task's id, published by the delete script (scripts.ts DELETE_TASK)
// on its own channel, reaches every API process, which drops the task's view from its memory
// (src/tasks/store/finished-views.ts). Deletions are rare, so the channel stays subscribed for the
// process's life (unlike the status channel of waits, which wakes every process on every change).
// While the connection is down, a deletion may go unheard: the views of deletable kinds are then
// dropped and not kept again until the channel's SUBSCRIBE is answered on the new connection.
import type { Logger } from 'pino';
import type { FinishedViews } from './store/finished-views.js';
import type { RedisClient } from './store/task-store.js';

const KIND = 'video' as const;

export function followDeletions(
  subscriber: RedisClient,
  channel: string,
  views: FinishedViews | undefined,
  log?: Logger,
): void {
  if (!views) return;
  subscriber.on('message', (ch: string, id: string) => {
    if (ch === channel) views.forget(id);
  });
  subscriber.on('close', () => views.hold(KIND));
  const subscribe = () =>
    subscriber.subscribe(channel).then(
      () => {
        if (subscriber.status === 'ready') views.allow(KIND);
      },
      (err: Error) => log?.warn({ err: err.message }, 'deletion feed unavailable: finished videos are read from Redis'),
    );
  subscriber.on('ready', subscribe);
  if (subscriber.status === 'ready') void subscribe();
}
