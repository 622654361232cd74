#!/usr/bin/env node
// `kiln` CLI. Runs the built CLI (dist/cli/main.js, from `npm run build:client`) when it is there and
// no source it was built from (src/cli, src/client, src/shared) is newer (a stale build would run old
// code); otherwise registers tsx's loader and runs src/cli/main.ts, as a checkout without a build did.
import { existsSync, readdirSync, statSync } from 'node:fs';

const built = new URL('../dist/cli/main.js', import.meta.url);
const src = new URL('../src/', import.meta.url);

function newestMtime(dir) {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = new URL(e.name + (e.isDirectory() ? '/' : ''), dir);
    newest = Math.max(newest, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}

const useBuilt =
  process.env.KILN_CLI_FROM_SOURCE !== '1' &&
  existsSync(built) &&
  (!existsSync(src) ||
    statSync(built).mtimeMs >= Math.max(...['cli/', 'client/', 'shared/'].map((d) => newestMtime(new URL(d, src)))));

if (useBuilt) {
  await import(built.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli/main.ts');
}
