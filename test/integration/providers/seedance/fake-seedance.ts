// A fake Seedance (Volcengine Ark / BytePlus ModelArk content generation) for tests: one real HTTP
// server on 127.0.0.1 speaking the video-generation task API as its reference documents it and the
// official SDK sends and reads it:
//   POST   /api/v3/contents/generations/tasks  `Authorization: Bearer <ARK_API_KEY>`,
//          {model, content: [{type: "text", text}, {type: "image_url", image_url: {url}, role?}],
//           ratio?, resolution?, duration?, seed?, watermark?, …} → {id: "cgt-<yyyymmddhhmmss>-<5>"}
//   GET    /api/v3/contents/generations/tasks/{id} → {id, model, status: queued | running |
//          succeeded | failed | cancelled | expired, content: {video_url}, error: null | {code,
//          message}, ratio, resolution, duration, framespersecond, usage, created_at, updated_at}
//   DELETE /api/v3/contents/generations/tasks/{id} → cancels a queued task (it reports cancelled);
//          a running one is refused (400); a finished one's record is deleted
//   GET    /tos/{file} → the video bytes (the signed object-storage link, no key)
// Errors are Ark's body {error: {code, message, param, type}} with its HTTP status.
// Sources (read, not copied):
//   - Volcengine Ark "创建视频生成任务 API" (docs 82379/1520757) and "查询视频生成任务 API" (82379/1521309),
//     as mirrored in github.com/InteraqtDev/interaqt-app-boilerplate
//     integrations/docs/volcengine/fangzhou/videogen/{create-task-api,query-video-generation-task-api}.md
//     (content items and roles first_frame / last_frame / reference_image, ratio 16:9 4:3 1:1 3:4
//     9:16 21:9 adaptive keep_ratio, resolution 480p 720p 1080p, duration 2 to 12 s for Seedance 1.0,
//     statuses; only a queued task can be cancelled; video_url cleared after 24 h)
//   - Ark "取消或删除视频生成任务" (82379/1521720): DELETE cancels queued, refuses running, deletes finished
//   - BytePlus ModelArk "Error codes" (docs.byteplus.com/en/docs/ModelArk/1299023) and Ark's 错误码:
//     400 MissingParameter / InvalidParameter / InputTextSensitiveContentDetected /
//     InputImageSensitiveContentDetected, 401 AuthenticationError, 403 AccountOverdueError /
//     AccessDenied, 429 RateLimitExceeded.EndpointRPMExceeded / QuotaExceeded / SetLimitExceeded /
//     ServerOverloaded, 500 InternalServiceError; task errors such as OutputVideoSensitiveContentDetected
//   - github.com/volcengine/volcengine-python-sdk volcenginesdkarkruntime/resources/content_generation/
//     tasks.py (create sends ratio, resolution, duration, seed, watermark … as body fields; get, delete
//     at /contents/generations/tasks/{id}) and types/content_generation/content_generation_task.py
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  answerLater,
  fakeVideoBytes,
  FakeServer,
  readRequest,
  scriptStep,
  sendJson,
  type RecordedRequest,
} from '../../../support/fake-server.js';

export type SdFault =
  | { kind: 'ok'; delayMs?: number }
  | { kind: 'error'; status: number; code: string; message: string; param?: string; delayMs?: number }
  /** Destroys the socket once the request has arrived, without answering. */
  | { kind: 'drop'; delayMs?: number };

/**
 * What successive queries of one task report: 'queued', 'running', 'succeeded', 'expired',
 * 'failed:<code>:<message>'. The last entry repeats.
 */
export type SdScript = string[];

export const ok = (delayMs?: number): SdFault => ({ kind: 'ok', ...(delayMs ? { delayMs } : {}) });
export const drop = (delayMs = 0): SdFault => ({ kind: 'drop', delayMs });
export const fail = (status: number, code: string, message: string, param?: string): SdFault => ({
  kind: 'error',
  status,
  code,
  message,
  ...(param ? { param } : {}),
});

const TASKS = '/api/v3/contents/generations/tasks';
const TASK = /^\/api\/v3\/contents\/generations\/tasks\/([^/]+)$/;
const TOS = /^\/tos\/([^/]+)$/;
const RATIOS = ['16:9', '4:3', '1:1', '3:4', '9:16', '21:9', 'adaptive', 'keep_ratio'];
const RESOLUTIONS = ['480p', '720p', '1080p'];
const ROLES = ['first_frame', 'last_frame', 'reference_image'];

