// The records an image attempt writes itself: `running` when its channel is taken, and `succeeded`
// with the images (a one-call generation, or a job's fetched outputs).
import type { GenerationResult, ImageTaskInput, ImageTaskRecord } from '../../src/shared/image-task.js';
import { WEBHOOK_PENDING } from '../../src/shared/webhook-types.js';
import type { Timing } from '../upstream-call.js';

const base = (input: ImageTaskInput) => ({
  id: input.id,
  kind: 'image' as const,
  owner: input.owner,
  model: input.model,
});

// A task with a webhook keeps showing it (the delivery of this state has not begun).
const webhook = (input: ImageTaskInput) => (input.webhook ? { webhook: WEBHOOK_PENDING } : {});

export function runningRecord(input: ImageTaskInput, timing: Timing, channel: string): ImageTaskRecord {
  return {
    ...base(input),
    status: 'running',
    created_at: input.created_at,
    finished_at: null,
    candidates: null,
    error: null,
    ...timing,
    channel,
    ...webhook(input),
  };
}

export function succeededRecord(
  input: ImageTaskInput,
  result: GenerationResult,
  timing: Timing | undefined,
  channel: string | undefined,
): ImageTaskRecord {
  // The fields in the order the workflow wrote them before, so stored JSON keeps its shape.
  const { candidates, ...rest } = result;
  return {
    ...base(input),
    status: 'succeeded',
    created_at: input.created_at,
    finished_at: Math.floor(Date.now() / 1000),
    candidates,
    error: null,
    ...rest,
    ...timing,
    ...(channel ? { channel } : {}),
    ...webhook(input),
  };
}
