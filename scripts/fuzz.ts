// `npm run fuzz`: schemathesis (PyPI, 4.x; scripts/bootstrap.sh installs it) against /openapi.json
// of a whole Kiln started here (own Redis, Temporal dev server, worker, API; local providers).
// Checks: no 5xx, responses match their documented schema (so every error is {error:{code,message}}),
// only documented status codes, content types and headers; stateful runs follow the document's links
// (submit -> poll, batch poll, content) and check that created tasks can be read. Bounded by FUZZ_SECONDS (default
// 180);
// exits non-zero when schemathesis reports a failure. FUZZ_EXAMPLES (default 40) caps the
// examples per operation and phase, FUZZ_SEED makes a run repeatable, FUZZ_ARGS adds options.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_MODELS } from '../src/config/default-models.js';
import { ROOT } from './services.js';
import { startStack } from './stack.js';

const SECONDS = Number(process.env.FUZZ_SECONDS ?? 180);
const EXAMPLES = Number(process.env.FUZZ_EXAMPLES ?? 40);
// Left out: ignored_auth (passthrough mode accepts any well-formed key by design) and
// positive_data_acceptance (some rules span fields or locations, e.g. output=url in the query or
// the body, which a schema cannot state; the descriptions say them).
const CHECKS = [
  'not_a_server_error',
  'response_schema_conformance',
  'status_code_conformance',
  'content_type_conformance',
  'response_headers_conformance',
  'use_after_free',
  'ensure_resource_availability',
];
const SCHEMATHESIS = process.env.SCHEMATHESIS_BIN ?? join(ROOT, '.tools', 'bin', 'schemathesis');

async function main() {
  if (!existsSync(SCHEMATHESIS))
    throw new Error(`${SCHEMATHESIS} is missing; run npm run bootstrap (it installs schemathesis from PyPI)`);
  // The built-in models, cheaper: the fuzzer submits many tasks and the local video model runs ffmpeg.
  const models = DEFAULT_MODELS.map((m) =>
    m.kind === 'video'
      ? { ...m, latencyMs: 100, localFps: 2, localMaxSide: 64 }
      : m.kind === 'image'
        ? { ...m, latencyMs: 50 }
        : m,
  );
  // One token is both the API key and the operator token, so the codec endpoints are fuzzed too.
  const token = randomBytes(24).toString('hex');
  const stack = await startStack({
    name: 'fuzz',
    models,
    env: {
      RATE_LIMIT_TASK_MS: '0',
      RATE_LIMIT_BATCH_MS: '0',
      KILN_OPERATOR_TOKEN: token,
      LOG_LEVEL: 'error',
      ...pick(process.env, /^KILN_FUZZ_ENV_/),
    },
  });
  const reportDir = join(stack.dir, 'report');
  const configFile = join(stack.dir, 'schemathesis.toml');
  writeFileSync(configFile, schemathesisConfig(token));
  const common = [
    '--header',
    `Authorization: Bearer ${token}`,
    '--checks',
    CHECKS.join(','),
    '--max-examples',
    String(EXAMPLES),
    // One worker: with several, Hypothesis's shared caches race (a KeyError reported as a flaky error).
    '--workers',
    process.env.FUZZ_WORKERS ?? '1',
    // Above the longest wait (long-poll) a request may ask for: 60 s.
    '--request-timeout',
    '70',
    '--suppress-health-check',
    'too_slow,filter_too_much',
    '--generation-database',
    'none',
    '--report',
    'junit',
    '--report-dir',
    reportDir,
    '--no-color',
    ...(process.env.FUZZ_SEED ? ['--seed', process.env.FUZZ_SEED] : []),
  ];
  const extra = process.env.FUZZ_ARGS ? process.env.FUZZ_ARGS.split(' ').filter(Boolean) : [];
  const run = (seconds: number, args: string[]) =>
    new Promise<number>((res) => {
      const all = [
        '--config-file',
        configFile,
        'run',
        `${stack.base}/openapi.json`,
        '--max-time',
        String(seconds),
        ...common,
        ...args,
        ...extra,
      ];
      console.log(
        `[fuzz] schemathesis run <kiln>/openapi.json ` +
          `--max-time ${seconds} --checks ${CHECKS.join(',')} --max-examples ${EXAMPLES} ${args.join(' ')}`,
      );
      // Its working directory is the run's own, where it keeps its cache (not the checkout).
      const child = spawn(SCHEMATHESIS, all, {
        cwd: stack.dir,
        stdio: 'inherit',
        env: { ...process.env, PYTHONUNBUFFERED: '1' },
      });
      child.once('error', (err) => {
        console.error(`[fuzz] cannot run schemathesis: ${err.message}`);
        res(2);
      });
      child.once('exit', (c, signal) => res(c ?? (signal ? 1 : 0)));
    });
  console.log(`[fuzz] Kiln at ${stack.base}`);
  const started = Date.now();
  // 1. The whole API, every phase. 2. The image task chain alone, stateful: in the whole-API run the
  // links from submit (which passes only with several values right) are seldom reached in time.
  const chainSeconds = Math.max(10, Math.round(SECONDS / 4));
  const codes = [
    await run(SECONDS - chainSeconds, []),
    await run(chainSeconds, [
      '--phases',
      'stateful',
      ...['submitImageTask', 'getTask', 'getTaskContent', 'batchGetTasks', 'cancelTask'].flatMap((id) => [
        '--include-operation-id',
        id,
      ]),
    ]),
  ];
  const code = codes.find((c) => c !== 0) ?? 0;
  // What the API logged as unhandled: the server-side cause of any 500.
  const unhandled = readFileSync(stack.logFile('api'), 'utf8')
    .split('\n')
    .filter((l) => l.includes('"level":50'));
  if (unhandled.length) {
    console.log(`[fuzz] the API logged ${unhandled.length} error(s); first ones:`);
    for (const l of unhandled.slice(0, 5)) console.log(`  ${l.slice(0, 2000)}`);
  }
  const failed = code !== 0 || unhandled.length > 0;
  console.log(
    `[fuzz] schemathesis exited ${codes.join(', ')} after ${Math.round((Date.now() - started) / 1000)} s` +
      (failed ? `; JUnit reports and process logs kept in ${stack.dir}` : ''),
  );
  // A passing run leaves nothing behind; a failing one keeps its reports and logs.
  await stack.stop({ keepDir: failed });
  process.exit(failed ? code || 1 : 0);
}