interface Task {
  id: string;
  model: string;
  body: any;
  script: SdScript;
  reads: number;
  cancelled: boolean;
  deleted: boolean;
  createdAt: number;
}

export class FakeSeedance extends FakeServer<RecordedRequest> {
  video = fakeVideoBytes();
  /** When set, every /api/v3 call must carry it as a Bearer token. */
  key: string | undefined;
  onCreate: ((call: RecordedRequest) => SdFault | undefined) | undefined;
  scriptFor: ((call: RecordedRequest) => SdScript | undefined) | undefined;
  private script: SdScript = ['queued', 'running', 'succeeded'];
  private createFaults: SdFault[] = [];
  private readFaults: SdFault[] = [];
  private downloadFaults: SdFault[] = [];
  private readonly tasks = new Map<string, Task>();

  constructor() {
    super('fake seedance');
  }

  enqueueCreate(...f: SdFault[]): this {
    this.createFaults.push(...f);
    return this;
  }
  enqueueRead(...f: SdFault[]): this {
    this.readFaults.push(...f);
    return this;
  }
  enqueueDownload(...f: SdFault[]): this {
    this.downloadFaults.push(...f);
    return this;
  }
  /** The status script of tasks created from now on (the array is read live: a test may push to it). */
  setScript(s: SdScript): this {
    this.script = s;
    return this;
  }

  reset(): void {
    this.forget();
    this.createFaults = [];
    this.readFaults = [];
    this.downloadFaults = [];
    this.script = ['queued', 'running', 'succeeded'];
    this.key = undefined;
    this.onCreate = undefined;
    this.scriptFor = undefined;
  }

  creates(): RecordedRequest[] {
    return this.requests.filter((r) => r.method === 'POST' && r.path === TASKS);
  }
  reads(): RecordedRequest[] {
    return this.requests.filter((r) => r.method === 'GET' && TASK.test(r.path));
  }
  cancels(): RecordedRequest[] {
    return this.requests.filter((r) => r.method === 'DELETE' && TASK.test(r.path));
  }
  downloads(): RecordedRequest[] {
    return this.requests.filter((r) => TOS.test(r.path));
  }

  protected handle(req: IncomingMessage, res: ServerResponse): void {
    readRequest(req, this.requests.length + 1, (call) => {
      this.record(call);
      this.route(call, res);
    });
  }

  private route(call: RecordedRequest, res: ServerResponse): void {
    const { method, path } = call;
    let m = TOS.exec(path);
    if (method === 'GET' && m) {
      const file = m[1]!;
      return this.answer(this.downloadFaults.shift() ?? ok(), res, () => {
        if (![...this.tasks.values()].some((t) => `${t.id}.mp4` === file))
          return void res
            .writeHead(404, { 'content-type': 'application/xml' })
            .end('<Error><Code>NoSuchKey</Code></Error>');
        res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': this.video.length });
        res.end(this.video);
      });
    }
    if (path.startsWith('/api/v3/') && !this.keyOk(call, res)) return;
    if (method === 'POST' && path === TASKS) {
      const f = this.onCreate?.(call) ?? this.createFaults.shift() ?? ok();
      return this.answer(f, res, () => this.create(call, res));
    }
    m = TASK.exec(path);
    if (method === 'GET' && m) return this.answer(this.readFaults.shift() ?? ok(), res, () => this.read(m![1]!, res));
    if (method === 'DELETE' && m) return this.cancel(m[1]!, res);
    arkError(res, 404, 'NotFound', `no route ${method} ${path}`);
  }

  /** Ark answers a missing or wrong key with 401 AuthenticationError. */
  private keyOk(call: RecordedRequest, res: ServerResponse): boolean {
    if (this.key === undefined || call.headers.authorization === `Bearer ${this.key}`) return true;
    arkError(res, 401, 'AuthenticationError', 'The API key or AK/SK in the request is missing or invalid.');
    return false;
  }

  private answer(f: SdFault, res: ServerResponse, then: () => void): void {
    answerLater(res, { delayMs: f.delayMs, drop: f.kind === 'drop' }, () => {
      if (f.kind === 'error') return arkError(res, f.status, f.code, f.message, f.param);
      then();
    });
  }

  private create(call: RecordedRequest, res: ServerResponse): void {
    const why = invalidCreate(call.body);
    if (why) return arkError(res, 400, why.code, why.message, why.param);
    const stamp = new Date().toISOString().replace(/\D/g, '').slice(0, 14);
    const id = `cgt-${stamp}-${randomBytes(3).toString('hex').slice(0, 5)}`;
    const script = this.scriptFor?.(call) ?? this.script;
    this.tasks.set(id, {
      id,
      model: call.body.model,
      body: call.body,
      script,
      reads: 0,
      cancelled: false,
      deleted: false,
      createdAt: Math.floor(Date.now() / 1000),
    });
    sendJson(res, 200, { id });
  }

