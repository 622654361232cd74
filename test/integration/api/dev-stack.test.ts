// `npm run dev`'s stack as a new user starts it (scripts/dev-start.sh, after bootstrap): the console
// and the server built, the compiled API (one process) and worker launched through bin/kiln-run, a
// task served end to end, nothing left under tsx or npm, and Ctrl-C (SIGINT to the process group)
// stops every process. Its memory is measured by `npm run bench:memory -- --form dev`.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { freePort, ROOT } from '../../../scripts/services.js';
import { alive } from '../../support/spawn-entry.js';

const data = mkdtempSync(join(tmpdir(), 'kiln-dev-stack-'));
afterAll(() => rmSync(data, { recursive: true, force: true }));

/** The pids of a process and its descendants, with their command lines. */
function tree(root: number): { pid: number; cmd: string }[] {
  const out: { pid: number; cmd: string }[] = [];
  const todo = [root];
  while (todo.length) {
    const pid = todo.pop()!;
    try {
      out.push({ pid, cmd: readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ') });
      // Node spawns children from its main thread, whose task id is the pid.
      const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
      if (kids) todo.push(...kids.split(/\s+/).map(Number));
    } catch {
      /* exited */
    }
  }
  return out;
}

describe('npm run dev', () => {
  it('serves a task from the compiled stack with one API process, and Ctrl-C stops it all', async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const dev = spawn('sh', ['scripts/dev-start.sh'], {
      cwd: ROOT,
      env: { ...process.env, PORT: String(port), KILN_DEV_DATA: data },
      stdio: ['ignore', 'ignore', 'pipe'],
      detached: true,
    });
    let stderr = '';
    dev.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    try {
      await vi.waitFor(
        async () => {
          if (dev.exitCode !== null) throw new Error(`dev-start.sh exited ${dev.exitCode}: ${stderr.slice(-2000)}`);
          expect((await fetch(`${base}/readyz`)).status).toBe(200);
        },
        { timeout: 180_000, interval: 500 },
      );
      const res = await fetch(`${base}/v1beta/models/kiln-image-1:generateContent?output=url`, {
        method: 'POST',
        headers: { authorization: 'Bearer my-dev-key', 'content-type': 'application/json' },
        body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'a lighthouse at dusk' }] }] }),
      });
      expect(res.status).toBe(202);
      const { id } = (await res.json()) as { id: string };
      await vi.waitFor(
        async () => {
          const t = (await (
            await fetch(`${base}/v1/tasks/${id}`, { headers: { authorization: 'Bearer my-dev-key' } })
          ).json()) as { status: string };
          expect(t.status).toBe('succeeded');
        },
        { timeout: 30_000, interval: 500 },
      );

      const procs = tree(dev.pid!);
      // exec: the shell became node running the compiled dev.js; no npm or tsx stays resident.
      expect(procs[0].cmd).toMatch(/dist\/server\/scripts\/dev\.js/);
      expect(procs.filter((p) => /tsx|npm/.test(p.cmd))).toEqual([]);
      expect(procs.filter((p) => /dist\/bundle\/api\/main\.js/.test(p.cmd))).toHaveLength(1);
      expect(procs.filter((p) => /dist\/bundle\/worker\/main\.js/.test(p.cmd))).toHaveLength(1);

      process.kill(-dev.pid!, 'SIGINT');
      await vi.waitFor(() => expect(procs.filter((p) => alive(p.pid))).toEqual([]), {
        timeout: 30_000,
        interval: 250,
      });
    } finally {
      try {
        process.kill(-dev.pid!, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
  }, 240_000);
});
