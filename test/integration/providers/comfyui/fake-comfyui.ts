// A fake ComfyUI box for tests: one real HTTP server speaking the routes of ComfyUI's server.py,
// with a prompt queue that runs one prompt at a time, as PromptQueue and prompt_worker do:
//   POST /prompt {prompt, client_id, prompt_id}  → 200 {prompt_id, number, node_errors: {}}; the
//        prompt_id is the client's when given (str(...)), a uuid4 otherwise. An invalid prompt →
//        400 {error: {type, message, details, extra_info}, node_errors: {id: {errors, dependent_outputs,
//        class_type}}} (validate_prompt's shapes: no class_type, unknown node, prompt_no_outputs,
//        prompt_outputs_failed_validation with a node's required_input_missing / value_not_in_list)
//   GET  /queue          {queue_running: [item], queue_pending: [item]}, item = [number, prompt_id,
//        prompt, extra_data, outputs_to_execute]
//   GET  /history/{id}   {} or {id: {prompt: item, outputs: {node: {images: [{filename, subfolder,
//        type}], animated?: [true]}}, status: {status_str, completed, messages: [[event, data]]}, meta}}
//        (an execution error: status_str "error", an `execution_error` message with node_id,
//        node_type, exception_message, exception_type; an interrupt: `execution_interrupted`)
//   GET  /view?filename&subfolder&type   the file (404 when there is none)
//   POST /upload/image   multipart image (+ type, subfolder, overwrite) → {name, subfolder, type}
//   POST /interrupt {prompt_id}   interrupts that prompt if it is the running one
//   POST /queue {delete: [ids]}   removes pending items
//   GET  /system_stats   {system: {...}, devices: [...]}
// Output nodes write files: SaveImage (png), PreviewImage (png, type temp), SaveAnimatedWEBP and
// SaveAnimatedPNG (animated), SaveVideo and SaveWEBM (mp4 / webm). Every execution is recorded, so a
// test can count how many times each prompt ran.
// Fault injection: a POST /prompt answer dropped after the prompt was queued (or before), error
// answers, a prompt that fails at a node or runs until released, a box that is stopped and
// restarted on its port (its queue and history kept, as a box that is briefly unreachable).
//
// Source (read, not copied; GPL-3.0): github.com/Comfy-Org/ComfyUI server.py (routes /prompt, /queue,
// /history, /view, /upload/image, /interrupt, /system_stats), execution.py (validate_prompt,
// PromptQueue, PromptExecutor.handle_execution_error / add_message), main.py (prompt_worker),
// comfy_extras/nodes_images.py and comfy_api/latest/_ui.py (the `animated` outputs).
import { randomBytes, randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { FakeServer, sendJson } from '../../../support/fake-server.js';
import { TINY_PNG } from '../gemini/fake-gemini.js';

export interface ComfyRecorded {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: any;
  /** POST /upload/image: the file's name, type and bytes. */
  upload?: { name: string; type: string; bytes: Buffer; fields: Record<string, string> };
  at: number;
}

/** What POST /prompt does with one request. */
export type PromptFault =
  | { kind: 'ok' }
  /** Queues the prompt, then destroys the socket without answering (a lost answer). */
  | { kind: 'drop-after' }
  /** Destroys the socket before anything is queued. */
  | { kind: 'drop-before' }
  /** Queues the prompt and never answers: the socket closes when the box is stopped. */
  | { kind: 'hang-after' }
  | { kind: 'error'; status: number; body: unknown };

/** How one prompt runs: finishes, fails at a node, or runs until `release`. */
export type PromptScript = { run: 'ok' } | { run: 'error'; nodeId: string; message: string } | { run: 'hold' };

type Item = [number, string, Record<string, any>, Record<string, unknown>, string[]];

const OUTPUT_NODES: Record<string, { ext: string; type: string; animated?: boolean; subfolder?: string }> = {
  SaveImage: { ext: 'png', type: 'output' },
  PreviewImage: { ext: 'png', type: 'temp' },
  SaveAnimatedWEBP: { ext: 'webp', type: 'output', animated: true },
  SaveAnimatedPNG: { ext: 'png', type: 'output', animated: true },
  SaveVideo: { ext: 'mp4', type: 'output', animated: true, subfolder: 'video' },
  SaveWEBM: { ext: 'webm', type: 'output', animated: true },
};
/** Node classes the fake box knows (beside the output nodes). */
const KNOWN = new Set([
  'CheckpointLoaderSimple',
  'EmptyImage',
  'LoadImage',
  'ImageScale',
  'CLIPTextEncode',
  'KSampler',
  'PrimitiveString',
  'RepeatImageBatch',
  'CreateVideo',
  ...Object.keys(OUTPUT_NODES),
]);

export const NODE_ERROR_BODY = (nodeId: string, classType: string, input: string) => ({
  error: {
    type: 'prompt_outputs_failed_validation',
    message: 'Prompt outputs failed validation',
    details: `Required input is missing: ${input}`,
    extra_info: {},
  },
  node_errors: {
    [nodeId]: {
      errors: [
        {
          type: 'required_input_missing',
          message: 'Required input is missing',
          details: input,
          extra_info: { input_name: input },
        },
      ],
      dependent_outputs: ['9'],
      class_type: classType,
    },
  },
});

export class FakeComfy extends FakeServer<ComfyRecorded> {
  /** Every prompt the box started executing, in order (one entry per execution). */
  readonly executed: string[] = [];
  readonly history = new Map<string, Record<string, unknown>>();
  readonly files = new Map<string, Buffer>();
  /** When set, every call must carry `Authorization: Bearer <key>` (a proxy in front of the box). */
  key: string | undefined;
  /** How long one prompt runs. */
  execMs = 50;
  onPrompt: ((body: any) => PromptFault | undefined) | undefined;
  scriptFor: ((body: any) => PromptScript | undefined) | undefined;
  /** Status of GET /system_stats (a box whose health check fails), and how long it takes. */
  statsStatus = 200;
  statsDelayMs = 0;
  video = Buffer.concat([Buffer.from('\x00\x00\x00\x18ftypmp42'), randomBytes(2048)]);
  private pending: Item[] = [];
  private running: { item: Item; script: PromptScript; timer?: NodeJS.Timeout } | null = null;
  private number = 0;
  private counter = 0;
  private host = '127.0.0.1';

  constructor(readonly boxName = 'fake comfyui') {
    super(boxName);
  }

  override async start(host = '127.0.0.1', port = 0): Promise<this> {
    this.host = host;
    return super.start(host, port);
  }

  /** Stops answering (connections refused); the queue and history stay, and the prompts go on running. */
  async stop(): Promise<void> {
    await this.close();
  }
  async restart(): Promise<void> {
    await super.start(this.host, this.port);
  }

  reset(): void {
    this.forget();
    this.executed.length = 0;
    this.history.clear();
    this.pending = [];
    if (this.running?.timer) clearTimeout(this.running.timer);
    this.running = null;
    this.key = undefined;
    this.execMs = 50;
    this.onPrompt = undefined;
    this.scriptFor = undefined;
    this.statsStatus = 200;
    this.statsDelayMs = 0;
  }

  prompts = () => this.requests.filter((r) => r.method === 'POST' && r.path === '/prompt');
  views = () => this.requests.filter((r) => r.path === '/view');
  uploads = () => this.requests.filter((r) => r.path === '/upload/image');
  interrupts = () => this.requests.filter((r) => r.path === '/interrupt');
  deletes = () => this.requests.filter((r) => r.method === 'POST' && r.path === '/queue');
  lookups = () => this.requests.filter((r) => r.path === '/queue' && r.method === 'GET');
  /** How many times each prompt id was executed. */
  executions = (): Map<string, number> => {
    const m = new Map<string, number>();
    for (const id of this.executed) m.set(id, (m.get(id) ?? 0) + 1);
    return m;
  };
  queued = (): string[] => [...(this.running ? [this.running.item[1]] : []), ...this.pending.map((i) => i[1])];

  /** Lets every held prompt finish. */
  release(): void {
    this.scriptFor = undefined;
    const r = this.running;
    if (r && r.script.run === 'hold') {
      r.script = { run: 'ok' };
      this.finish(r.item, r.script);
    }
  }

  protected handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://x');
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => void this.route(req, res, url, Buffer.concat(chunks)));
  }

  private async route(req: IncomingMessage, res: ServerResponse, url: URL, raw: Buffer): Promise<void> {
    let body: any = null;
    const ct = String(req.headers['content-type'] ?? '');
    if (ct.includes('json'))
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        /* not JSON */
      }
    const rec: ComfyRecorded = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: url.searchParams,
      headers: req.headers,
      body,
      at: Date.now(),
    };
    if (rec.path === '/upload/image' && ct.startsWith('multipart/form-data')) {
      const form = await new Response(new Uint8Array(raw), { headers: { 'content-type': ct } }).formData();
      const file = form.get('image');
      const fields: Record<string, string> = {};
      for (const [k, v] of form.entries()) if (typeof v === 'string') fields[k] = v;
      if (file && typeof file !== 'string')
        rec.upload = { name: file.name, type: file.type, bytes: Buffer.from(await file.arrayBuffer()), fields };
    }
    this.record(rec);
    // Not ComfyUI's: a reference image for the tests to hand Kiln (from a box on 127.0.0.2), keyless.
    if (rec.path === '/ref.png') {
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': TINY_PNG.length });
      return void res.end(TINY_PNG);
    }
    if (this.key && req.headers.authorization !== `Bearer ${this.key}`)
      return sendJson(res, 401, { error: 'Unauthorized' });
    const m = `${rec.method} ${rec.path}`;
    if (m === 'GET /system_stats') return void setTimeout(() => this.stats(res), this.statsDelayMs);
    if (m === 'POST /prompt') return this.prompt(res, body);
    if (m === 'GET /queue')
      return sendJson(res, 200, {
        queue_running: this.running ? [this.running.item] : [],
        queue_pending: [...this.pending].sort((a, b) => a[0] - b[0]),
      });
    if (m === 'POST /queue') {
      for (const id of body?.delete ?? []) this.pending = this.pending.filter((i) => i[1] !== id);
      if (body?.clear) this.pending = [];
      res.writeHead(200).end();
      return;
    }
    if (m === 'POST /interrupt') {
      const r = this.running;
      if (r && (!body?.prompt_id || body.prompt_id === r.item[1])) this.interrupt(r.item);
      res.writeHead(200).end();
      return;
    }
    const hist = /^\/history\/(.+)$/.exec(rec.path);
    if (rec.method === 'GET' && hist) {
      const id = decodeURIComponent(hist[1]!);
      const h = this.history.get(id);
      return sendJson(res, 200, h ? { [id]: h } : {});
    }
    if (m === 'GET /view') return this.view(res, url.searchParams);
    if (m === 'POST /upload/image') {
      if (!rec.upload?.name) return void res.writeHead(400).end();
      const sub = rec.upload.fields.subfolder ?? '';
      const type = rec.upload.fields.type ?? 'input';
      this.files.set(`${type}/${sub}/${rec.upload.name}`, rec.upload.bytes);
      return sendJson(res, 200, { name: rec.upload.name, subfolder: sub, type });
    }
    res.writeHead(404).end();
  }

  private stats(res: ServerResponse): void {
    if (this.statsStatus !== 200) return sendJson(res, this.statsStatus, { error: 'unwell' });
    sendJson(res, 200, {
      system: { os: 'posix', comfyui_version: '0.3.64', python_version: '3.12', argv: ['main.py', '--cpu'] },
      devices: [{ name: 'cpu', type: 'cpu', index: null, vram_total: 0, vram_free: 0 }],
    });
  }

  private prompt(res: ServerResponse, body: any): void {
    const fault = this.onPrompt?.(body) ?? { kind: 'ok' };
    if (fault.kind === 'drop-before') return void res.socket?.destroy();
    if (fault.kind === 'error') return sendJson(res, fault.status, fault.body);
    const prompt = body?.prompt;
    if (!prompt || typeof prompt !== 'object')
      return sendJson(res, 400, {
        error: { type: 'no_prompt', message: 'No prompt provided', details: 'No prompt provided', extra_info: {} },
        node_errors: {},
      });
    const invalid = this.validate(prompt);
    if (invalid) return sendJson(res, 400, invalid);
    const id = String(body.prompt_id ?? randomUUID());
    const outputs = Object.keys(prompt).filter((k) => prompt[k].class_type in OUTPUT_NODES);
    const item: Item = [this.number++, id, prompt, { client_id: body.client_id }, outputs];
    this.pending.push(item);
    this.pump();
    if (fault.kind === 'drop-after') return void res.socket?.destroy();
    if (fault.kind === 'hang-after') return;
    sendJson(res, 200, { prompt_id: id, number: item[0], node_errors: {} });
  }

  /** validate_prompt's refusals, for the cases the tests use. */
  private validate(prompt: Record<string, any>): unknown {
    for (const [id, n] of Object.entries(prompt)) {
      if (!n?.class_type)
        return this.promptError(
          'invalid_prompt',
          'Cannot execute because a node is missing the class_type property.',
          id,
        );
      if (!KNOWN.has(n.class_type))
        return this.promptError('invalid_prompt', `Cannot execute because node ${n.class_type} does not exist.`, id);
    }
    const outputs = Object.keys(prompt).filter((k) => prompt[k].class_type in OUTPUT_NODES);
    if (!outputs.length)
      return {
        error: { type: 'prompt_no_outputs', message: 'Prompt has no outputs', details: '', extra_info: {} },
        node_errors: {},
      };
    for (const [id, n] of Object.entries(prompt))
      if (n.class_type === 'CLIPTextEncode' && (n.inputs?.text === undefined || n.inputs.text === ''))
        return NODE_ERROR_BODY(id, 'CLIPTextEncode', 'text');
    return null;
  }

  private promptError(type: string, message: string, id: string) {
    return { error: { type, message, details: `Node ID '#${id}'`, extra_info: {} }, node_errors: {} };
  }

  /** prompt_worker: one prompt at a time, the lowest number first. */
  private pump(): void {
    if (this.running || !this.pending.length) return;
    this.pending.sort((a, b) => a[0] - b[0]);
    const item = this.pending.shift()!;
    const script = this.scriptFor?.(item[2]) ?? { run: 'ok' };
    this.running = { item, script };
    this.executed.push(item[1]);
    if (script.run !== 'hold') this.running.timer = setTimeout(() => this.finish(item, script), this.execMs);
  }

  private messages(id: string, last: [string, Record<string, unknown>]) {
    const ts = Date.now();
    return [
      ['execution_start', { prompt_id: id, timestamp: ts }],
      ['execution_cached', { nodes: [], prompt_id: id, timestamp: ts }],
      [last[0], { ...last[1], timestamp: ts }],
    ];
  }

  private finish(item: Item, script: PromptScript): void {
    if (this.running?.item !== item) return;
    const [, id, prompt] = item;
    if (script.run === 'error') {
      const node = prompt[script.nodeId] ?? { class_type: '?' };
      this.history.set(id, {
        prompt: item,
        outputs: {},
        status: {
          status_str: 'error',
          completed: false,
          messages: this.messages(id, [
            'execution_error',
            {
              prompt_id: id,
              node_id: script.nodeId,
              node_type: node.class_type,
              executed: [],
              exception_message: script.message,
              exception_type: 'RuntimeError',
              traceback: ['  File "execution.py", line 1\n'],
              current_inputs: {},
              current_outputs: [],
            },
          ]),
        },
        meta: {},
      });
    } else {
      const outputs: Record<string, unknown> = {};
      for (const nodeId of item[4]) {
        const kind = OUTPUT_NODES[prompt[nodeId].class_type]!;
        const prefix = String(prompt[nodeId].inputs?.filename_prefix ?? 'ComfyUI');
        const filename = `${prefix}_${String(++this.counter).padStart(5, '0')}_.${kind.ext}`;
        const subfolder = kind.subfolder ?? '';
        this.files.set(`${kind.type}/${subfolder}/${filename}`, this.fileFor(kind.ext));
        outputs[nodeId] = {
          images: [{ filename, subfolder, type: kind.type }],
          ...(kind.animated ? { animated: [true] } : {}),
        };
      }
      this.history.set(id, {
        prompt: item,
        outputs,
        status: {
          status_str: 'success',
          completed: true,
          messages: this.messages(id, ['execution_success', { prompt_id: id }]),
        },
        meta: Object.fromEntries(Object.keys(outputs).map((k) => [k, { node_id: k, display_node: k }])),
      });
    }
    this.running = null;
    this.pump();
  }

  private interrupt(item: Item): void {
    const [, id, prompt] = item;
    if (this.running?.timer) clearTimeout(this.running.timer);
    const nodeId = item[4][0] ?? Object.keys(prompt)[0]!;
    this.history.set(id, {
      prompt: item,
      outputs: {},
      status: {
        status_str: 'error',
        completed: false,
        messages: this.messages(id, [
          'execution_interrupted',
          { prompt_id: id, node_id: nodeId, node_type: prompt[nodeId]?.class_type, executed: [] },
        ]),
      },
      meta: {},
    });
    this.running = null;
    this.pump();
  }

  private fileFor(ext: string): Buffer {
    if (ext === 'mp4' || ext === 'webm') return this.video;
    return TINY_PNG;
  }

  private view(res: ServerResponse, q: URLSearchParams): void {
    const filename = q.get('filename') ?? '';
    if (!filename || filename.startsWith('/') || filename.includes('..')) return void res.writeHead(400).end();
    const file = this.files.get(`${q.get('type') ?? 'output'}/${q.get('subfolder') ?? ''}/${filename}`);
    if (!file) return void res.writeHead(404).end();
    const ext = filename.split('.').pop();
    const type =
      { png: 'image/png', webp: 'image/webp', mp4: 'video/mp4', webm: 'video/webm' }[ext ?? ''] ??
      'application/octet-stream';
    res.writeHead(200, {
      'content-type': type,
      'content-length': file.length,
      'content-disposition': `filename="${filename}"`,
    });
    res.end(file);
  }
}

export async function startFakeComfy(host = '127.0.0.1', name?: string): Promise<FakeComfy> {
  return new FakeComfy(name).start(host);
}
