// `kiln admin usage`, `kiln admin limits …` and `kiln admin tasks release`: every owner's usage, an
// owner's limits and the release of an uncertain task's units, through the admin API
// (src/usage/routes.ts) with the operator token. Owners are named as the API names them: the keys'
// owner name in keys mode (`acme`), the owner id otherwise.
import { InvalidArgumentError, type Command } from 'commander';
import type { KilnCore } from '../client/core.js';
import { UsageError, type Ctx } from './context.js';
import { usageHeading, usageOptions, usageQuery, usageTable, type UsageReport } from './usage-commands.js';

type Make = (cmd: Command) => Ctx;
type OperatorApi = (ctx: Ctx, token?: string) => KilnCore;

const LIMITS = ['max_unfinished', 'submits_per_minute', 'daily_units', 'monthly_units'] as const;
type LimitName = (typeof LIMITS)[number];
type Limits = Record<LimitName, number | null>;

/** A limit flag's name: `--daily-units` for daily_units. */
const flagOf = (n: LimitName) => `--${n.replaceAll('_', '-')}`;
/** Commander's option property: dailyUnits for daily_units. */
const propOf = (n: LimitName) => n.replace(/_(.)/g, (_, c: string) => c.toUpperCase());

const LIMIT_HELP: Record<LimitName, string> = {
  max_unfinished: 'tasks not yet finished at once',
  submits_per_minute: 'submits in any 60 s',
  daily_units: 'units per UTC day',
  monthly_units: 'units per UTC month',
};

/**
 * A limit flag's value: a whole number; `none` (no limit) and `default` (the deployment's default
 * again) where `accept` allows them. `none` stays a word here (commander turns a null into '');
 * limitsFrom sends it as null.
 */
export function limitValue(flag: string, accept: { none?: boolean; default?: boolean } = {}) {
  return (v: string): number | 'none' | 'default' => {
    const t = v.trim();
    if (/^\d{1,10}$/.test(t)) return Number(t);
    if (accept.none && t === 'none') return 'none';
    if (accept.default && t === 'default') return 'default';
    const words = [accept.none ? 'none' : '', accept.default ? 'default' : ''].filter(Boolean);
    throw new InvalidArgumentError(
      `${flag} must be a whole number${words.length ? ` or ${words.join(' or ')}` : ''}, got "${v}".`,
    );
  };
}

/** Adds the four limit flags to a command. */
export function limitOptions(cmd: Command, accept: { none?: boolean; default?: boolean }, what: string): Command {
  const words = [accept.none ? 'none: no limit' : '', accept.default ? "default: the deployment's" : '']
    .filter(Boolean)
    .join('; ');
  for (const n of LIMITS)
    cmd.option(
      `${flagOf(n)} <n>`,
      `${what} ${LIMIT_HELP[n]}${words ? ` (${words})` : ''}`,
      limitValue(flagOf(n), accept),
    );
  return cmd;
}

/** The limits the flags give, in the API's field names; empty when none was given. */
export function limitsFrom(o: Record<string, unknown>): Partial<Record<LimitName, number | null | 'default'>> {
  const out: Partial<Record<LimitName, number | null | 'default'>> = {};
  for (const n of LIMITS) {
    const v = o[propOf(n)] as number | 'none' | 'default' | undefined;
    if (v !== undefined) out[n] = v === 'none' ? null : v;
  }
  return out;
}

const limitText = (v: number | null | undefined) => (v === null || v === undefined ? 'none' : String(v));

/** `max_unfinished=10,daily_units=100`: a key's limits that are set, or undefined when none is. */
export function keyLimitsText(l: Partial<Limits> | null | undefined): string | undefined {
  const set = LIMITS.filter((n) => l?.[n] !== null && l?.[n] !== undefined).map((n) => `${n}=${l![n]}`);
  return set.length ? set.join(',') : undefined;
}

interface OwnerLimits {
  object: 'owner.limits';
  owner: string;
  limits: Limits;
  own: Partial<Limits>;
  defaults: Limits;
}

/** One line per limit: what applies, and whence (the owner's own, or the default). */
export function ownerLimitsText(l: OwnerLimits): string {
  const width = Math.max(...LIMITS.map((n) => n.length));
  const lines = LIMITS.map((n) => {
    const whence = n in l.own ? `own; the default is ${limitText(l.defaults[n])}` : 'default';
    return `${n.padEnd(width)}  ${limitText(l.limits[n]).padEnd(10)}  (${whence})`;
  });
  return [`owner ${l.owner}`, ...lines].join('\n');
}

