// What every task kind shares (statuses, their order, the input and record fields, activity policy, search
// attributes). Pure types and constants only.
import type { ChannelTrail } from './channel-trail.js';
import type { WebhookState, WebhookTarget } from './webhook-types.js';

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

/** What a task of any kind carries into its workflow: its identity and its kind's request. */
export interface TaskInput<Q> {
  id: string;
  owner: string;
  model: string;
  created_at: number;
  request: Q;
  /** The caller's upstream key in passthrough mode; travels only inside encrypted payloads. */
  credential?: string;
  webhook?: WebhookTarget;
  /** Set by the workflow once a channel refused the task (see src/upstreams/failover.ts). */
  route?: ChannelTrail;
}

/** The fields every kind's record ends with: how an attempt went and what a poll shows of it. */
export interface TaskRecordTail {
  /** Why the outcome cannot be confirmed (status uncertain only; `error` stays null as the contract says). */
  uncertain_reason?: string;
  /** Timing extension fields: when the upstream call began (epoch s) and how many attempts were made. */
  started_at?: number | null;
  attempts?: number;
  /** The channel of the model that served the task, or the last one tried. */
  channel?: string;
  /** Present when the task was submitted with a webhook. */
  webhook?: WebhookState;
}

export interface ActivityPolicy {
  timeoutMs: number;
  /** How long a call may wait for a channel with room; absent in the input of an older release's workflow. */
  queueMs?: number;
  heartbeatTimeoutMs: number;
  maxAttempts: number;
  /** The upstream call runs as a local activity (image models with `inline: true`); absent otherwise. */
  inline?: boolean;
  /** Image models whose provider answers later: the job's check interval and whole-task budget; absent otherwise. */
  job?: { pollIntervalMs: number; overallTimeoutMs: number };
}

export const SEARCH_ATTRIBUTES = {
  owner: 'KilnOwner',
  model: 'KilnModel',
  status: 'KilnStatus',
} as const;
