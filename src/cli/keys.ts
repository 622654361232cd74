// `kiln keys create|list|revoke` (keys mode): issues API keys and stores only their SHA-256.
// Usage: npm run keys -- create --owner NAME [--name LABEL] | list | revoke <KEY_OR_ID>
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../config.js';
import { connectRedis } from '../runtime.js';
import { KeyStore } from '../infra/auth.js';

const USAGE = `usage: kiln keys create --owner NAME [--name LABEL]
       kiln keys list
       kiln keys revoke <KEY_OR_ID>`;

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { owner: { type: 'string' }, name: { type: 'string' }, json: { type: 'boolean' } },
  });
  const [cmd, arg] = positionals[0] === 'keys' ? positionals.slice(1) : positionals;
  const config = loadConfig();
  const redis = connectRedis(config);
  const keys = new KeyStore(redis, config.redisPrefix);
  try {
    if (cmd === 'create') {
      if (!values.owner) {
        console.error(`--owner is required\n${USAGE}`);
        return 2;
      }
      const { key, record } = await keys.create(values.owner, values.name);
      if (config.authMode !== 'keys')
        console.error('note: AUTH_MODE is not "keys"; the API ignores issued keys until it is.');
      console.log(
        values.json
          ? JSON.stringify({ key, ...record })
          : `${key}\n(owner ${record.owner}; shown once: only its hash is stored)`,
      );
      return 0;
    }
    if (cmd === 'list') {
      const all = await keys.list();
      if (values.json) console.log(JSON.stringify(all));
      else
        for (const k of all)
          console.log(
            `${k.id.slice(0, 16)}  ${k.hint}…  owner=${k.owner}  name=${k.name}  ` +
              `created=${new Date(k.created_at * 1000).toISOString()}`,
          );
      return 0;
    }
    if (cmd === 'revoke' && arg) {
      const ok = await keys.revoke(arg);
      console.log(ok ? 'revoked' : 'no such key');
      return ok ? 0 : 1;
    }
    console.error(USAGE);
    return 2;
  } finally {
    redis.disconnect();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    console.error(err instanceof ConfigError ? err.message : `error: ${(err as Error).message}`);
    process.exit(1);
  },
);
