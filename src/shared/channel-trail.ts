// What a task carries from the channels it left: the data of the failover decision
// (src/upstreams/failover.ts), kept here so the task records can name it.

/**
 * The channels a task was moved off (skipped while another is available) and the attempts made so
 * far. Tasks carry it as `route` (the name histories in flight already hold).
 */
export interface ChannelTrail {
  tried: string[];
  attempts: number;
}

/** One attempt that moved the task to another channel: the Web UI's "attempt 1 relay-a: 503". */
export interface FailedOver {
  channel: string;
  /** The task failure code the refusal would have ended the task with. */
  code: string;
  message: string;
  /** Attempts made so far, this one included. */
  attempts: number;
  durationMs: number;
  /** The upstream's Retry-After, when it gave one. */
  retryAfterMs?: number;
}
