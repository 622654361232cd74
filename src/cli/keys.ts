// `npm run keys -- create|list|revoke` (keys mode): the bootstrap for the first keys, straight to
// Redis with the server's own settings (KILN_SECRET, REDIS_URL or REDIS_CLUSTER_NODES). The same
// store as the admin API (src/keys/store.ts), which `kiln admin keys` uses over HTTP.
// Usage: npm run keys -- create --owner NAME [--label LABEL] | list | revoke <KEY_ID_OR_KEY>
import { parseArgs } from 'node:util';
import { loadConfig } from '../config/env.js';
import { ConfigError } from '../config/models.js';
import { connectRedis } from '../infra/redis.js';
import { OWNER_NAME } from '../infra/callers.js';
import { KeyStore } from '../keys/store.js';

const USAGE = `usage: kiln keys create --owner NAME [--label LABEL]
       kiln keys list
       kiln keys revoke <KEY_ID_OR_KEY>
(expiry and model allow-lists: kiln admin keys, docs/keys.md)`;

const date = (s: number | null) => (s === null ? '-' : new Date(s * 1000).toISOString());

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    // --name: the option's name before keys had labels.
    options: {
      owner: { type: 'string' },
      label: { type: 'string' },
      name: { type: 'string' },
      json: { type: 'boolean' },
    },
  });
  const [cmd, arg] = positionals[0] === 'keys' ? positionals.slice(1) : positionals;
  const config = loadConfig();
  const redis = connectRedis(config);
  const keys = new KeyStore(redis, config.redisPrefix);
  try {
    if (cmd === 'create') {
      if (!values.owner || !OWNER_NAME.test(values.owner)) {
        console.error(`--owner NAME is required: 1-64 letters, digits, ".", "_" or "-"\n${USAGE}`);
        return 2;
      }
      const { key, record } = await keys.create(values.owner, { label: values.label ?? values.name ?? null });
      if (config.authMode !== 'keys')
        console.error('note: AUTH_MODE is not "keys"; the API ignores issued keys until it is.');
      console.log(
        values.json
          ? JSON.stringify({ key, ...record })
          : `${key}\n(id ${record.id}, owner ${record.owner}; shown once: only its hash is stored)`,
      );
      return 0;
    }
    if (cmd === 'list') {
      const all = [];
      for (let after: string | undefined; ;) {
        const page = (await keys.list({ after, limit: 100 }))!;
        all.push(...page.data);
        if (!page.has_more) break;
        after = page.data[page.data.length - 1].id;
      }
      if (values.json) console.log(JSON.stringify(all));
      else
        for (const k of all)
          console.log(
            `${k.id}  ${k.hint}…  owner=${k.owner}  label=${k.label ?? '-'}  created=${date(k.created_at)}` +
              `${k.revoked_at !== null ? `  revoked=${date(k.revoked_at)}` : ''}` +
              `${k.expires_at !== null ? `  expires=${date(k.expires_at)}` : ''}`,
          );
      return 0;
    }
    if (cmd === 'revoke' && arg) {
      const id = await keys.idOf(arg);
      const revoked = id && (await keys.revoke(id));
      console.log(revoked ? `revoked ${revoked.id}` : 'no such key');
      return revoked ? 0 : 1;
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
