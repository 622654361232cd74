// `kiln admin keys …`: API keys through the admin API (/admin/v1/keys, src/keys/routes.ts) with the
// operator token. `npm run keys` (src/cli/keys.ts) is the same store straight over Redis, for the
// first keys of a deployment.
import { InvalidArgumentError, type Command } from 'commander';
import type { KilnCore } from '../client/core.js';
import { keyLimitsText, limitOptions, limitsFrom } from './admin-usage.js';
import { UsageError, type Ctx } from './context.js';

type Make = (cmd: Command) => Ctx;

const PATH = '/admin/v1/keys';

export interface ApiKey {
  id: string;
  object: 'api_key';
  key?: string;
  owner: string;
  label: string | null;
  hint: string;
  created_at: number;
  last_used_at: number | null;
  expires_at: number | null;
  revoked_at: number | null;
  models: string[] | null;
  /** The key's own limits, null where it has none. */
  limits?: Record<string, number | null>;
}

/** `--expires-at`: epoch seconds, or an ISO 8601 date and time (with its zone, else local time). */
export function expiresAt(v: string): number {
  const t = v.trim();
  if (/^\d{1,12}$/.test(t)) return Number(t);
  const ms = /^\d{4}-\d{2}-\d{2}/.test(t) ? Date.parse(t) : NaN;
  if (Number.isNaN(ms))
    throw new InvalidArgumentError(
      `--expires-at must be epoch seconds or an ISO date (2026-01-31T12:00:00Z), got "${v}".`,
    );
  return Math.ceil(ms / 1000);
}

/** `--models a,b`: the allow-list. */
export function modelList(v: string): string[] {
  const ids = v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (!ids.length) throw new InvalidArgumentError('--models must name at least one model id (a,b,…).');
  return ids;
}

const date = (s: number | null) => (s === null ? '-' : new Date(s * 1000).toISOString().replace('.000Z', 'Z'));

export function keyState(k: ApiKey, nowMs = Date.now()): string {
  if (k.revoked_at !== null) return 'revoked';
  return k.expires_at !== null && k.expires_at * 1000 <= nowMs ? 'expired' : 'active';
}

export const keyLine = (k: ApiKey): string =>
  `${k.id}  ${k.hint}…  ${keyState(k)}  owner=${k.owner}  label=${k.label ?? '-'}  ` +
  `models=${k.models?.join(',') ?? 'all'}  created=${date(k.created_at)}  last_used=${date(k.last_used_at)}  ` +
  `expires=${date(k.expires_at)}${k.revoked_at !== null ? `  revoked=${date(k.revoked_at)}` : ''}` +
  (keyLimitsText(k.limits) ? `  limits=${keyLimitsText(k.limits)}` : '');

const withToken = (cmd: Command) =>
  cmd.option('--operator-token <token>', 'the operator token (prefer env KILN_OPERATOR_TOKEN: flags show in ps)');

