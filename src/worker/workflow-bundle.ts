// The workflow bundle, built in a child process: a process that bundles keeps webpack and its
// loaders in memory for its whole life, so the worker leaves that to a child that exits (the figure:
// BENCHMARKS.md, "Findings that still hold"). Run as a script, this file is that child: it
// bundles `workflows/index.ts` (plus the interceptor modules in KILN_BUNDLE_INTERCEPTORS, JSON)
// and writes the code to the file named by its argument. The worker reads the file (Worker.create,
// `codePath`) and keeps one copy of its text for good, so the file is made small (leanBundle).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PROJECT_ROOT } from '../infra/project-root.js';

// The TypeScript sources, also when this module runs compiled: the bundler compiles them itself.
export const WORKFLOWS_PATH = join(PROJECT_ROOT, 'workflows', 'index.ts');
const SELF = fileURLToPath(import.meta.url);
// The child runs this module's own file. In the worker's minified bundle (dist/bundle/worker,
// scripts/build-bundle.ts) import.meta.url is a chunk's, so the child runs the compiled module
// that the same `npm run build:server` wrote.
const CHILD = /workflow-bundle\.[jt]s$/.test(SELF)
  ? SELF
  : join(PROJECT_ROOT, 'dist', 'server', 'src', 'worker', 'workflow-bundle.js');

/** A bundle file and how to remove it once the worker has read it. */
export interface BundleFile {
  codePath: string;
  remove(): void;
}

/** Bundles the workflows in a child Node process, into a file of a temporary directory. */
export async function bundleInChild(interceptorModules: string[] = []): Promise<BundleFile> {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-bundle-'));
  const remove = () => rmSync(dir, { recursive: true, force: true });
  const codePath = join(dir, 'workflows.js');
  try {
    // The parent's loader flags (tsx), not its inspector: the child must not take its debug port.
    const flags = process.execArgv.filter((a) => !a.startsWith('--inspect'));
    const child = spawn(process.execPath, [...flags, CHILD, codePath], {
      env: { ...process.env, KILN_BUNDLE_INTERCEPTORS: JSON.stringify(interceptorModules) },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', resolve);
    });
    if (code !== 0) throw new Error(`bundling the workflows failed (exit ${code})`);
    return { codePath, remove };
  } catch (err) {
    remove();
    throw err;
  }
}

/**
 * The bundle with what the worker does not need taken out, for its memory (BENCHMARKS.md, memory:
 * −5 MiB): the inline source map's `sourcesContent` (the original sources, 0.6 MB: stack traces
 * still name file, line and column, and only the enhanced stack trace query loses the source
 * text), and every character past Latin-1, written as a \u escape: a handful of arrows in
 * comments made V8 keep the whole text at two bytes per character. In a comment, a string, a
 * template's value or what a regular expression matches, the escape means the same character;
 * only a regular expression's `source` and a raw template string would show it escaped (none
 * does in the workflows), and the columns after it on its line move, in stack traces.
 */
export function leanBundle(code: string): string {
  const at = code.lastIndexOf('//# sourceMappingURL=data:application/json');
  const tag = at < 0 ? -1 : code.indexOf('base64,', at);
  if (tag < 0) throw new Error('the workflow bundle has no inline source map');
  const base64 = tag + 'base64,'.length;
  const map = JSON.parse(Buffer.from(code.slice(base64).trimEnd(), 'base64').toString()) as Record<string, unknown>;
  delete map.sourcesContent;
  const body = code
    .slice(0, base64)
    .replace(/[\u0100-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return `${body}${Buffer.from(JSON.stringify(map)).toString('base64')}\n`;
}

if (process.argv[1] === SELF && process.argv[2]) {
  const { bundleWorkflowCode } = await import('@temporalio/worker');
  const { code } = await bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    workflowInterceptorModules: JSON.parse(process.env.KILN_BUNDLE_INTERCEPTORS || '[]') as string[],
    logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: console.error },
  });
  writeFileSync(process.argv[2], leanBundle(code));
}
