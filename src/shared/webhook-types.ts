// Webhook shapes shared by API, activities and workflows. Pure types and constants only, so that
// workflow code (sandboxed, deterministic) can import them.

export const WEBHOOK_EVENTS = ['terminal', 'all'] as const;
export type WebhookEvents = (typeof WEBHOOK_EVENTS)[number];

/** Where and when a task's status changes are delivered; set at submit, immutable afterwards. */
export interface WebhookTarget {
  url: string;
  events: WebhookEvents;
}

/**
 * What a poll shows of the deliveries (`webhook` on the task object). `pending`: a delivery is
 * queued or being retried; `delivered`: the receiver answered 2xx; `stopped`: it answered 410;
 * `failed`: retries ran out (24 h).
 */
export interface WebhookState {
  status: 'pending' | 'delivered' | 'failed' | 'stopped';
  attempts: number;
  last_error: string | null;
}

/** What a task with a webhook shows until an attempt of its latest event's delivery has ended. */
export const WEBHOOK_PENDING: WebhookState = { status: 'pending', attempts: 0, last_error: null };
