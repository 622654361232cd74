// A fake DashScope (Alibaba Cloud Model Studio) for tests: one real HTTP server on 127.0.0.1
// speaking the async-task protocol as Model Studio's public API reference documents it and the
// official SDKs send and read it:
//   POST /api/v1/services/aigc/text2image/image-synthesis     (Qwen-Image, Wan t2i)
//   POST /api/v1/services/aigc/image2image/image-synthesis    (wan2.5-i2i: input.images)
//   POST /api/v1/services/aigc/video-generation/video-synthesis (Wan t2v: parameters.size; i2v:
//        input.img_url + parameters.resolution)
//        with `X-DashScope-Async: enable` and `Authorization: Bearer <key>`, body {model, input, parameters}
//        → {request_id, output: {task_id, task_status: "PENDING"}}
//   GET  /api/v1/tasks/{task_id} → {request_id, output: {task_id, task_status, submit_time, …,
//        results: [{url}] | video_url | code + message}}; an unknown id answers task_status UNKNOWN
//   POST /api/v1/tasks/{task_id}/cancel → 200 {request_id} for a PENDING task, else 400 UnsupportedOperation
//   GET  /oss/{file} → the output bytes (the signed result link, no key)
// Errors are DashScope's body {request_id, code, message} with its HTTP status.
// Sources (read, not copied):
//   - https://www.alibabacloud.com/help/en/model-studio/text-to-image/ and
//     https://www.alibabacloud.com/help/en/model-studio/qwen-image-api (async: text2image/image-synthesis,
//     parameters.size among 1664*928, 1472*1140, 1328*1328, 1140*1472, 928*1664; n fixed at 1)
//   - https://docs.qwencloud.com/api-reference/image-generation/qwen-text-to-image-async (create answer, polling)
//   - https://www.alibabacloud.com/help/en/model-studio/developer-reference/error-code (InvalidParameter,
//     DataInspectionFailed, Arrearage, UnsupportedOperation 400; InvalidApiKey 401; AccessDenied 403;
//     Throttling 429; InternalError 500)
//   - github.com/dashscope/dashscope-sdk-python dashscope/client/base_api.py (task GET, `cancel`:
//     POST tasks/{id}/cancel, "Cancel PENDING task"; terminal statuses FAILED, CANCELED, SUCCEEDED, UNKNOWN)
//   - github.com/dashscope/dashscope-sdk-nodejs src/aigc/imageSynthesis, src/aigc/videoSynthesis,
//     src/common/asyncTask.ts (paths by model: -i2i → image2image; body {model, input, parameters})
import { randomBytes, randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { answerLater, FakeServer, readBody, sendJson } from '../../../support/fake-server.js';

export interface DsRecorded {
  n: number;
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: any;
  at: number;
}

export type DsFault =
  | { kind: 'ok'; delayMs?: number }
  | { kind: 'error'; status: number; code: string; message: string; delayMs?: number }
  /** Destroys the socket once the request has arrived, without answering. */
  | { kind: 'drop'; delayMs?: number };

/**
 * What successive queries of one task report: 'pending', 'running', 'succeeded', 'failed:<code>:<message>',
 * 'partial' (n images asked, the first failed alone). The last entry repeats.
 */
export type DsScript = string[];

export const ok = (delayMs?: number): DsFault => ({ kind: 'ok', ...(delayMs ? { delayMs } : {}) });
export const drop = (delayMs = 0): DsFault => ({ kind: 'drop', delayMs });
export const fail = (status: number, code: string, message: string, delayMs?: number): DsFault => ({
  kind: 'error',
  status,
  code,
  message,
  ...(delayMs ? { delayMs } : {}),
});

const CREATE =
  /^\/api\/v1\/services\/aigc\/(text2image|image2image|video-generation)\/(image-synthesis|video-synthesis)$/;
const TASK = /^\/api\/v1\/tasks\/([^/]+)$/;
const CANCEL = /^\/api\/v1\/tasks\/([^/]+)\/cancel$/;
const OSS = /^\/oss\/([^/]+)$/;
const QWEN_SIZES = ['1664*928', '1472*1140', '1328*1328', '1140*1472', '928*1664'];

interface Task {
  id: string;
  kind: 'image' | 'video';
  n: number;
  script: DsScript;
  reads: number;
  canceled: boolean;
  files: string[];
}

export class FakeDashScope extends FakeServer<DsRecorded> {
  image = Buffer.from(
    'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
    'base64',
  );
  video = Buffer.concat([Buffer.from('\x00\x00\x00\x18ftypmp42'), randomBytes(4096)]);
  /** When set, every /api/v1 call must carry it as a Bearer token. */
  key: string | undefined;
  onCreate: ((call: DsRecorded) => DsFault | undefined) | undefined;
  scriptFor: ((call: DsRecorded) => DsScript | undefined) | undefined;
  private script: DsScript = ['pending', 'running', 'succeeded'];
  private createFaults: DsFault[] = [];
  private readFaults: DsFault[] = [];
  private downloadFaults: DsFault[] = [];
  private readonly tasks = new Map<string, Task>();

  constructor() {
    super('fake dashscope');
  }

  enqueueCreate(...f: DsFault[]): this {
    this.createFaults.push(...f);
    return this;
  }
  enqueueRead(...f: DsFault[]): this {
    this.readFaults.push(...f);
    return this;
  }
  enqueueDownload(...f: DsFault[]): this {
    this.downloadFaults.push(...f);
    return this;
  }
  setScript(s: DsScript): this {
    this.script = s;
    return this;
  }

  reset(): void {
    this.forget();
    this.createFaults = [];
    this.readFaults = [];
    this.downloadFaults = [];
    this.script = ['pending', 'running', 'succeeded'];
    this.key = undefined;
    this.onCreate = undefined;
    this.scriptFor = undefined;
  }

  creates(): DsRecorded[] {
    return this.requests.filter((r) => r.method === 'POST' && CREATE.test(r.path));
  }
  reads(): DsRecorded[] {
    return this.requests.filter((r) => r.method === 'GET' && TASK.test(r.path));
  }
  cancels(): DsRecorded[] {
    return this.requests.filter((r) => r.method === 'POST' && CANCEL.test(r.path));
  }
  downloads(): DsRecorded[] {
    return this.requests.filter((r) => OSS.test(r.path));
  }

  protected handle(req: IncomingMessage, res: ServerResponse): void {
    readBody(req, (_raw, body) => {
      const url = new URL(req.url ?? '/', 'http://fake');
      const call: DsRecorded = {
        n: this.requests.length + 1,
        method: req.method ?? '',
        path: url.pathname,
        headers: req.headers,
        body,
        at: Date.now(),
      };
      this.record(call);
      this.route(call, res);
    });
  }

  private route(call: DsRecorded, res: ServerResponse): void {
    const { method, path } = call;
    let m = OSS.exec(path);
    if (method === 'GET' && m) {
      const file = m[1]!;
      return this.answer(this.downloadFaults.shift() ?? ok(), res, () => {
        if (![...this.tasks.values()].some((t) => t.files.includes(file)))
          return void res
            .writeHead(404, { 'content-type': 'application/xml' })
            .end('<Error><Code>NoSuchKey</Code></Error>');
        const bytes = file.endsWith('.mp4') ? this.video : this.image;
        res.writeHead(200, {
          'content-type': file.endsWith('.mp4') ? 'video/mp4' : 'image/png',
          'content-length': bytes.length,
        });
        res.end(bytes);
      });
    }
    if (path.startsWith('/api/v1/') && !this.keyOk(call, res)) return;
    m = CREATE.exec(path);
    if (method === 'POST' && m) {
      if (call.headers['x-dashscope-async'] !== 'enable')
        return dsError(res, 403, 'AccessDenied', 'current user api does not support synchronous calls');
      const f = this.onCreate?.(call) ?? this.createFaults.shift() ?? ok();
      return this.answer(f, res, () => this.create(call, m![1]!, res));
    }
    m = CANCEL.exec(path);
    if (method === 'POST' && m) return this.cancel(m[1]!, res);
    m = TASK.exec(path);
    if (method === 'GET' && m) return this.answer(this.readFaults.shift() ?? ok(), res, () => this.read(m![1]!, res));
    dsError(res, 404, 'NotFound', `no route ${method} ${path}`);
  }

  /** DashScope answers a missing or wrong key with 401 InvalidApiKey. */
  private keyOk(call: DsRecorded, res: ServerResponse): boolean {
    if (this.key === undefined) return true;
    const got = call.headers.authorization;
    if (got === `Bearer ${this.key}`) return true;
    dsError(res, 401, 'InvalidApiKey', got ? 'Invalid API-key provided.' : 'No API-key provided.');
    return false;
  }

  private answer(f: DsFault, res: ServerResponse, then: () => void): void {
    answerLater(res, { delayMs: f.delayMs, drop: f.kind === 'drop' }, () => {
      if (f.kind === 'error') return dsError(res, f.status, f.code, f.message);
      then();
    });
  }

  private create(call: DsRecorded, group: string, res: ServerResponse): void {
    const why = invalidCreate(call.body, group);
    if (why) return dsError(res, 400, 'InvalidParameter', why);
    const id = randomUUID();
    const kind = group === 'video-generation' ? 'video' : 'image';
    const n = kind === 'image' ? Number(call.body.parameters?.n ?? 1) : 1;
    const script = this.scriptFor?.(call) ?? this.script;
    this.tasks.set(id, { id, kind, n, script, reads: 0, canceled: false, files: [] });
    sendJson(res, 200, { request_id: randomUUID(), output: { task_id: id, task_status: 'PENDING' } });
  }

  private state(t: Task): string {
    if (t.canceled) return 'canceled';
    return t.script[Math.min(t.reads, t.script.length - 1)]!;
  }

  private read(id: string, res: ServerResponse): void {
    const t = this.tasks.get(id);
    if (!t) return sendJson(res, 200, { request_id: randomUUID(), output: { task_id: id, task_status: 'UNKNOWN' } });
    const step = this.state(t);
    t.reads++;
    const [state, code, ...rest] = step.split(':');
    const out = (fields: Record<string, unknown>) =>
      sendJson(res, 200, {
        request_id: randomUUID(),
        output: { task_id: id, submit_time: '2026-11-27 10:00:00.000', ...fields },
      });
    if (state === 'pending') return out({ task_status: 'PENDING' });
    if (state === 'running') return out({ task_status: 'RUNNING' });
    if (state === 'canceled') return out({ task_status: 'CANCELED' });
    if (state === 'failed') return out({ task_status: 'FAILED', code, message: rest.join(':') });
    if (t.kind === 'video') {
      const file = `${id}.mp4`;
      t.files = [file];
      return out({ task_status: 'SUCCEEDED', video_url: this.oss(file), orig_prompt: '…' });
    }
    t.files = Array.from({ length: t.n }, (_, i) => `${id}-${i + 1}.png`);
    const results: Record<string, unknown>[] = t.files.map((f) => ({ url: this.oss(f), orig_prompt: '…' }));
    if (state === 'partial')
      results[0] = { code: 'DataInspectionFailed', message: 'Output data may contain inappropriate content.' };
    const failed = results.filter((r) => r.code).length;
    out({
      task_status: 'SUCCEEDED',
      results,
      task_metrics: { TOTAL: results.length, SUCCEEDED: results.length - failed, FAILED: failed },
    });
  }

  private cancel(id: string, res: ServerResponse): void {
    const t = this.tasks.get(id);
    if (!t || this.state(t) !== 'pending')
      return dsError(
        res,
        400,
        'UnsupportedOperation',
        'Failed to cancel the task, please confirm if the task is in PENDING status.',
      );
    t.canceled = true;
    sendJson(res, 200, { request_id: randomUUID() });
  }

  private oss(file: string): string {
    return `http://localhost:${this.port}/oss/${file}?Expires=1764300000&OSSAccessKeyId=LTAI-fake&Signature=${file.slice(0, 8)}`;
  }
}

/** What DashScope refuses with 400 InvalidParameter before creating a task. */
function invalidCreate(body: any, group: string): string | null {
  if (typeof body?.model !== 'string' || body.model === '') return 'Model not exist.';
  if (typeof body?.input?.prompt !== 'string') return 'Field required: input.prompt';
  const p = body.parameters ?? {};
  const model: string = body.model;
  if (group === 'video-generation') {
    const i2v = model.includes('-i2v');
    if (i2v && typeof body.input.img_url !== 'string') return 'Field required: input.img_url';
    if (i2v && p.resolution !== undefined && !['480P', '720P', '1080P'].includes(p.resolution))
      return `The resolution is invalid: ${p.resolution}`;
    if (!i2v && p.size !== undefined && !/^\d+\*\d+$/.test(p.size)) return `The size is invalid: ${p.size}`;
    if (p.duration !== undefined && (!Number.isInteger(p.duration) || p.duration < 2 || p.duration > 15))
      return `The duration is invalid: ${p.duration}`;
    return null;
  }
  if (group === 'image2image' && (!Array.isArray(body.input.images) || body.input.images.length < 1))
    return 'Field required: input.images';
  if (p.size !== undefined) {
    if (!/^\d+\*\d+$/.test(p.size)) return `The size is invalid: ${p.size}`;
    if (model.startsWith('qwen-image') && !QWEN_SIZES.includes(p.size))
      return `The size is not match the allowed size ${JSON.stringify(QWEN_SIZES)}`;
  }
  const maxN = model.startsWith('qwen-image') ? 1 : 4;
  if (p.n !== undefined && (!Number.isInteger(p.n) || p.n < 1 || p.n > maxN)) return `The n is invalid: ${p.n}`;
  return null;
}

function dsError(res: ServerResponse, status: number, code: string, message: string): void {
  sendJson(res, status, { request_id: randomUUID(), code, message });
}

export async function startFakeDashScope(): Promise<FakeDashScope> {
  return new FakeDashScope().start();
}
