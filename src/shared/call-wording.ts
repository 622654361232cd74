// The wording of a task's timeout and `uncertain` messages, by kind of upstream call.
// Pure module: safe to value-import from workflow code.

/** How a task's failure messages name its upstream call: image and video tasks word them differently. */
export interface CallWording {
  /** What was sent: 'request', 'create request'. */
  request: string;
  /** Who it went to: 'upstream generator', 'upstream'. */
  upstream: string;
  /** What a timeout did not bring: 'final answer' (image calls may wait out 429s first), 'answer'. */
  answer: string;
}

export const IMAGE_CALL: CallWording = { request: 'request', upstream: 'upstream generator', answer: 'final answer' };
export const VIDEO_CALL: CallWording = { request: 'create request', upstream: 'upstream', answer: 'answer' };

/** The `uncertain` reason of a request that may have reached a non-idempotent upstream; `how` the attempt ended. */
export function notResent(w: CallWording, how: string): string {
  return (
    `The ${w.request} may have reached the ${w.upstream}, but ${how}; ` +
    `it is not resent because the upstream is not idempotent.`
  );
}
