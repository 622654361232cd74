// Starts a real ComfyUI (a checkout in COMFYUI_DIR, its Python from scripts/comfyui/install.sh) as
// a separate process on a free local port, CPU only, with its own temporary base, input, output,
// temp and user directories and an in-memory database, so a run leaves nothing in the checkout.
// Used by the real-ComfyUI tier (test/support/comfyui.ts) and by hand:
//
//   COMFYUI_DIR=/path/to/ComfyUI bash scripts/on-node.sh npx tsx scripts/comfyui/start.ts [--port N]
//
// prints {"baseUrl": …} once GET /system_stats answers and runs until Ctrl-C.
// ComfyUI is GPL-3.0: nothing of it is imported here, it only runs as its own process.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, ROOT, stopChild } from '../services.js';

/** The venv scripts/comfyui/install.sh creates. */
export const COMFYUI_VENV = join(ROOT, '.tools', 'comfyui-venv');
export const COMFYUI_PYTHON = join(COMFYUI_VENV, 'bin', 'python');
/** Written by install.sh once the venv can load torch. */
export const COMFYUI_STAMP = join(COMFYUI_VENV, '.kiln-comfyui-stamp');

export interface ComfyUIOptions {
  /** The ComfyUI checkout; default COMFYUI_DIR. */
  comfyuiDir?: string;
  /** Default .tools/comfyui-venv/bin/python, or COMFYUI_PYTHON_BIN. */
  python?: string;
  /** Default a free port. Kept across stop()/start(), so a restarted box has the same address. */
  port?: number;
  /** Base directory for models, custom_nodes, input, output, temp and user; default a new temp dir. */
  baseDir?: string;
  /** More command-line arguments for main.py (e.g. ['--cache-none']). */
  extraArgs?: string[];
  /** How long to wait for GET /system_stats; default 300 s (imports take ~1 min on 2 busy cores). */
  readyTimeoutMs?: number;
}

export interface ComfyUI {
  baseUrl: string;
  port: number;
  baseDir: string;
  inputDir: string;
  outputDir: string;
  tempDir: string;
  /** ComfyUI's stdout and stderr, appended across restarts. */
  logFile: string;
  /** Milliseconds from spawn to the first answer of /system_stats, for the last start. */
  startupMs: number;
  /** Start again after stop(), same port and directories. ComfyUI keeps queue and history in memory: both start empty. */
  start(): Promise<void>;
  /** SIGTERM (or `signal`), SIGKILL after 10 s. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** stop(), then remove baseDir when this helper created it. */
  dispose(): Promise<void>;
  /** The last `lines` lines of the log. */
  logTail(lines?: number): string;
}

export function comfyuiArgs(o: {
  port: number;
  baseDir: string;
  inputDir: string;
  outputDir: string;
  tempDir: string;
  userDir: string;
  extraArgs?: string[];
}): string[] {
  return [
    'main.py',
    '--cpu',
    '--listen',
    '127.0.0.1',
    '--port',
    String(o.port),
    '--disable-auto-launch',
    '--dont-print-server',
    '--base-directory',
    o.baseDir,
    '--input-directory',
    o.inputDir,
    '--output-directory',
    o.outputDir,
    '--temp-directory',
    o.tempDir,
    '--user-directory',
    o.userDir,
    // Otherwise it writes user/comfyui.db inside the checkout.
    '--database-url',
    'sqlite:///:memory:',
    // Paid cloud nodes: nothing here uses them, and skipping their import shortens the start.
    '--disable-api-nodes',
    ...(o.extraArgs ?? []),
  ];
}

