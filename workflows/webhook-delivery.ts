// One workflow per webhook delivery (a task's event, to its webhook URL): attempts are activities,
// the waits between them durable timers, so a delivery outlives worker and API restarts and its
// attempts show in the Web UI. Task workflows start it as an abandoned child once the read model
// shows the event, under the id `<taskId>/webhook/<status>`.
import { CancellationScope, ParentClosePolicy, proxyActivities, sleep, startChild } from '@temporalio/workflow';
import type { WebhookActivities, WebhookDelivery } from '../activities/deliver-webhook.js';
import type { TaskStatus } from '../src/shared/task.js';
import type { AnyTaskRecord } from '../src/shared/records.js';
import type { WebhookState, WebhookTarget } from '../src/shared/webhook-types.js';

const { deliverWebhook } = proxyActivities<WebhookActivities>({
  // An attempt waits 10 s for the receiver; the rest is two Redis round trips.
  startToCloseTimeout: '30s',
  // Only for what is not the receiver's answer (the attempt's worker died, Redis unreachable, the
  // read model not there yet): the receiver's failures are retried by the loop below.
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m' },
  scheduleToCloseTimeout: '1h',
});

export async function webhookDeliveryWorkflow(delivery: WebhookDelivery): Promise<WebhookState> {
  const startedAtMs = Date.now();
  for (let attempt = 1; ; attempt++) {
    const r = await deliverWebhook({ ...delivery, attempt, startedAtMs });
    if (r.retryInMs === null) return r.state;
    await sleep(r.retryInMs);
  }
}

/**
 * Starts the delivery of `record`'s state (call it after the read model has it). Abandoned by the
 * task: the task's result never waits on a receiver. The id is deterministic, so an event is
 * delivered once however often this runs.
 */
export async function startWebhookDelivery(
  target: WebhookTarget,
  record: AnyTaskRecord,
  after?: TaskStatus,
): Promise<void> {
  const delivery: WebhookDelivery = {
    messageId: `msg_${record.id}_${record.status}`,
    url: target.url,
    record,
    ...(after ? { after } : {}),
  };
  try {
    // A cancelled task still reports how it ended.
    await CancellationScope.nonCancellable(() =>
      startChild(webhookDeliveryWorkflow, {
        workflowId: `${record.id}/webhook/${record.status}`,
        args: [delivery],
        parentClosePolicy: ParentClosePolicy.ABANDON,
      }),
    );
  } catch (err) {
    // Started already (a reset task workflow ran this again): that delivery stands. By name, as
    // the class is not exported to workflow code.
    if ((err as Error).name !== 'WorkflowExecutionAlreadyStartedError') throw err;
  }
}
