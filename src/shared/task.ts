// What every task kind shares (statuses, their order, activity policy, search attributes). Pure types and constants only.

export const TASK_STATUSES = ['accepted', 'queued', 'running', 'succeeded', 'failed', 'uncertain'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];
export const TERMINAL_STATUSES: readonly TaskStatus[] = ['succeeded', 'failed', 'uncertain'];
export const UNFINISHED_STATUSES: readonly TaskStatus[] = ['accepted', 'queued', 'running'];

/** Transitions only move forward: a late or repeated write of an earlier state is ignored. */
export const STATUS_RANK: Record<TaskStatus, number> = {
  accepted: 0,
  queued: 1,
  running: 2,
  succeeded: 3,
  failed: 3,
  uncertain: 3,
};

export interface ActivityPolicy {
  timeoutMs: number;
  /** How long a call may wait for a channel with room; absent in the input of an older release's workflow. */
  queueMs?: number;
  heartbeatTimeoutMs: number;
  maxAttempts: number;
  /** The upstream call runs as a local activity (image models with `inline: true`); absent otherwise. */
  inline?: boolean;
}

export const SEARCH_ATTRIBUTES = {
  owner: 'KilnOwner',
  model: 'KilnModel',
  status: 'KilnStatus',
} as const;
