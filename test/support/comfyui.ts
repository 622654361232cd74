// The real-ComfyUI tier's helpers: whether a ComfyUI can run here, starting one, and its HTTP API
// as server.py defines it (POST /prompt, GET /history/{id}, GET /queue, GET /view, POST /interrupt,
// POST /queue {delete}, POST /upload/image). ComfyUI runs as its own process
// (scripts/comfyui/start.ts), from the checkout in COMFYUI_DIR with the venv of
// scripts/comfyui/install.sh. The workflows are ours: test/fixtures/comfyui/*.json.
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  COMFYUI_PYTHON,
  COMFYUI_STAMP,
  startComfyUIProcess,
  type ComfyUI,
  type ComfyUIOptions,
} from '../../scripts/comfyui/start.js';

export type { ComfyUI, ComfyUIOptions };

const FIXTURES = fileURLToPath(new URL('../fixtures/comfyui/', import.meta.url));

export type ComfyUIAvailability = { ok: true; comfyuiDir: string; python: string } | { ok: false; reason: string };

/** Whether the real tier can run; `reason` says what is missing and how to get it. */
export function comfyuiAvailable(): ComfyUIAvailability {
  const dir = process.env.COMFYUI_DIR;
  if (!dir)
    return {
      ok: false,
      reason:
        'COMFYUI_DIR is unset: run COMFYUI_DIR=/path/to/ComfyUI bash scripts/comfyui/install.sh, then COMFYUI_DIR=/path/to/ComfyUI npm run test:comfyui',
    };
  const comfyuiDir = resolve(dir);
  if (!existsSync(join(comfyuiDir, 'main.py')) || !existsSync(join(comfyuiDir, 'server.py')))
    return { ok: false, reason: `COMFYUI_DIR=${comfyuiDir} is not a ComfyUI checkout (no main.py/server.py)` };
  const python = process.env.COMFYUI_PYTHON_BIN ?? COMFYUI_PYTHON;
  if (!existsSync(python) || (!process.env.COMFYUI_PYTHON_BIN && !existsSync(COMFYUI_STAMP)))
    return {
      ok: false,
      reason: `ComfyUI's Python environment is missing (${python}): run COMFYUI_DIR=${comfyuiDir} bash scripts/comfyui/install.sh`,
    };
  return { ok: true, comfyuiDir, python };
}

/** Starts a real ComfyUI on a free port; throws (with the reason) when comfyuiAvailable() is not ok. */
export async function startComfyUI(opts: ComfyUIOptions = {}): Promise<ComfyUI> {
  const a = comfyuiAvailable();
  if (!a.ok && !opts.comfyuiDir) throw new Error(a.reason);
  return startComfyUIProcess({ ...(a.ok ? { comfyuiDir: a.comfyuiDir, python: a.python } : {}), ...opts });
}

// ---------------------------------------------------------------------------------------------
// Workflows (API format: node id -> {class_type, inputs}) and the HTTP calls the tier makes.
// ---------------------------------------------------------------------------------------------

export interface WorkflowNode {
  class_type: string;
  inputs: Record<string, unknown>;
  _meta?: { title?: string };
}
export type Workflow = Record<string, WorkflowNode>;

/** test/fixtures/comfyui/<name>.json: image, video, animated, slow. */
export function loadWorkflow(name: 'image' | 'video' | 'animated' | 'slow' | (string & {})): Workflow {
  return JSON.parse(readFileSync(join(FIXTURES, `${name}.json`), 'utf8')) as Workflow;
}

/** A copy of `wf` with `inputs` of node `nodeId` overridden. */
export function withInputs(wf: Workflow, nodeId: string, inputs: Record<string, unknown>): Workflow {
  const copy = structuredClone(wf);
  const node = copy[nodeId];
  if (!node) throw new Error(`workflow has no node ${nodeId}`);
  Object.assign(node.inputs, inputs);
  return copy;
}

export interface OutputFile {
  filename: string;
  subfolder: string;
  type: 'output' | 'temp' | 'input';
}
export interface HistoryEntry {
  prompt: [number, string, Workflow, Record<string, unknown>, string[]];
  outputs: Record<string, { images?: OutputFile[]; animated?: boolean[]; [k: string]: unknown }>;
  status: { status_str: 'success' | 'error'; completed: boolean; messages: [string, Record<string, unknown>][] };
  meta?: Record<string, unknown>;
}
type QueueItem = [number, string, Workflow, Record<string, unknown>, string[]];

export function comfyClient(baseUrl: string) {
  const json = async <T>(path: string, init?: RequestInit): Promise<{ status: number; body: T }> => {
    const r = await fetch(`${baseUrl}${path}`, init);
    const text = await r.text();
    return { status: r.status, body: (text ? JSON.parse(text) : undefined) as T };
  };
  const post = <T>(path: string, body: unknown) =>
    json<T>(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const history = async (promptId: string): Promise<HistoryEntry | undefined> =>
    (await json<Record<string, HistoryEntry>>(`/history/${encodeURIComponent(promptId)}`)).body[promptId];
  return {
    systemStats: () => json<{ system: Record<string, unknown>; devices: unknown[] }>('/system_stats'),
    submit: (prompt: Workflow, ids: { promptId: string; clientId?: string }) =>
      post<{ prompt_id: string; number: number; node_errors: Record<string, unknown>; error?: unknown }>('/prompt', {
        prompt,
        prompt_id: ids.promptId,
        ...(ids.clientId ? { client_id: ids.clientId } : {}),
      }),
    /** The prompt's history entry, or undefined while it is queued, running, or unknown. */
    history,
    queue: async () => {
      const { body } = await json<{ queue_running: QueueItem[]; queue_pending: QueueItem[] }>('/queue');
      return { running: body.queue_running.map((i) => i[1]), pending: body.queue_pending.map((i) => i[1]) };
    },
    interrupt: (promptId?: string) => post<unknown>('/interrupt', promptId ? { prompt_id: promptId } : {}),
    deleteFromQueue: (promptIds: string[]) => post<unknown>('/queue', { delete: promptIds }),
    view: async (f: OutputFile) => {
      const q = new URLSearchParams({ filename: f.filename, subfolder: f.subfolder, type: f.type });
      const r = await fetch(`${baseUrl}/view?${q}`);
      return {
        status: r.status,
        contentType: r.headers.get('content-type') ?? '',
        bytes: Buffer.from(await r.arrayBuffer()),
      };
    },
    uploadImage: async (name: string, bytes: Uint8Array, opts: { overwrite?: boolean; subfolder?: string } = {}) => {
      const form = new FormData();
      form.append('image', new Blob([new Uint8Array(bytes)]), name);
      form.append('type', 'input');
      if (opts.subfolder) form.append('subfolder', opts.subfolder);
      if (opts.overwrite) form.append('overwrite', 'true');
      return json<{ name: string; subfolder: string; type: string }>('/upload/image', { method: 'POST', body: form });
    },
    /** Polls /history/{id} until the prompt has an entry (done, failed or interrupted). */
    async waitForHistory(promptId: string, timeoutMs = 120_000): Promise<HistoryEntry> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const h = await history(promptId);
        if (h) return h;
        if (Date.now() > deadline) throw new Error(`prompt ${promptId} has no history after ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 200));
      }
    },
  };
}
export type ComfyClient = ReturnType<typeof comfyClient>;
