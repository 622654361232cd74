// Who or what ended a task other than its own upstream call (its owner's cancel, an operator's
// cancel or terminate in the Web UI or CLI, Temporal's timeout), and how the task's record says so.
// Pure: the workflows word their own cancels with it, the reconciler the ends no workflow code saw.
import type { ErrorBody } from './errors.js';
import type { CallWording } from './call-wording.js';

/** How far a task's upstream call got: the Redis dispatch mark, and the model's idempotency. */
export type Reach = 'not_sent' | 'sent' | 'sent_not_idempotent';

/** Identity Kiln's API gives its cancel requests: what tells an owner's cancel from an operator's. */
export const OWNER_CANCEL_IDENTITY = 'kiln owner ';

/** What ended the task's workflow from outside, with what the Temporal request carried. */
export type Closing =
  | { how: 'canceled' | 'terminated'; by: 'owner' | 'operator' | 'unknown'; identity?: string; reason?: string }
  | { how: 'timed_out' | 'gone' }
  | { how: 'failed'; reason?: string };

/** Who asked for a cancel, from the identity on its request. */
export function cancelBy(identity: string | undefined): 'owner' | 'operator' {
  return identity?.startsWith(OWNER_CANCEL_IDENTITY) ? 'owner' : 'operator';
}

/** The opening of the task's message: who ended it, with the operator's identity and reason. */
export function endedBy(c: Closing): string {
  switch (c.how) {
    case 'canceled':
    case 'terminated': {
      const verb = c.how === 'canceled' ? 'Canceled' : 'Terminated';
      if (c.by === 'owner') return `${verb} by its owner`;
      if (c.by === 'unknown') return verb;
      const said = [c.identity, c.reason].filter(Boolean).join(': ');
      return `${verb} by an operator${said ? ` (${said})` : ''}`;
    }
    case 'timed_out':
      return "Ended by Temporal: the task's workflow timed out";
    case 'gone':
      return "Ended outside Kiln: the task's workflow is no longer in Temporal";
    case 'failed':
      return `Ended by Temporal: the task's workflow failed${c.reason ? ` (${c.reason})` : ''}`;
  }
}

const how = (w: CallWording): Record<Reach, string> => ({
  not_sent: `before its ${w.request} was sent: the ${w.upstream} was never called.`,
  sent: `after its ${w.request} was sent; the ${w.upstream} is idempotent and the call was stopped.`,
  sent_not_idempotent:
    `after its ${w.request} was sent: it may have reached the ${w.upstream}, which is not idempotent, ` +
    `so the work may still be billed.`,
});

/** A cancel the workflow saw: failed / canceled, saying whether the upstream may bill regardless. */
export function canceledError(who: string, reach: Reach, w: CallWording): ErrorBody {
  return { code: 'canceled', message: `${who} ${how(w)[reach]}` };
}

/**
 * An end no workflow code saw: `uncertain` when the request may have reached a non-idempotent
 * upstream (nobody can say whether it generated and billed), else failed / canceled.
 */
export function closedOutcome(
  c: Closing,
  reach: Reach,
  w: CallWording,
): { status: 'uncertain'; uncertain_reason: string } | { status: 'failed'; error: ErrorBody } {
  const who = endedBy(c);
  if (reach !== 'sent_not_idempotent') return { status: 'failed', error: canceledError(who, reach, w) };
  return {
    status: 'uncertain',
    uncertain_reason:
      `${who} after its ${w.request} was sent: it may have reached the ${w.upstream}, which is not ` +
      `idempotent, so the outcome cannot be confirmed; the request is not sent again.`,
  };
}
