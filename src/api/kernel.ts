// What the task kernel (src/tasks) is handed: the features it serves without importing them.
import type { Config } from '../config/env.js';
import { assertModelAllowed } from '../keys/allowed.js';
import type { KernelDeps } from '../tasks/service.js';
import type { WaitRegistry } from '../tasks/waits.js';
import { admit } from '../usage/admission.js';
import type { Admissions } from '../usage/store.js';
import { webhookTarget } from '../webhooks/target.js';

export function kernelDeps(
  config: Pick<Config, 'pollAfterSeconds' | 'webhooks'>,
  quota: Admissions,
  waits?: WaitRegistry,
): KernelDeps {
  return {
    admit: (ask) => admit(quota, ask, config.pollAfterSeconds),
    unadmit: async (owner, id) => {
      await quota.void(owner, id);
    },
    allowModel: assertModelAllowed,
    webhookTarget: (url, events) => webhookTarget(url, events, config.webhooks.allow),
    ...(waits ? { waits } : {}),
  };
}
