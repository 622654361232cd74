// The workflow bundle, built in a child process: a process that bundles keeps webpack and its
// loaders in memory for its whole life, so the worker leaves that to a child that exits (the figure:
// BENCHMARKS.md, "Findings that still hold"). Run as a script, this file is that child: it
// bundles `workflows/index.ts` (plus the interceptor modules in KILN_BUNDLE_INTERCEPTORS, JSON)
// and writes the code to the file named by its argument.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PROJECT_ROOT } from '../infra/project-root.js';

// The TypeScript sources, also when this module runs compiled: the bundler compiles them itself.
export const WORKFLOWS_PATH = join(PROJECT_ROOT, 'workflows', 'index.ts');
const SELF = fileURLToPath(import.meta.url);

/** Bundles the workflows in a child Node process; returns the bundle's code. */
export async function bundleInChild(interceptorModules: string[] = []): Promise<{ code: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-bundle-'));
  const out = join(dir, 'workflows.js');
  try {
    // The parent's loader flags (tsx), not its inspector: the child must not take its debug port.
    const flags = process.execArgv.filter((a) => !a.startsWith('--inspect'));
    const child = spawn(process.execPath, [...flags, SELF, out], {
      env: { ...process.env, KILN_BUNDLE_INTERCEPTORS: JSON.stringify(interceptorModules) },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', resolve);
    });
    if (code !== 0) throw new Error(`bundling the workflows failed (exit ${code})`);
    return { code: readFileSync(out, 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === SELF && process.argv[2]) {
  const { bundleWorkflowCode } = await import('@temporalio/worker');
  const { code } = await bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    workflowInterceptorModules: JSON.parse(process.env.KILN_BUNDLE_INTERCEPTORS || '[]') as string[],
    logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: console.error },
  });
  writeFileSync(process.argv[2], code);
}
