// The schemas of the usage and limits endpoints (routes.ts) and of a key's `limits`
// (src/keys/routes.ts): the query and bodies they are validated with, and their answers.
import { z } from 'zod';
import { LIMIT_NAMES, MAX_LIMIT, type LimitName } from '../config/limits.js';
import { COUNTERS, type Counter } from '../shared/usage.js';
import { DATE_FORMAT, dayStart, GROUPINGS, MAX_RANGE_DAYS } from './report.js';

export const LIMIT_TEXT: Record<LimitName, string> = {
  max_unfinished: 'Tasks submitted and not yet finished, at once.',
  submits_per_minute: 'Submits in any 60 seconds.',
  daily_units: 'Units of the tasks submitted in one UTC day.',
  monthly_units: 'Units of the tasks submitted in one UTC month.',
};

const limitNumber = () =>
  z
    .number({ error: `must be a whole number from 0 to ${MAX_LIMIT}, or null` })
    .int('must be a whole number')
    .min(0, 'must be at least 0 (null: no limit)')
    .max(MAX_LIMIT, `must be at most ${MAX_LIMIT}`);

const limitShape = <T extends z.ZodType>(field: (name: LimitName) => T) =>
  Object.fromEntries(LIMIT_NAMES.map((n) => [n, field(n)])) as Record<LimitName, T>;

/** Every limit: a number, or null for none. */
export const LimitsSchema = z
  .object(
    limitShape((n) =>
      z
        .number()
        .int()
        .nullable()
        .meta({ description: `${LIMIT_TEXT[n]} null: no limit.` }),
    ),
  )
  .meta({ id: 'Limits' });

/** A key's limits, as POST and PATCH /admin/v1/keys take them: absent stays, null removes. */
export const KeyLimitsPatch = z
  .object(
    limitShape((n) =>
      limitNumber()
        .nullable()
        .optional()
        .meta({ description: `${LIMIT_TEXT[n]} null: none of the key's own.` }),
    ),
  )
  .strict()
  .meta({
    id: 'LimitsPatch',
    description:
      "The key's own limits, counted over this key alone (the owner's apply as well): only the fields sent " +
      'change; null removes that limit.',
  });

const ownerSetting = (n: LimitName) =>
  z
    .union([limitNumber(), z.null(), z.literal('default')], {
      error: `must be a whole number from 0 to ${MAX_LIMIT}, null (no limit) or "default"`,
    })
    .optional()
    .meta({
      description: `${LIMIT_TEXT[n]} A number; null: no limit for this owner (whatever the default); "default": the deployment's.`,
    });

/** PATCH /admin/v1/owners/{owner}/limits. */
export const OwnerLimitsPatch = z
  .object(limitShape(ownerSetting))
  .strict()
  .meta({ id: 'OwnerLimitsPatch', description: 'Only the fields sent change.' });

export const OwnerLimits = z
  .object({
    object: z.literal('owner.limits'),
    owner: z.string().meta({ description: 'The owner as named in the path.' }),
    limits: LimitsSchema.meta({ description: "The limits that apply: the owner's own where set, else the defaults." }),
    own: z
      .object(
        limitShape((n) =>
          z
            .number()
            .int()
            .nullable()
            .optional()
            .meta({ description: `${LIMIT_TEXT[n]} null: no limit, whatever the default.` }),
        ),
      )
      .meta({ description: "The owner's own settings: only the fields set (absent: the default applies)." }),
    defaults: LimitsSchema.meta({ description: "The deployment's defaults (OWNER_* settings)." }),
  })
  .meta({ id: 'OwnerLimits' });

export const Day = z
  .string()
  .regex(DATE_FORMAT, 'must be a date YYYY-MM-DD')
  .refine((d) => dayStart(d) !== null, 'is not a day of the calendar')
  .meta({ format: 'date', example: '2026-01-31' });

