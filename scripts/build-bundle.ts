// The last step of `npm run build:server`: the compiled API and worker (dist/server, from tsc) as
// minified bundles in dist/bundle/{api,worker}, which bin/kiln-run starts. Why: V8 keeps every
// loaded module's source text for the process's life (lazy compilation reads it again), so the
// comments and whitespace of a few hundred modules cost each process memory. Measured at idle
// (BENCHMARKS.md, memory): API −2.5 MiB a process, worker −3.6, for no more CPU per task. An
// unminified bundle costs more than the modules (+8.5 MiB: it holds modules the process never
// loads), so the bundle is minified and split, and what is loaded on demand (the OpenTelemetry
// SDK, each provider) stays in chunks of its own.
//
// Kept outside the bundles, loaded from node_modules as before:
//   - pino and its transports: `LOG_FORMAT=pretty` starts a worker thread from a file beside pino;
//   - @grpc/grpc-js: it loads .proto files beside itself (channelz, xDS);
//   - in the worker, every @temporalio package: the worker's own bundler (webpack) and its native
//     core load from their packages, and one copy of @temporalio/common and /proto must serve both;
//   - in the worker, jimp: its text plugin reads its fonts from files beside itself (bundled, the
//     local provider's every task failed, 'Failed to parse URL from …/dist/bundle/fonts/…');
//   - iconv-lite and mime-db: data, not code. Bundled, their tables (iconv-lite's code pages, which
//     a UTF-8 body never loads, and mime-db's JSON) were 1.1 MB of the API bundle's text, which V8
//     keeps; from node_modules the tables are read only when required, and a JSON file's text is
//     dropped once parsed. package.json's overrides install one copy of each (their dependents
//     asked for older ones with the same API), so the bundle's `require` finds the version that
//     every dependent is installed and tested with.
// Stack traces name minified functions; the linked source maps (*.js.map) give the original file,
// line and name with KILN_NODE_FLAGS=--enable-source-maps (docs/operating.md, "Memory").
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';
import { PROJECT_ROOT as ROOT } from '../src/infra/project-root.js';
import { leanTemporalProto } from './lean-temporal-proto.js';

const COMPILED = join(ROOT, 'dist', 'server', 'src');
const BUNDLE_DIR = join(ROOT, 'dist', 'bundle');

// CommonJS modules inside an ES module bundle still call require and read __dirname.
const BANNER = [
  "import { createRequire as __kilnRequire } from 'node:module';",
  "import { fileURLToPath as __kilnPath } from 'node:url';",
  "import { dirname as __kilnDir } from 'node:path';",
  'const require = __kilnRequire(import.meta.url);',
  'const __filename = __kilnPath(import.meta.url);',
  'const __dirname = __kilnDir(__filename);',
].join('\n');

async function bundle(role: 'api' | 'worker'): Promise<void> {
  const outdir = join(BUNDLE_DIR, role);
  rmSync(outdir, { recursive: true, force: true });
  await build({
    entryPoints: [join(COMPILED, role, 'main.js')],
    outdir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node24',
    minify: true,
    sourcemap: 'linked',
    banner: { js: BANNER },
    external: [
      'pino',
      'pino-pretty',
      'thread-stream',
      '@grpc/grpc-js',
      'iconv-lite',
      'mime-db',
      ...(role === 'worker' ? ['@temporalio/*', 'jimp', '@jimp/*'] : []),
    ],
    // The worker loads @temporalio/* from node_modules (above); the API's copy of the protos is
    // bundled, and can leave out what a client never uses.
    plugins: role === 'api' ? [leanTemporalProto()] : [],
    logLevel: 'warning',
  });
}

await Promise.all([bundle('api'), bundle('worker')]);
