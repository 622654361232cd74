// `kiln admin …`: operator commands over HTTP with the operator token (env KILN_OPERATOR_TOKEN, as
// the API reads it, or --operator-token), not the API key. `rebuild-read-model` starts or resumes
// the read-model rebuild and follows it to the end, resuming it again should the process running it
// stop (its lock lapses). `keys` manages API keys (src/cli/admin-keys.ts); `usage`, `limits` and
// `tasks release` are in src/cli/admin-usage.ts.
import type { Command } from 'commander';
import { KilnCore } from '../client/core.js';
import { registerKeyCommands } from './admin-keys.js';
import { registerUsageAdminCommands } from './admin-usage.js';
import { integer, seconds, UsageError, type Ctx } from './context.js';

type Make = (cmd: Command) => Ctx;

const PATH = '/admin/v1/read-model/rebuild';

interface Progress {
  state: 'none' | 'running' | 'done';
  active: boolean;
  phase?: string;
  pages?: number;
  workflows?: number;
  written?: number;
  unchanged?: number;
  unfinished?: number;
  webhooks?: number;
  errors?: number;
  last_error?: string | null;
  runs?: number;
  rate_per_second?: number | null;
}

const line = (p: Progress) =>
  `${p.state}${p.phase ? ` (${p.phase})` : ''}: ${p.workflows ?? 0} workflows, ${p.written ?? 0} written ` +
  `(${p.unfinished ?? 0} running), ${p.unchanged ?? 0} unchanged, ${p.webhooks ?? 0} webhook states, ` +
  `${p.errors ?? 0} errors${p.rate_per_second ? `, ${p.rate_per_second}/s` : ''}`;

/** The client of the admin calls: the operator token, never the API key. */
function operatorApi(ctx: Ctx, given?: string): KilnCore {
  const token = given ?? process.env.KILN_OPERATOR_TOKEN;
  if (!token) throw new UsageError('No operator token: set KILN_OPERATOR_TOKEN (or pass --operator-token).');
  return new KilnCore({ baseURL: ctx.opts.baseUrl, apiKey: token });
}

export function registerAdminCommands(program: Command, make: Make): void {
  const admin = program
    .command('admin')
    .description('operator commands (need the operator token: env KILN_OPERATOR_TOKEN or --operator-token)');
  admin
    .command('rebuild-read-model')
    .description(
      'rebuild the Redis read model from Temporal after Redis lost its data; resumes an interrupted rebuild ' +
        'and waits for it to finish (docs/operating.md, "Rebuilding the read model")',
    )
    .option('--operator-token <token>', 'the operator token (prefer env KILN_OPERATOR_TOKEN: flags show in ps)')
    .option('--page-size <n>', 'workflows per visibility page (default 100)', integer('--page-size'))
    .option('--restart', 'start over even when the last rebuild did not finish')
    .option('--no-wait', 'start it and print its progress, without waiting for the end')
    .option('--every <s>', 'seconds between progress checks (default 2)', seconds('--every'))
    .action(
      async (
        o: { operatorToken?: string; pageSize?: number; restart?: boolean; wait: boolean; every?: number },
        cmd,
      ) => {
        const ctx = make(cmd);
        const api = operatorApi(ctx, o.operatorToken);
        const signal = ctx.abort.signal;
        const body = {
          ...(o.pageSize !== undefined ? { page_size: o.pageSize } : {}),
          ...(o.restart ? { restart: true } : {}),
        };
        const start = async (b: object) => (await api.request<Progress>('POST', PATH, { body: b, signal })).data;
        let p = await start(body);
        ctx.note(line(p));
        while (o.wait && p.state === 'running') {
          await api.clock.sleep((o.every ?? 2) * 1000, signal);
          p = (await api.request<Progress>('GET', PATH, { signal })).data;
          // The process running it stopped and its lock lapsed: take it up again (from its place).
          if (p.state === 'running' && !p.active) p = await start({});
          ctx.note(line(p));
        }
        ctx.out(p);
        ctx.say(line(p));
      },
    );
  registerKeyCommands(admin, make, operatorApi);
  registerUsageAdminCommands(admin, make, operatorApi);
}
