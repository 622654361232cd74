// `npm run dev`: Redis, the Temporal dev server (SQLite under .data/, Web UI on), the worker and the
// API with the local provider; prints where everything is. Ctrl-C stops it all.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, ROOT, startRedis, startTemporal } from './services.js';

// KILN_DEV_DATA: another data directory (bench/stack-memory.ts runs a fresh one).
const DATA = process.env.KILN_DEV_DATA || join(ROOT, '.data');
mkdirSync(DATA, { recursive: true });

function secret(name = 'secret', envVar = 'KILN_SECRET'): string {
  if (process.env[envVar]) return process.env[envVar]!;
  const file = join(DATA, name);
  if (!existsSync(file)) writeFileSync(file, randomBytes(32).toString('hex'), { mode: 0o600 });
  return readFileSync(file, 'utf8').trim();
}

async function portOr(preferred: number): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((res) => {
    const s = createServer();
    s.once('error', () => void freePort().then(res));
    s.listen(preferred, '127.0.0.1', () => s.close(() => res(preferred)));
  });
}

async function main() {
  const apiPort = Number(process.env.PORT ?? (await portOr(8787)));
  const baseUrl = process.env.PUBLIC_BASE_URL ?? `http://localhost:${apiPort}`;
  const uiPort = await portOr(8233);
  // The Web UI decrypts payloads through Kiln's codec endpoint; on this machine the operator is you.
  const operatorToken = secret('operator-token', 'KILN_OPERATOR_TOKEN');
  const [redis, temporal] = await Promise.all([
    startRedis({ dir: join(DATA, 'redis'), port: await portOr(6379) }),
    startTemporal({
      dbFile: join(DATA, 'temporal.sqlite'),
      port: await portOr(7233),
      uiPort,
      ui: true,
      codecEndpoint: `${baseUrl}/codec/t/${operatorToken}`,
    }),
  ]);
  const env = {
    ...process.env,
    KILN_SECRET: secret(),
    // Kiln and its Redis share this machine: the Unix socket costs each command less than loopback TCP.
    REDIS_URL: redis.socket ?? redis.url,
    TEMPORAL_ADDRESS: temporal.url,
    PORT: String(apiPort),
    // One API process on a laptop: a second costs ~80 MiB and serves nobody else (docs/operating.md).
    API_PROCESSES: process.env.API_PROCESSES ?? '1',
    PUBLIC_BASE_URL: baseUrl,
    BLOB_DIR: process.env.BLOB_DIR ?? join(DATA, 'blobs'),
    LOG_FORMAT: process.env.LOG_FORMAT ?? 'pretty',
    // Local data: the Web UI's workflow summaries may show the start of the prompt.
    SUMMARY_PROMPT_CHARS: process.env.SUMMARY_PROMPT_CHARS ?? '60',
    KILN_OPERATOR_TOKEN: operatorToken,
    // The console's full view links each task to its workflow in this Web UI.
    TEMPORAL_UI_URL: process.env.TEMPORAL_UI_URL ?? temporal.uiUrl,
    CODEC_CORS_ORIGINS: process.env.CODEC_CORS_ORIGINS ?? `http://localhost:${uiPort},http://127.0.0.1:${uiPort}`,
  };
  const children: ChildProcess[] = [];
  // Compiled by scripts/dev-start.sh and launched as production launches them (bin/kiln-run).
  const run = (mode: 'api' | 'worker') => {
    const c = spawn('sh', [join(ROOT, 'bin', 'kiln-run'), mode], { env, stdio: 'inherit' });
    children.push(c);
    c.once('exit', (code, signal) => {
      if (!stopping) {
        console.error(`the ${mode} exited (${code ?? signal}); stopping.`);
        void stop(1);
      }
    });
    return c;
  };
  let stopping = false;
  const stop = async (code = 0) => {
    if (stopping) return;
    stopping = true;
    for (const c of children) c.kill('SIGTERM');
    await Promise.all(children.map((c) => (c.exitCode === null ? new Promise((r) => c.once('exit', r)) : null)));
    await Promise.all([temporal.stop(), redis.stop()]);
    process.exit(code);
  };
  process.once('SIGINT', () => void stop());
  process.once('SIGTERM', () => void stop());

  run('worker');
  run('api');
  for (let i = 0; i < 200; i++) {
    if (
      await fetch(`http://127.0.0.1:${apiPort}/healthz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const example = {
    contents: [{ role: 'user', parts: [{ text: 'a lighthouse at dusk' }] }],
    generationConfig: { imageConfig: { aspectRatio: '16:9' } },
  };
  // AUTH_MODE=keys: only keys Kiln issued work; the first comes from the admin API (or CLI).
  const keysMode = process.env.AUTH_MODE === 'keys';
  const key = keysMode ? '$KILN_API_KEY' : 'my-dev-key';
  const curl = `curl -s -X POST '${baseUrl}/v1beta/models/kiln-image-1:generateContent?output=url' \\
  -H "Authorization: Bearer ${key}" -H 'Content-Type: application/json' \\
  -d '${JSON.stringify(example)}'`;
  const keys = keysMode
    ? `
  Keys mode: issue a key with a quota (the operator token is in .data/operator-token), then use it:
    export KILN_BASE_URL=${baseUrl} KILN_OPERATOR_TOKEN=$(cat .data/operator-token)
    export KILN_API_KEY=$(npm run -s kiln -- admin keys create --owner me --daily-units 5 --json | node -pe 'JSON.parse(require("fs").readFileSync(0)).key')
    npm run -s kiln -- usage          # or the console's Usage page; its Keys page takes the operator token
`
    : '';
  console.log(`
  Kiln is running.
    API            ${baseUrl}      (reference: ${baseUrl}/docs)
    Temporal UI    ${temporal.uiUrl}  (payloads decrypted through ${baseUrl}/codec)
    Temporal gRPC  ${temporal.url}    Redis ${redis.url}${redis.socket ? ` (Kiln: ${redis.socket})` : ''}

  Submit a task:
  ${curl}

  Then poll it:   curl -s ${baseUrl}/v1/tasks/<id> -H "Authorization: Bearer ${key}"
${keys}
  Ctrl-C stops everything (data stays in ${DATA === join(ROOT, '.data') ? '.data/' : DATA}).
`);
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
