// ComfyUI's HTTP API, by hand, as its server.py defines it (github.com/Comfy-Org/ComfyUI, server.py
// and execution.py; read, not copied): POST /prompt {prompt, client_id, prompt_id} queues a
// workflow under the caller's prompt_id (any string: server.py takes `str(json["prompt_id"])`);
// GET /queue lists the running and pending items ([number, prompt_id, prompt, extra_data, outputs]);
// GET /history/{id} holds a finished prompt (`status.status_str`, `status.messages`, `outputs`);
// GET /view serves an output file; POST /upload/image stores an input; POST /interrupt
// {prompt_id} stops the running prompt and POST /queue {delete: [id]} a pending one;
// GET /system_stats answers while the box is up. There is no official npm client (the JS SDKs
// around are community ones driving the websocket), hence plain fetch.
// A box has no key of its own; a channel's credential, when set, travels as a bearer token (for a
// reverse proxy in front of it).
import { deadline } from '../../../src/shared/deadline.js';
import { TransportFailure, UpstreamFailure } from '../../../src/upstreams/failures.js';
import { causeCode, isRefusalStatus, statusToCode, upstreamMessage } from '../../../src/upstreams/answers.js';
import { fetchText, parseUpstreamJson } from '../../../src/upstreams/http.js';
import type { JobOutput } from '../../../src/shared/upstream-job.js';
import type { ComfyWorkflow } from '../../../src/shared/comfyui.js';

/** What the calls need of a provider call: the channel's box, the key and the abort signal. */
export interface ComfyCall {
  model: { baseUrl?: string | undefined };
  key?: string;
  signal: AbortSignal;
}

/** Kiln's websocket-less client id: ComfyUI keeps it in the prompt's extra_data only. */
export const CLIENT_ID = 'kiln';
/** How long the health check before a create may take: a box that is down must not eat the create's budget. */
const HEALTH_TIMEOUT_MS = 5000;

/** A non-2xx answer of a box: 400 carries ComfyUI's `error` and `node_errors`. */
export class ComfyHttpFailure extends UpstreamFailure {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(statusToCode(status), message, false, { status, refused: isRefusalStatus(status) });
  }
  override get transient(): boolean {
    return this.status >= 500 || this.status === 429 || this.status === 408;
  }
}

const base = (call: ComfyCall) => call.model.baseUrl!.replace(/\/+$/, '');
const auth = (call: ComfyCall): Record<string, string> => (call.key ? { authorization: `Bearer ${call.key}` } : {});

async function comfy(call: ComfyCall, path: string, init: RequestInit = {}): Promise<unknown> {
  const { res, text } = await fetchText(`${base(call)}${path}`, {
    ...init,
    headers: { ...auth(call), ...(init.headers as Record<string, string> | undefined) },
    signal: call.signal,
  });
  if (!res.ok) throw new ComfyHttpFailure(res.status, refusalMessage(res.status, text, call.key));
  return text === '' ? null : parseUpstreamJson(text);
}

const postJson = (call: ComfyCall, path: string, body: unknown) =>
  comfy(call, path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

interface ComfyError {
  type?: string;
  message?: string;
  details?: string;
  extra_info?: { input_name?: string };
}

/** A 400's words: the first node error (node id, class, input, message), else the prompt's own error. */
function refusalMessage(status: number, text: string, key?: string): string {
  let body: {
    error?: ComfyError | string;
    node_errors?: Record<string, { class_type?: string; errors?: ComfyError[] }>;
  };
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    return `ComfyUI answered ${status}: ${upstreamMessage(text, key)}`;
  }
  const [nodeId, node] = Object.entries(body?.node_errors ?? {})[0] ?? [];
  if (nodeId && node) {
    const e = node.errors?.[0] ?? {};
    const input = e.extra_info?.input_name ? ` input "${e.extra_info.input_name}"` : '';
    const words = [e.message, e.details].filter(Boolean).join(': ');
    return upstreamMessage(
      `ComfyUI refused the prompt: node ${nodeId} (${node.class_type ?? '?'})${input}: ${words || 'invalid'}`,
      key,
    );
  }
  const err = body?.error;
  const words = typeof err === 'string' ? err : [err?.message, err?.details].filter(Boolean).join(': ');
  return `ComfyUI answered ${status}: ${upstreamMessage(words || text, key)}`;
}

