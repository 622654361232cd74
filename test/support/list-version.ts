// A test that edits an owner's index or list items behind the store's back (to stand in for a
// failed step, an older release's data or time passing) bumps the owner's list version as every
// store script does: otherwise an API process may answer the list page it kept from before the
// edit (src/tasks/store/list-pages.ts), which no real write leaves it to do.
import { LIST_VERSION_FIELD } from '../../src/tasks/store/list-pages.js';
import type { RedisClient } from '../../src/tasks/store/task-store.js';

export async function bumpListVersion(redis: RedisClient, itemsKey: string): Promise<void> {
  await redis.hincrby(itemsKey, LIST_VERSION_FIELD, 1);
}
