// `npm run build:client`: the client SDK as the package @kiln/client, and the `kiln` CLI, as
// plain JavaScript in dist/.
//
//   dist/client-package/   index.js (ESM) + index.cjs (CommonJS), bundled for the browser platform
//                          (fetch only: a Node built-in on the import path fails the build), types/
//                          (declarations from tsc -p tsconfig.client.json), package.json, README.md.
//                          `npm pack dist/client-package` makes the tarball; it has no dependencies.
//   dist/cli/              the CLI bundled for Node (npm packages stay external; `kiln keys`, server
//                          administration, still runs src/cli/keys.ts through tsx): bin/kiln.js runs
//                          it when it is newer than src/, else src/cli/main.ts through tsx.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const PKG_DIR = join(ROOT, 'dist', 'client-package');
const CLI_DIR = join(ROOT, 'dist', 'cli');
const NODE_BUILTINS = new Set(
  (await import('node:module')).builtinModules.flatMap((m) => [m, `node:${m}`, m.split('/')[0]]),
);

/** Fails the browser bundle on any Node built-in, naming the importer. */
const noNodeBuiltins: Plugin = {
  name: 'no-node-builtins',
  setup(b) {
    b.onResolve({ filter: /.*/ }, (args) =>
      NODE_BUILTINS.has(args.path) || args.path.startsWith('node:')
        ? {
            errors: [
              { text: `Node built-in "${args.path}" imported by ${args.importer}: the client must run in browsers` },
            ],
          }
        : undefined,
    );
  },
};

const keysFromSource: Plugin = {
  name: 'keys-from-source',
  setup(b) {
    b.onResolve({ filter: /^\.\/keys\.js$/ }, () => ({ path: 'keys', namespace: 'keys-from-source' }));
    b.onLoad({ filter: /.*/, namespace: 'keys-from-source' }, () => ({
      contents: `import { register } from 'tsx/esm/api';
register();
await import(new URL('../../src/cli/keys.ts', import.meta.url).href);`,
      loader: 'js',
      resolveDir: ROOT,
    }));
  },
};

export async function buildClientPackage(): Promise<void> {
  rmSync(PKG_DIR, { recursive: true, force: true });
  const common = {
    entryPoints: [join(ROOT, 'src/client/index.ts')],
    bundle: true,
    platform: 'browser' as const,
    target: 'es2022',
    logLevel: 'warning' as const,
    plugins: [noNodeBuiltins],
    legalComments: 'none' as const,
  };
  await build({ ...common, format: 'esm', outfile: join(PKG_DIR, 'index.js') });
  await build({ ...common, format: 'cjs', outfile: join(PKG_DIR, 'index.cjs') });
  execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.client.json'], {
    cwd: ROOT,
    stdio: 'inherit',
  });
  const root = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string; engines?: object };
  const types = './types/client/index.d.ts';
  const manifest = {
    name: '@kiln/client',
    version: root.version,
    description: 'Typed client for the Kiln API (images, chat, video): browsers and Node 20+, fetch only',
    type: 'module',
    main: './index.cjs',
    module: './index.js',
    types,
    exports: {
      '.': { types, import: './index.js', require: './index.cjs' },
      './package.json': './package.json',
    },
    files: ['index.js', 'index.cjs', 'types', 'README.md'],
    sideEffects: false,
    engines: { node: '>=20' },
  };
  writeFileSync(join(PKG_DIR, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  copyFileSync(join(ROOT, 'src/client/README.md'), join(PKG_DIR, 'README.md'));
}

export async function buildCli(): Promise<void> {
  rmSync(CLI_DIR, { recursive: true, force: true });
  mkdirSync(CLI_DIR, { recursive: true });
  await build({
    entryPoints: [join(ROOT, 'src/cli/main.ts')],
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'esm',
    // `kiln keys` is server administration (Redis, KILN_SECRET, the server's modules): it stays
    // source, run through tsx from this checkout, so the built CLI holds only the CLI and the client.
    splitting: true,
    packages: 'external',
    plugins: [keysFromSource],
    outdir: CLI_DIR,
    logLevel: 'warning',
  });
}

const started = Date.now();
await buildClientPackage();
await buildCli();
console.log(`built dist/client-package (@kiln/client) and dist/cli in ${Date.now() - started} ms`);