export function registerKeyCommands(admin: Command, make: Make, operatorApi: (ctx: Ctx, token?: string) => KilnCore) {
  const keys = admin
    .command('keys')
    .description('issue, list, change and revoke API keys (AUTH_MODE=keys; docs/keys.md)');
  /** Runs one call and prints the key: JSON with --json, else its line. */
  const run =
    <O extends { operatorToken?: string }>(call: (api: KilnCore, ctx: Ctx, o: O, id: string) => Promise<ApiKey>) =>
    async (...args: unknown[]) => {
      const cmd = args[args.length - 1] as Command;
      const o = args[args.length - 2] as O;
      const ctx = make(cmd);
      const k = await call(operatorApi(ctx, o.operatorToken), ctx, o, args[0] as string);
      ctx.out(k);
      ctx.say(keyLine(k));
    };
  const send = async (api: KilnCore, ctx: Ctx, method: string, path: string, body?: object) =>
    // No retries: a create repeated after a dropped connection could issue a second key.
    (await api.request<ApiKey>(method, path, { body, signal: ctx.abort.signal, maxRetries: 0 })).data;

  limitOptions(
    withToken(keys.command('create'))
      .description('issue a key; the key is printed once (only its hash is kept)')
      .requiredOption('--owner <owner>', 'who the key is for (1-64 letters, digits, ".", "_", "-")')
      .option('--label <label>', 'a note for operators')
      .option('--expires-at <time>', 'when it stops working: epoch seconds or ISO date', expiresAt)
      .option('--models <ids>', 'the only models it may use, comma-separated (default: all)', modelList),
    {},
    "the key's own limit (counted over this key alone) of",
  ).action(
    async (
      o: { operatorToken?: string; owner: string; label?: string; expiresAt?: number; models?: string[] },
      cmd: Command,
    ) => {
      const ctx = make(cmd);
      const limits = limitsFrom(o);
      const body = {
        owner: o.owner,
        label: o.label,
        expires_at: o.expiresAt,
        models: o.models,
        ...(Object.keys(limits).length ? { limits } : {}),
      };
      const k = await send(operatorApi(ctx, o.operatorToken), ctx, 'POST', PATH, body);
      ctx.out(k);
      ctx.say(k.key!);
      ctx.note(`(${keyLine(k)})\nShown once: only its hash is stored.`);
    },
  );

  withToken(keys.command('list'))
    .description('every key (or one owner’s), oldest first; revoked and expired ones included')
    .option('--owner <owner>', "only this owner's keys")
    .action(async (o: { operatorToken?: string; owner?: string }, cmd: Command) => {
      const ctx = make(cmd);
      const api = operatorApi(ctx, o.operatorToken);
      const all: ApiKey[] = [];
      for (let after: string | undefined; ;) {
        const query = { owner: o.owner, limit: 100, after };
        const page = (
          await api.request<{ data: ApiKey[]; has_more: boolean }>('GET', PATH, { query, signal: ctx.abort.signal })
        ).data;
        all.push(...page.data);
        if (!page.has_more || !page.data.length) break;
        after = page.data[page.data.length - 1].id;
      }
      ctx.out(all);
      for (const k of all) ctx.say(keyLine(k));
      if (!all.length) ctx.note('no keys');
    });

  withToken(keys.command('show'))
    .description('one key')
    .argument('<id>', 'the key id (key_…)')
    .action(run((api, ctx, _o, id) => send(api, ctx, 'GET', `${PATH}/${encodeURIComponent(id)}`)));

  limitOptions(
    withToken(keys.command('update'))
      .description('change a key; every API process applies it within a second')
      .argument('<id>', 'the key id (key_…)')
      .option('--label <label>', 'a new label')
      .option('--no-label', 'remove the label')
      .option('--expires-at <time>', 'a new expiry: epoch seconds or ISO date', expiresAt)
      .option('--no-expiry', 'never expire')
      .option('--models <ids>', 'the only models it may use from now on, comma-separated', modelList)
      .option('--all-models', 'lift the model restriction'),
    { none: true },
    "the key's own limit of",
  ).action(
    run(
      (
        api,
        ctx,
        o: {
          operatorToken?: string;
          label?: string | false;
          expiresAt?: number;
          expiry: boolean;
          models?: string[];
          allModels?: boolean;
        },
        id,
      ) => {
        if (o.expiresAt !== undefined && !o.expiry) throw new UsageError('Give --expires-at or --no-expiry, not both.');
        if (o.models && o.allModels) throw new UsageError('Give --models or --all-models, not both.');
        const limits = limitsFrom(o);
        const body = {
          ...(o.label !== undefined ? { label: o.label || null } : {}),
          ...(o.expiresAt !== undefined ? { expires_at: o.expiresAt } : !o.expiry ? { expires_at: null } : {}),
          ...(o.models ? { models: o.models } : o.allModels ? { models: null } : {}),
          ...(Object.keys(limits).length ? { limits } : {}),
        };
        if (!Object.keys(body).length)
          throw new UsageError(
            'Nothing to change: give --label, --expires-at, --no-expiry, --models, --all-models or a limit ' +
              '(--max-unfinished, --submits-per-minute, --daily-units, --monthly-units: N or none).',
          );
        return send(api, ctx, 'PATCH', `${PATH}/${encodeURIComponent(id)}`, body);
      },
    ),
  );

  withToken(keys.command('revoke'))
    .description('revoke a key: refused by every API process within a second (idempotent)')
    .argument('<id>', 'the key id (key_…)')
    .action(run((api, ctx, _o, id) => send(api, ctx, 'POST', `${PATH}/${encodeURIComponent(id)}/revoke`)));
}
