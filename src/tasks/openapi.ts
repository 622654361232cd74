// Schemas every task kind's answers share, for the OpenAPI document.
import { z } from 'zod';

/** An optional string field with its description. */
export const optionalText = (description: string) => z.string().optional().meta({ description });

export const UncertainReason = optionalText('Status uncertain only: why the outcome cannot be confirmed');

/** Extension fields of image and video tasks (contract clients ignore them). */
export const Timing = {
  started_at: z
    .number()
    .int()
    .nullable()
    .meta({ description: 'Unix seconds when the upstream call began; null before' }),
  attempts: z
    .number()
    .int()
    .min(0)
    .meta({ description: 'Upstream attempts made so far, across channels; 0 before the first' }),
  channel: z.string().nullable().meta({
    description:
      "The model's channel (upstream) that served the task, or the last one tried; null before the first attempt",
  }),
};

/** Deliveries of a task submitted with a webhook (absent otherwise). */
export const WebhookStatus = z
  .object({
    status: z.enum(['pending', 'delivered', 'failed', 'stopped']).meta({
      description:
        '`pending`: a delivery is queued or being retried; `delivered`: the receiver answered 2xx; ' +
        '`stopped`: it answered 410; `failed`: retries ran out',
    }),
    attempts: z.number().int().min(0),
    last_error: z.string().nullable(),
  })
  .meta({ id: 'WebhookStatus' });