/**
 * The box answers its health check (GET /system_stats) before a create is sent: one that is down
 * or not serving fails here, provably before anything was sent, and the task moves to another box.
 */
export async function healthy(call: ComfyCall): Promise<void> {
  const timeout = deadline(HEALTH_TIMEOUT_MS);
  try {
    const { res, text } = await fetchText(`${base(call)}/system_stats`, {
      headers: auth(call),
      signal: AbortSignal.any([call.signal, timeout.signal]),
    });
    if (res.ok) return;
    throw new UpstreamFailure(
      statusToCode(res.status),
      `the ComfyUI box failed its health check (GET /system_stats ${res.status}: ${upstreamMessage(text, call.key)}); nothing was sent`,
      false,
      // Its key or an unwell box: either way the prompt was not sent, and another box may take it.
      { status: res.status, refused: true },
    );
  } catch (err) {
    if (call.signal.aborted || err instanceof UpstreamFailure) throw err;
    const why = timeout.expired
      ? `no answer within ${HEALTH_TIMEOUT_MS} ms`
      : (causeCode(err) ?? (err as Error).message);
    throw new TransportFailure(`the ComfyUI box is not reachable (GET /system_stats: ${why}); nothing was sent`, false);
  } finally {
    timeout.clear();
  }
}

/** Queues `workflow` under Kiln's prompt id; `dispatching` is awaited right before the request leaves. */
export async function submitPrompt(
  call: ComfyCall & { dispatching: () => Promise<void> },
  workflow: ComfyWorkflow,
  promptId: string,
): Promise<string> {
  const body = { prompt: workflow, client_id: CLIENT_ID, prompt_id: promptId };
  await call.dispatching();
  const answer = (await postJson(call, '/prompt', body)) as { prompt_id?: unknown } | null;
  // A box older than client prompt ids answers its own: the job goes on under that one (only a lost
  // answer could not be looked up there).
  const id = answer?.prompt_id;
  return typeof id === 'string' && id !== '' && id.length <= 200 ? id : promptId;
}

/** One finished prompt as GET /history/{id} holds it. */
export interface HistoryEntry {
  status?: { status_str?: string; completed?: boolean; messages?: [string, Record<string, unknown>][] } | null;
  outputs?: Record<string, Record<string, unknown>>;
}

/** Where the prompt is on the box: running, pending, finished (its history entry), or nowhere. */
export type Place = { at: 'running' } | { at: 'pending' } | { at: 'history'; entry: HistoryEntry } | { at: 'none' };

export async function inQueue(call: ComfyCall, id: string): Promise<Place | null> {
  const q = (await comfy(call, '/queue')) as { queue_running?: unknown[][]; queue_pending?: unknown[][] } | null;
  const has = (items: unknown[][] | undefined) => (items ?? []).some((item) => Array.isArray(item) && item[1] === id);
  if (has(q?.queue_running)) return { at: 'running' };
  if (has(q?.queue_pending)) return { at: 'pending' };
  return null;
}

export async function inHistory(call: ComfyCall, id: string): Promise<Place | null> {
  const h = (await comfy(call, `/history/${encodeURIComponent(id)}`)) as Record<string, HistoryEntry> | null;
  const entry = h && Object.hasOwn(h, id) ? h[id] : undefined;
  return entry ? { at: 'history', entry } : null;
}

/**
 * Where the prompt is, asked in the order that cannot miss it: the queue first, then the history
 * (ComfyUI moves a prompt from running to the history under one lock, so a prompt that left the
 * queue between the two reads is in the history by the second).
 */
export async function locate(call: ComfyCall, id: string): Promise<Place> {
  return (await inQueue(call, id)) ?? (await inHistory(call, id)) ?? { at: 'none' };
}