export async function startComfyUIProcess(opts: ComfyUIOptions = {}): Promise<ComfyUI> {
  const dir = opts.comfyuiDir ?? process.env.COMFYUI_DIR;
  if (!dir) throw new Error('COMFYUI_DIR is not set: point it at a ComfyUI checkout');
  const comfyuiDir = resolve(dir);
  if (!existsSync(join(comfyuiDir, 'main.py'))) throw new Error(`${comfyuiDir} is not a ComfyUI checkout (no main.py)`);
  const python = opts.python ?? process.env.COMFYUI_PYTHON_BIN ?? COMFYUI_PYTHON;
  if (!existsSync(python))
    throw new Error(`${python} not found: run COMFYUI_DIR=${comfyuiDir} bash scripts/comfyui/install.sh`);

  const ownBase = !opts.baseDir;
  const baseDir = opts.baseDir ?? mkdtempSync(join(tmpdir(), 'kiln-comfyui-'));
  const d = {
    inputDir: join(baseDir, 'input'),
    outputDir: join(baseDir, 'output'),
    tempDir: join(baseDir, 'temp'),
    userDir: join(baseDir, 'user'),
  };
  // main.py lists <base>/custom_nodes before anything else and fails if it is missing.
  for (const p of [...Object.values(d), join(baseDir, 'custom_nodes'), join(baseDir, 'models')])
    mkdirSync(p, { recursive: true });
  const port = opts.port ?? (await freePort());
  const baseUrl = `http://127.0.0.1:${port}`;
  const logFile = join(baseDir, 'comfyui.log');
  const readyTimeoutMs = opts.readyTimeoutMs ?? 300_000;
  let child: ChildProcess | undefined;

  const logTail = (lines = 40) => {
    try {
      return readFileSync(logFile, 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '';
    }
  };

  const handle: ComfyUI = {
    baseUrl,
    port,
    baseDir,
    ...d,
    logFile,
    startupMs: 0,
    logTail,
    async start() {
      if (child && child.exitCode === null && child.signalCode === null) return;
      const fd = openSync(logFile, 'a');
      const t0 = Date.now();
      const proc = spawn(python, comfyuiArgs({ port, baseDir, ...d, extraArgs: opts.extraArgs }), {
        cwd: comfyuiDir,
        stdio: ['ignore', fd, fd],
        env: { ...process.env, PYTHONUNBUFFERED: '1', HF_HUB_OFFLINE: '1', DO_NOT_TRACK: '1' },
      });
      closeSync(fd);
      child = proc;
      const spawnError = new Promise<never>((_, rej) =>
        proc.once('error', (err) => rej(new Error(`cannot start ${python}: ${err.message}`))),
      );
      spawnError.catch(() => undefined);
      const deadline = t0 + readyTimeoutMs;
      for (;;) {
        if (proc.exitCode !== null || proc.signalCode !== null)
          throw new Error(
            `ComfyUI exited (${proc.exitCode ?? proc.signalCode}) during start-up; log ${logFile}:\n${logTail()}`,
          );
        const ok = await Promise.race([
          fetch(`${baseUrl}/system_stats`, { signal: AbortSignal.timeout(2000) }).then(
            (r) => r.ok,
            () => false,
          ),
          spawnError,
        ]);
        if (ok) break;
        if (Date.now() > deadline) {
          await stopChild(proc, 'SIGKILL');
          throw new Error(`ComfyUI did not answer /system_stats within ${readyTimeoutMs} ms; log:\n${logTail()}`);
        }
        await new Promise((r) => setTimeout(r, 250));
      }
      handle.startupMs = Date.now() - t0;
    },
    async stop(signal = 'SIGTERM') {
      if (child) await stopChild(child, signal, 10_000);
    },
    async dispose() {
      await handle.stop();
      if (ownBase) rmSync(baseDir, { recursive: true, force: true });
    },
  };
  await handle.start();
  return handle;
}

// By hand: start one and keep it running until Ctrl-C.
if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const i = process.argv.indexOf('--port');
  const port = i > 0 ? Number(process.argv[i + 1]) : undefined;
  const comfy = await startComfyUIProcess({ port });
  console.log(JSON.stringify({ baseUrl: comfy.baseUrl, baseDir: comfy.baseDir, startupMs: comfy.startupMs }));
  const quit = () => void comfy.dispose().then(() => process.exit(0));
  process.once('SIGINT', quit);
  process.once('SIGTERM', quit);
}