export const UsageQuery = z.object({
  from: Day.optional().meta({ description: 'First day (UTC) of the report, included; default: 29 days before `to`.' }),
  to: Day.optional().meta({
    description: `Last day (UTC), included; default: today. At most ${MAX_RANGE_DAYS} days from \`from\`.`,
  }),
  group_by: z
    .enum(GROUPINGS, { error: `must be one of ${GROUPINGS.join(' | ')}` })
    .default('day')
    .meta({ description: 'A row per day, per model, or per day and model (default `day`).' }),
});

/** An owner as operators name it (the routes' ownerId checks its form): a keys' owner name, or an owner id. */
export const OperatorOwner = z.string().max(64);

export const AdminUsageQuery = UsageQuery.extend({
  owner: OperatorOwner.optional().meta({
    description:
      "Only this owner: in keys mode the keys' owner name (`acme`), otherwise the owner id (64 hex digits) " +
      'as other rows show it. Default: every owner that submitted since `from`.',
  }),
  format: z
    .enum(['json', 'csv'], { error: 'must be json or csv' })
    .optional()
    .meta({ description: 'csv: the rows as CSV (as `Accept: text/csv`); default JSON.' }),
});

const COUNTER_TEXT: Record<Counter, string> = {
  submitted: 'Tasks submitted (admitted against the quota).',
  succeeded: 'Of those, tasks that succeeded.',
  failed: 'Tasks that failed (cancels apart).',
  canceled: 'Tasks canceled by their owner.',
  uncertain: 'Tasks that ended uncertain: their units are held until an operator releases them.',
  released: 'Uncertain tasks whose held units an operator released.',
  units: 'Units charged (and held for uncertain tasks), net of releases.',
  upstream_seconds: 'Seconds spent on upstream calls, first call to end.',
};

const counterShape = Object.fromEntries(
  COUNTERS.map((c) => [
    c,
    (c === 'upstream_seconds' ? z.number() : z.number().int()).meta({ description: COUNTER_TEXT[c] }),
  ]),
) as Record<Counter, z.ZodNumber>;

export const UsageCounters = z.object(counterShape).meta({ id: 'UsageCounters' });

const date = z.string().optional().meta({ description: 'The UTC day the tasks were submitted (grouped by day).' });
const model = z.string().optional().meta({ description: 'The model (grouped by model).' });

const UsageRow = z.object({ date, model, ...counterShape }).meta({ id: 'UsageRow' });
const AdminUsageRow = z
  .object({
    date,
    owner: z.string().meta({ description: "The owner: in keys mode the keys' owner name, else its id." }),
    model,
    ...counterShape,
  })
  .meta({ id: 'AdminUsageRow' });

const usageReport = <R extends z.ZodType>(row: R) => ({
  object: z.literal('usage'),
  from: z.string().meta({ description: 'First day, YYYY-MM-DD.' }),
  to: z.string().meta({ description: 'Last day, YYYY-MM-DD.' }),
  group_by: z.enum(GROUPINGS),
  data: z.array(row).meta({
    description: 'Rows with a counter that is not zero, sorted by date, then owner, then model.',
  }),
  total: UsageCounters.meta({ description: 'Every counter over the whole range.' }),
});

export const Usage = z.object(usageReport(UsageRow)).meta({ id: 'Usage' });
export const AdminUsage = z
  .object({
    ...usageReport(AdminUsageRow),
    owner: z.string().nullable().meta({ description: 'The owner asked for; null: every owner.' }),
  })
  .meta({ id: 'AdminUsage' });

export const UsageCsv = z.string().meta({
  description:
    'RFC 4180, CRLF line ends: a header line (date, owner, model: those of the grouping, owner always; then ' +
    `${COUNTERS.join(', ')}), then one line per row of the JSON answer, in its order.`,
});

export const TaskRelease = z
  .object({
    id: z.string(),
    object: z.literal('task.release'),
    released: z.literal(true),
  })
  .meta({ id: 'TaskRelease' });
