// GET /admin/v1/channels: every configured channel's health for operators, behind the operator
// token like the other admin calls (src/api/admin-routes.ts). Read from the channels' shared state
// in Redis, so any API process answers for the whole deployment.
import { z } from 'zod';
import { requireOperator } from '../http/operator-token.js';
import { route, type RouteDef } from '../http/route-table.js';
import type { Model } from '../config/models.js';
import { KilnError } from '../shared/errors.js';
import { readChannels, within, type ChannelReading } from './readings.js';
import type { ChannelState } from './state.js';

export interface ChannelAdminDeps {
  channels: ChannelState;
  models: readonly Model[];
  operatorToken?: string;
}

/** A Redis that does not answer within this is reported unavailable rather than waited for. */
const READ_TIMEOUT_MS = 2000;

export const channelsUnavailable = () =>
  new KilnError('service_unavailable', "The channels' state (Redis) is unavailable for a moment; retry shortly.", 1);

const calls = (description: string) => z.number().int().min(0).meta({ description });
const CallCounts = z
  .object({
    succeeded: calls('An answer (or an accepted video job).'),
    refused: calls('An explicit refusal before processing: 429, 503, 401/403, insufficient balance.'),
    not_sent: calls('A transport failure before the request could leave (connection refused, DNS).'),
    failed: calls('Any other answer: a 5xx that may follow processing, a bad request.'),
    ambiguous: calls('Sent, then a timeout or a dropped connection before a complete answer.'),
    canceled: calls('The task was canceled mid-call (no verdict on the channel).'),
  })
  .meta({ id: 'ChannelCallCounts' });

const ms = (description: string) => z.number().int().nullable().meta({ description });
const ChannelHealth = z
  .object({
    model: z.string(),
    kind: z.enum(['image', 'chat', 'video']),
    channel: z
      .string()
      .meta({ description: "The channel's id in the models file (`default` for a model without channels)." }),
    provider: z.string(),
    priority: z.number().int().meta({ description: 'Higher is tried first.' }),
    weight: z.number().meta({ description: 'Share of calls within its priority tier.' }),
    state: z.enum(['closed', 'open', 'half_open']).meta({
      description:
        '`closed`: takes calls; `open`: cooling down after refusals or not-sent failures, skipped until ' +
        '`cooling_until`; `half_open`: the cool-down ended and the next call probes it.',
    }),
    cooling_until: z.number().int().nullable().meta({
      description: 'Epoch seconds when the cool-down ends (half_open: when it ended); null when closed.',
    }),
    in_flight: z.number().int().meta({ description: 'Calls holding a lease now, deployment-wide.' }),
    concurrency: z.number().int().nullable().meta({
      description: 'Calls in flight at once allowed deployment-wide; null when unbounded (chat channels).',
    }),
    rate_per_second: z.number().nullable().meta({ description: 'Calls started per second allowed; null: no limit.' }),
    success_rate: z.number().min(0).max(1).nullable().meta({
      description: 'Succeeded / calls of the last 5 minutes (canceled ones left out); null without calls.',
    }),
    p50_ms: ms('Median latency of the last 5 minutes’ calls; null without calls.'),
    p95_ms: ms('95th percentile latency of the last 5 minutes’ calls; null without calls.'),
    calls_5m: CallCounts.meta({ description: 'Calls that ended in the last 5 minutes, by outcome.' }),
    last_error: z
      .object({
        code: z.string().meta({ description: 'The task failure code the call ended with.' }),
        message: z.string().meta({ description: 'Short, without secrets.' }),
        at: z.number().int().meta({ description: 'Epoch seconds.' }),
      })
      .nullable()
      .meta({ description: 'The latest call that did not succeed, however long ago; null if none.' }),
  })
  .meta({ id: 'ChannelHealth' });

const ChannelHealthList = z
  .object({ object: z.literal('list'), data: z.array(ChannelHealth) })
  .meta({ id: 'ChannelHealthList' });

export type ChannelHealthEntry = z.infer<typeof ChannelHealth>;

export function channelEntry({ model, channel, snapshot: s }: ChannelReading): ChannelHealthEntry {
  return {
    model: model.id,
    kind: model.kind,
    channel: channel.id,
    provider: channel.provider,
    priority: channel.priority,
    weight: channel.weight,
    state: s.state,
    cooling_until: s.coolingUntil === null ? null : Math.ceil(s.coolingUntil / 1000),
    in_flight: s.inFlight,
    concurrency: 'concurrency' in channel ? channel.concurrency : null,
    rate_per_second: ('ratePerSecond' in channel ? channel.ratePerSecond : undefined) ?? null,
    success_rate: s.successRate,
    p50_ms: s.p50Ms,
    p95_ms: s.p95Ms,
    calls_5m: { ...s.recent },
    last_error: s.lastError && { ...s.lastError, at: Math.floor(s.lastError.at / 1000) },
  };
}

export function channelAdminRoutes({ channels, models, operatorToken }: ChannelAdminDeps): RouteDef[] {
  return [
    route({
      method: 'get',
      route: '/admin/v1/channels',
      operationId: 'listChannelHealth',
      tags: ['admin'],
      auth: 'operator',
      summary: "Every configured channel's health: state, load, recent outcomes and latency",
      description:
        'One entry per model and channel, for the whole deployment (read from Redis, where every worker ' +
        'records its calls). Models in the models file order, channels highest priority first. ' +
        'See docs/operating.md, "Channel health".',
      responses: { 200: { description: 'The channels', schema: ChannelHealthList } },
      errors: ['not_found', 'service_unavailable'],
      handler: async (ctx) => {
        requireOperator(ctx, operatorToken, 'The admin endpoints');
        const readings = await within(readChannels(channels, models), READ_TIMEOUT_MS);
        if (!readings) throw channelsUnavailable();
        ctx.set('Cache-Control', 'no-store');
        ctx.body = { object: 'list', data: readings.map(channelEntry) };
      },
    }),
  ];
}