/**
 * Real model ids most of the time (else nearly every submit would stop at model_not_found and the
 * request checks behind it would go untested), the fuzzer's own strings the rest; the codec's path
 * token is the real one (a wrong token is a plain 401).
 */
function schemathesisConfig(token: string): string {
  const ids = (kind: string) => JSON.stringify(DEFAULT_MODELS.filter((m) => m.kind === kind).map((m) => m.id));
  const op = (id: string, params: Record<string, string>) =>
    `[[operations]]\ninclude-operation-id = "${id}"\nparameters = { ${Object.entries(params)
      .map(([k, v]) => `"${k}" = ${v}`)
      .join(', ')} }\n`;
  const dict = (name: string) => `{ dictionary = "${name}", probability = 0.8 }`;
  return [
    `[dictionaries.image]\nvalues = ${ids('image')}\n[dictionaries.chat]\nvalues ` +
      `= ${ids('chat')}\n[dictionaries.video]\nvalues = ${ids('video')}\n[dictionaries.output]\nvalues = ["url"]\n` +
      '[dictionaries.aspect]\nvalues = ["99:1", "1:99", "16:9"]\n[dictionaries.size]\nvalues = ' +
      '["1K"]\n[dictionaries.prompt]\nvalues = ["a red fox in the snow", "a lighthouse at dusk"]\n',
    // A submission passes only with output=url (query and body agreeing), a prompt, a W:H ratio and a
    // known size: without these values nearly none would start a task, and the stateful phase
    // (submit -> poll -> content -> file) would have nothing to follow. Small pictures keep it cheap.
    op('submitImageTask', {
      'path.model': dict('image'),
      'query.output': dict('output'),
      'body.output': dict('output'),
      'body.generationConfig.imageConfig.output': dict('output'),
      'body.generationConfig.imageConfig.aspectRatio': dict('aspect'),
      'body.generationConfig.imageConfig.imageSize': dict('size'),
      'body.contents[*].parts[*].text': dict('prompt'),
    }),
    op('createChatCompletion', { 'body.model': dict('chat') }),
    // Gemini batches: a real image model, else every create stops at 404.
    ...['createGeminiBatch', 'createGeminiBatchV1'].map((id) => op(id, { 'path.model': dict('image') })),
    op('createVideo', { 'body.model': dict('video') }),
    // The OpenAI Images operations start image tasks too: real image model ids most of the time.
    ...['createImage', 'createImageEdit'].map((id) => op(id, { 'body.model': dict('image') })),
    // The Gemini video operations: a video model and a prompt, else nearly every call stops at 404.
    ...['predictLongRunningVideo', 'predictLongRunningVideoV1'].map((id) =>
      op(id, { 'path.model': dict('video'), 'body.instances[*].prompt': dict('prompt') }),
    ),
    ...['getVideoOperation', 'getVideoOperationV1'].map((id) => op(id, { 'path.model': dict('video') })),
    ...['codecDecodePathToken', 'codecEncodePathToken'].map((id) => op(id, { 'path.token': JSON.stringify(token) })),
  ].join('\n');
}

/** Variables named PREFIX_X, renamed X: extra service settings for a run (KILN_FUZZ_ENV_LOG_LEVEL=debug). */
function pick(env: NodeJS.ProcessEnv, prefix: RegExp): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env)
      .filter(([k, v]) => prefix.test(k) && v !== undefined)
      .map(([k, v]) => [k.replace(prefix, ''), v!]),
  );
}

main().catch((err) => {
  console.error(`[fuzz] ${err instanceof Error ? err.message : err}`);
  process.exit(1);
});
