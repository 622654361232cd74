// What a read of one id answers; its own module, so the finished-views cache and the store can
// both name it without importing each other.
import type { TaskStatus } from '../../shared/task.js';

/** A record's public view as stored (JSON text), or why there is none. */
export type StoredView = { status: TaskStatus; view: string } | 'foreign' | 'absent';
