// `kiln`: the command line on top of the client (bin/kiln.js runs this file through tsx).
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { Ctx, EXIT, EXIT_HELP, ExitCode, reportError, seconds, waitSeconds, type GlobalOptions } from './context.js';
import { registerAdminCommands } from './admin-commands.js';
import { registerFeatureCommands } from './features-commands.js';
import { registerMediaCommands } from './media-commands.js';
import { registerTaskCommands } from './tasks-commands.js';
import { registerUsageCommands } from './usage-commands.js';

const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

let ctx: Ctx | null = null;
const make = (cmd: Command): Ctx => (ctx = new Ctx(cmd.optsWithGlobals<GlobalOptions>()));

export function buildProgram(): Command {
  const program = new Command('kiln')
    .description(
      'Image, chat and video generation through a Kiln gateway. Waits long-poll where the server offers it, ' +
        "else follow the service's polling guidance.",
    )
    .version(version)
    .option('--base-url <url>', 'Kiln base URL (env KILN_BASE_URL; default http://localhost:8787)')
    .option('--api-key <key>', 'API key (env KILN_API_KEY; prefer the environment: flags show in ps)')
    .option('--json', 'machine-readable JSON on stdout (errors too: {"error": {...}})')
    .option('-q, --quiet', 'no progress display on stderr')
    .option(
      '--first-check <s>',
      'seconds from submit to the first check (env KILN_POLL_FIRST_CHECK; default 50)',
      seconds('--first-check'),
    )
    .option(
      '--interval <s>',
      'seconds between checks; a longer Retry-After wins (env KILN_POLL_INTERVAL; default 10)',
      seconds('--interval'),
    )
    .option(
      '--timeout <s>',
      'seconds to wait in total before giving up (env KILN_POLL_TIMEOUT; default 1200)',
      seconds('--timeout'),
    )
    .option(
      '--long-poll <s>',
      'seconds each check asks the server to hold it until the task changes (Prefer: wait); a server ' +
        'that does not honour it is polled on the schedule; 0 turns it off (env KILN_POLL_WAIT; default 30)',
      waitSeconds('--long-poll'),
    )
    .addHelpText('after', `\n${EXIT_HELP}`)
    .showHelpAfterError('(run kiln --help for usage)')
    .exitOverride();

  registerTaskCommands(program, make);
  registerMediaCommands(program, make);
  registerFeatureCommands(program, make);
  registerUsageCommands(program, make);
  registerAdminCommands(program, make);

  // The admin commands talk to Redis, not the API: src/cli/keys.ts reads process.argv itself and
  // exits when done.
  program
    .command('keys')
    .description(
      'admin bootstrap (AUTH_MODE=keys; needs KILN_SECRET and REDIS_URL): keys create ' +
        '--owner NAME [--label LABEL] | keys list | keys revoke <KEY_ID_OR_KEY>; over HTTP: kiln admin keys',
    )
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .argument('[args...]')
    .action(async () => {
      await import('./keys.js');
      await new Promise(() => undefined);
    });

  for (const c of [program, ...program.commands, ...program.commands.flatMap((c) => c.commands)]) c.exitOverride();
  return program;
}

async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  process.on('SIGINT', () => {
    if (!ctx || ctx.abort.signal.aborted) process.exit(EXIT.interrupted);
    ctx.abort.abort();
  });
  try {
    await program.parseAsync(argv, { from: 'user' });
    return EXIT.ok;
  } catch (err) {
    if (err instanceof ExitCode) return err.code;
    if (err instanceof CommanderError) {
      // Help and version end with 0; commander already printed its own message for the rest.
      return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    if (ctx?.abort.signal.aborted) {
      const id = ctx.waiting;
      process.stderr.write(`\ninterrupted${id ? `; ${id} goes on server-side: kiln tasks wait ${id}` : ''}\n`);
      return EXIT.interrupted;
    }
    return reportError(err, ctx, ctx?.opts.baseUrl ?? process.env.KILN_BASE_URL ?? 'http://localhost:8787');
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`error: ${(err as Error).message}\n`);
    process.exit(EXIT.error);
  },
);
