// Starts a production entry point (src/api/main.ts, src/worker/main.ts) as a child process and collects
// its JSON log lines; resolves `ready` once a line with `readyText` as its message appears.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from '../../scripts/services.js';

export function spawnEntry(
  file: string,
  env: Record<string, string>,
  readyText: string,
  cleanups: (() => Promise<unknown>)[],
) {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, file)], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  cleanups.push(async () => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  const lines: { msg?: string; [k: string]: unknown }[] = [];
  let buf = '';
  child.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    const parts = buf.split('\n');
    buf = parts.pop()!;
    for (const l of parts) {
      try {
        lines.push(JSON.parse(l));
      } catch {
        /* not JSON */
      }
    }
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const ready = new Promise<void>((resolve, reject) => {
    const t = setInterval(() => {
      if (lines.some((l) => l.msg === readyText)) {
        clearInterval(t);
        resolve();
      }
    }, 50);
    child.once('exit', (code) => {
      clearInterval(t);
      reject(new Error(`${file} exited early (${code}): ${err}`));
    });
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, lines, ready, exited };
}

/** Whether a process is still running (signal 0 checks without signalling). */
export const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