const withToken = (cmd: Command) =>
  cmd.option('--operator-token <token>', 'the operator token (prefer env KILN_OPERATOR_TOKEN: flags show in ps)');

export function registerUsageAdminCommands(admin: Command, make: Make, operatorApi: OperatorApi): void {
  withToken(usageOptions(admin.command('usage')))
    .description("every owner's usage (or one's) per UTC day and/or model, as a table, CSV or JSON (docs/usage.md)")
    .option('--owner <owner>', "only this owner: the keys' owner name in keys mode, else the owner id")
    .option('--csv', 'the rows as CSV (RFC 4180) on stdout')
    .action(
      async (
        o: { operatorToken?: string; owner?: string; from?: string; to?: string; groupBy?: string; csv?: boolean },
        cmd: Command,
      ) => {
        const ctx = make(cmd);
        if (o.csv && ctx.json) throw new UsageError('Give --csv or --json, not both.');
        const api = operatorApi(ctx, o.operatorToken);
        const query = { ...usageQuery(o), owner: o.owner };
        const signal = ctx.abort.signal;
        if (o.csv) {
          const { response } = await api.request<undefined>('GET', '/admin/v1/usage', {
            query: { ...query, format: 'csv' },
            headers: { accept: 'text/csv' },
            raw: true,
            signal,
          });
          process.stdout.write(await response.text());
          return;
        }
        const r = (await api.request<UsageReport>('GET', '/admin/v1/usage', { query, signal })).data;
        ctx.out(r);
        ctx.note(usageHeading(r));
        ctx.say(usageTable(r, true));
      },
    );

  const limits = admin
    .command('limits')
    .description("an owner's limits: those that apply, its own and the defaults (docs/usage.md)");
  const path = (owner: string) => `/admin/v1/owners/${encodeURIComponent(owner)}/limits`;
  const print = (ctx: Ctx, l: OwnerLimits) => {
    ctx.out(l);
    ctx.say(ownerLimitsText(l));
  };

  withToken(limits.command('show'))
    .description("an owner's limits")
    .argument('<owner>', "the keys' owner name in keys mode, else the owner id")
    .action(async (owner: string, o: { operatorToken?: string }, cmd: Command) => {
      const ctx = make(cmd);
      const api = operatorApi(ctx, o.operatorToken);
      print(ctx, (await api.request<OwnerLimits>('GET', path(owner), { signal: ctx.abort.signal })).data);
    });

  limitOptions(
    withToken(limits.command('set'))
      .description("change an owner's own limits; the next submit is checked against them")
      .argument('<owner>', "the keys' owner name in keys mode, else the owner id"),
    { none: true, default: true },
    "the owner's",
  ).action(async (owner: string, o: Record<string, unknown> & { operatorToken?: string }, cmd: Command) => {
    const ctx = make(cmd);
    const body = limitsFrom(o);
    if (!Object.keys(body).length)
      throw new UsageError(`Nothing to change: give ${LIMITS.map(flagOf).join(', ')} (N, none or default).`);
    const api = operatorApi(ctx, o.operatorToken);
    print(ctx, (await api.request<OwnerLimits>('PATCH', path(owner), { body, signal: ctx.abort.signal })).data);
  });

  const tasks = admin.command('tasks').description('operator actions on tasks');
  withToken(tasks.command('release'))
    .description(
      "release the units an uncertain task holds (after checking the upstream did not bill it): they go back to its owner's quota",
    )
    .argument('<id>', 'the task id (task_… or video_…)')
    .option('--owner <owner>', "the task's owner, needed once its record expired")
    .action(async (id: string, o: { operatorToken?: string; owner?: string }, cmd: Command) => {
      const ctx = make(cmd);
      const api = operatorApi(ctx, o.operatorToken);
      const r = (
        await api.request<{ id: string; released: boolean }>(
          'POST',
          `/admin/v1/tasks/${encodeURIComponent(id)}/release`,
          { query: { owner: o.owner }, signal: ctx.abort.signal, maxRetries: 0 },
        )
      ).data;
      ctx.out(r);
      ctx.say(`released ${r.id}`);
    });
}