  private state(t: Task): string {
    return t.cancelled ? 'cancelled' : scriptStep(t.script, t.reads);
  }

  private read(id: string, res: ServerResponse): void {
    const t = this.tasks.get(id);
    if (!t || t.deleted) return arkError(res, 404, 'NotFound.TaskId', `The specified task ${id} is not found.`);
    const [status, code, ...rest] = this.state(t).split(':');
    t.reads++;
    const failed = status === 'failed' ? { code, message: rest.join(':') } : null;
    sendJson(res, 200, {
      id,
      model: t.model,
      status,
      error: failed,
      ...(status === 'succeeded' ? { content: { video_url: this.tos(`${id}.mp4`) } } : {}),
      seed: 10,
      resolution: t.body.resolution ?? '720p',
      ratio: t.body.ratio ?? '16:9',
      duration: t.body.duration ?? 5,
      framespersecond: 24,
      usage: { completion_tokens: 108900, total_tokens: 108900 },
      created_at: t.createdAt,
      updated_at: Math.floor(Date.now() / 1000),
    });
  }

  private cancel(id: string, res: ServerResponse): void {
    const t = this.tasks.get(id);
    if (!t || t.deleted) return arkError(res, 404, 'NotFound.TaskId', `The specified task ${id} is not found.`);
    const status = this.state(t).split(':')[0];
    if (status === 'queued') t.cancelled = true;
    else if (status === 'running')
      return arkError(res, 400, 'InvalidParameter', `The task ${id} is running and cannot be cancelled.`, 'id');
    else if (status !== 'cancelled') t.deleted = true;
    sendJson(res, 200, {});
  }

  private tos(file: string): string {
    return `http://localhost:${this.port}/tos/${file}?X-Tos-Algorithm=TOS4-HMAC-SHA256&X-Tos-Expires=86400&X-Tos-Signature=${file.slice(4, 12)}`;
  }
}

/** What Ark refuses with 400 before creating a task. */
function invalidCreate(body: any): { code: string; message: string; param?: string } | null {
  const bad = (param: string, message: string) => ({ code: 'InvalidParameter', message, param });
  if (typeof body?.model !== 'string' || body.model === '')
    return { code: 'MissingParameter', message: 'The request failed because it is missing model.', param: 'model' };
  if (!Array.isArray(body.content) || body.content.length === 0)
    return { code: 'MissingParameter', message: 'The request failed because it is missing content.', param: 'content' };
  const images = body.content.filter((c: any) => c?.type === 'image_url');
  if (body.content.some((c: any) => c?.type !== 'text' && c?.type !== 'image_url'))
    return bad('content.type', 'A parameter specified in the request is not valid: content.type');
  if (
    images.some((c: any) => typeof c.image_url?.url !== 'string' || (c.role !== undefined && !ROLES.includes(c.role)))
  )
    return bad('content.image_url', 'A parameter specified in the request is not valid: content.image_url');
  const model: string = body.model;
  if (model.includes('-t2v') && images.length > 0)
    return bad('content', `The model ${model} does not support image input.`);
  if (model.includes('-i2v') && images.length === 0)
    return { code: 'MissingParameter', message: `The model ${model} requires an image.`, param: 'content' };
  if (body.ratio !== undefined && !RATIOS.includes(body.ratio))
    return bad('ratio', `The ratio is invalid: ${body.ratio}`);
  if (body.resolution !== undefined && !RESOLUTIONS.includes(body.resolution))
    return bad('resolution', `The resolution is invalid: ${body.resolution}`);
  const d = body.duration;
  if (d !== undefined && (!Number.isInteger(d) || d < 2 || d > 15))
    return bad('duration', `The duration is invalid: ${d}`);
  return null;
}

function arkError(res: ServerResponse, status: number, code: string, message: string, param = ''): void {
  const type =
    status === 401
      ? 'Unauthorized'
      : status === 403
        ? 'Forbidden'
        : status === 429
          ? 'TooManyRequests'
          : status >= 500
            ? 'InternalServerError'
            : 'BadRequest';
  sendJson(res, status, {
    error: { code, message: `${message} Request id: 0217${randomBytes(8).toString('hex')}`, param, type },
  });
}

export async function startFakeSeedance(): Promise<FakeSeedance> {
  return new FakeSeedance().start();
}
