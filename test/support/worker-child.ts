// A Kiln worker in a child process (test/support/worker-process.ts), so a test can SIGKILL it mid-task.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { inject } from 'vitest';
import { ROOT } from '../../scripts/services.js';

/** Starts one with `env` (a Kiln's); resolves once it polls. `track` gets the child for cleanup. */
export function workerChild(env: Record<string, string>, track: (child: ChildProcess) => void): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'test/support/worker-process.ts')], {
    env: { ...process.env, ...env, KILN_WORKFLOW_BUNDLE: inject('workflowBundle') },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  track(child);
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      if (d.toString().includes('worker-ready')) resolve(child);
    });
    child.once('exit', (code) => reject(new Error(`worker process exited early (${code})`)));
  });
}

/** SIGKILLs `child` and resolves once it is gone. */
export async function killChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await gone;
}
