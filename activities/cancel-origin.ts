// Who asked Temporal to cancel the running task: its owner (through Kiln's API) or an operator (the
// Web UI, the CLI), read from the WorkflowExecutionCancelRequested event of the task's history.
import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import { cancelBy, type Closing } from '../src/shared/closing.js';

/** The cancel that reached the calling activity's workflow; `unknown` when Temporal cannot say. */
export type CancelOrigin = () => Promise<Closing>;

export function cancelOrigin(client: Client | undefined): CancelOrigin {
  const unknown: Closing = { how: 'canceled', by: 'unknown' };
  return async () => {
    if (!client) return unknown;
    const execution = Context.current().info.workflowExecution;
    if (!execution) return unknown;
    const { workflowId, runId } = execution;
    try {
      const { events } = await client.workflow.getHandle(workflowId, runId).fetchHistory();
      const asked = [...(events ?? [])]
        .reverse()
        .find(
          (e) => e.workflowExecutionCancelRequestedEventAttributes,
        )?.workflowExecutionCancelRequestedEventAttributes;
      if (!asked) return unknown;
      const identity = asked.identity || undefined;
      const by = cancelBy(identity);
      // An owner's identity names the owner id; the message says "its owner" without it.
      if (by === 'owner') return { how: 'canceled', by };
      return {
        how: 'canceled',
        by,
        ...(identity ? { identity } : {}),
        ...(asked.cause ? { reason: asked.cause } : {}),
      };
    } catch {
      return unknown;
    }
  };
}