/** A finished prompt's failure (execution_error: the node and its message), or null when it succeeded. */
export function historyFailure(entry: HistoryEntry, key?: string): UpstreamFailure | null {
  const s = entry.status;
  if (!s || s.status_str !== 'error') return null;
  const messages = Array.isArray(s.messages) ? s.messages : [];
  const find = (event: string) => messages.find((m) => Array.isArray(m) && m[0] === event)?.[1];
  const error = find('execution_error');
  const interrupted = find('execution_interrupted');
  const at = (m: Record<string, unknown>) => `node ${String(m.node_id)} (${String(m.node_type ?? '?')})`;
  if (error) {
    const type = typeof error.exception_type === 'string' ? ` [${error.exception_type}]` : '';
    return new UpstreamFailure(
      'upstream_error',
      `ComfyUI failed the prompt at ${at(error)}${type}: ${upstreamMessage(String(error.exception_message ?? ''), key)}`,
    );
  }
  if (interrupted)
    return new UpstreamFailure('upstream_error', `the prompt was interrupted on the box at ${at(interrupted)}`);
  return new UpstreamFailure('upstream_error', 'ComfyUI reports the prompt failed without an execution error');
}

/** A file of a node's output ({filename, subfolder, type}) under the keys output nodes use. */
interface OutputFile {
  filename?: unknown;
  subfolder?: unknown;
  type?: unknown;
}
const FILE_KEYS = ['images', 'gifs', 'videos', 'audio'];

/**
 * Every file a finished prompt wrote, in node order, as GET /view URLs on the box. Saved files
 * (`type: output`) only, when there are any: previews (`temp`) repeat them.
 */
export function historyOutputs(call: ComfyCall, entry: HistoryEntry): JobOutput[] {
  const files: (JobOutput & { type: string })[] = [];
  for (const [nodeId, out] of Object.entries(entry.outputs ?? {}))
    for (const k of FILE_KEYS) {
      const list = (out as Record<string, unknown>)?.[k];
      if (!Array.isArray(list)) continue;
      for (const f of list as OutputFile[]) {
        if (typeof f?.filename !== 'string' || f.filename === '') continue;
        const type = typeof f.type === 'string' ? f.type : 'output';
        const q = new URLSearchParams({
          filename: f.filename,
          subfolder: typeof f.subfolder === 'string' ? f.subfolder : '',
          type,
        });
        const ext = /\.([A-Za-z0-9]{1,5})$/.exec(f.filename)?.[1]?.toLowerCase();
        files.push({ url: `${base(call)}/view?${q}`, nodeId, type, ...(ext ? { fileType: ext } : {}) });
      }
    }
  const saved = files.filter((f) => f.type === 'output');
  return (saved.length ? saved : files).map(({ type: _t, ...o }) => o);
}

/**
 * A stored output's GET /view URL on the channel's own box: the query of the URL `check` answered,
 * on the channel's base URL, so a key never goes to another host.
 */
export function viewUrl(call: ComfyCall, output: JobOutput): string {
  const q = new URL(output.url).searchParams;
  const keep = new URLSearchParams();
  for (const k of ['filename', 'subfolder', 'type']) keep.set(k, q.get(k) ?? '');
  return `${base(call)}/view?${keep}`;
}

export const viewHeaders = auth;

/** Stores one input image on the box (POST /upload/image, multipart); answers its name as LoadImage takes it. */
export async function uploadImage(call: ComfyCall, bytes: Buffer, mimeType: string, name: string): Promise<string> {
  const form = new FormData();
  form.set('image', new Blob([new Uint8Array(bytes)], { type: mimeType }), name);
  form.set('type', 'input');
  form.set('subfolder', 'kiln');
  form.set('overwrite', 'true');
  const r = (await comfy(call, '/upload/image', { method: 'POST', body: form })) as {
    name?: unknown;
    subfolder?: unknown;
  } | null;
  if (typeof r?.name !== 'string' || r.name === '')
    throw new UpstreamFailure('upstream_error', 'ComfyUI stored the reference image without answering its name');
  return typeof r.subfolder === 'string' && r.subfolder !== '' ? `${r.subfolder}/${r.name}` : r.name;
}

/** Stops the prompt: removed from the pending queue, and interrupted should it be running. */
export async function stopPrompt(call: ComfyCall, id: string): Promise<void> {
  // Delete first: a pending prompt that starts between the two calls is then caught by the interrupt.
  await postJson(call, '/queue', { delete: [id] });
  await postJson(call, '/interrupt', { prompt_id: id });
}
