// The API writes its log lines in batches (LOG_BUFFER_BYTES, src/ops/log.ts). What that must not cost:
// lines lost on a normal exit, lines cut or interleaved when several API processes share one
// stdout pipe, or a quiet process's lines held back indefinitely.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../../scripts/services.js';

const WRITER = join(ROOT, 'test/support/log-writer.ts');
const node = `"${process.execPath}" --import tsx "${WRITER}"`;

/** Runs `sh -c script` with stdout a pipe; resolves with what came through it once it exits. */
function run(script: string, env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('sh', ['-c', script], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.on('error', reject);
    child.on('close', () => resolve(out));
  });
}

describe('buffered log lines', () => {
  it('two processes on one pipe: every line whole, none lost at exit', async () => {
    const lines = 4000;
    const out = await run(`WRITER=a ${node} & WRITER=b ${node} & wait`, { LINES: String(lines) });
    const parsed = out
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { writer: string; i: number });
    for (const w of ['a', 'b']) {
      const seen = parsed.filter((p) => p.writer === w).map((p) => p.i);
      expect(seen).toHaveLength(lines);
      expect(seen).toEqual([...seen].sort((x, y) => x - y));
    }
  });

  it("writes a quiet process's line without waiting for the buffer to fill", async () => {
    // The writer logs one line (far under 2 KB) and stays up 20 s; the line must arrive before it
    // ends, which only the periodic flush can do.
    const child = spawn(process.execPath, ['--import', 'tsx', WRITER], {
      cwd: ROOT,
      env: { ...process.env, LINES: '1', IDLE_MS: '20000', WRITER: 'quiet' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const line = await new Promise<string>((resolve) =>
      child.stdout.once('data', (c: Buffer) => resolve(c.toString())),
    );
    const stillRunning = child.exitCode === null;
    child.kill('SIGKILL');
    expect(stillRunning).toBe(true);
    expect(JSON.parse(line)).toMatchObject({ writer: 'quiet', msg: 'request' });
  });
});
