// A fake Kling (Kuaishou's official API, api-singapore.klingai.com) for tests: one real HTTP server
// on 127.0.0.1 speaking the video protocol as Kling's public API reference documents it:
//   POST /v1/videos/text2video   {model_name, prompt, negative_prompt?, duration "5"|"10",
//        aspect_ratio "16:9"|"9:16"|"1:1", mode "std"|"pro", external_task_id?, callback_url?}
//   POST /v1/videos/image2video  {model_name, image (URL or base64), prompt?, duration, mode, external_task_id?}
//        → {code: 0, message: "SUCCEED", request_id, data: {task_id, task_status: "submitted",
//           task_info: {external_task_id}, created_at, updated_at}}
//   GET  /v1/videos/{text2video|image2video}/{id}, where {id} is the task_id or the external_task_id
//        given at create ("choose one of the two query methods") → {code, message, request_id,
//        data: {task_id, task_status: submitted|processing|succeed|failed, task_status_msg,
//        task_info: {external_task_id}, task_result: {videos: [{id, url, duration}]}}};
//        an id it does not know answers 404 {code: 1203} (the requested resource does not exist)
//   GET  /cdn/{file} → the video bytes (the result link, no auth)
// Auth: `Authorization: Bearer <JWT>`, HS256 over {iss: access key, exp, nbf} signed with the secret
// key; the fake checks the signature and the times (1001 empty, 1002 invalid, 1003 not yet valid,
// 1004 expired). Errors are Kling's body {code, message, request_id} with the HTTP status of its
// error-code table. There is no cancel call in Kling's API, so the fake has none.
// Sources (read, not copied):
//   - app.klingai.com/global/dev/document-api/apiReference/commonInfo ("General Info": the JWT recipe,
//     the error-code table: 401/1000-1004, 429/1100-1102, 403/1103, 400/1200-1201, 404/1202-1203,
//     400/1300-1301, 429/1302-1304, 500/5000, 503/5001, 504/5002), seen through the copy at
//     m-macmini…/kling-api/pages/apiReference_commonInfo.html
//   - …/apiReference/model/textToVideo and imageToVideo (create and "Query Task (Single)" with
//     task_id or external_task_id; the create answer with task_info.external_task_id), copy at
//     …/kling-api/deep-pages/apiReference_model__textToVideo_sections.json
//   - …/apiReference/rateLimits (1303 "parallel task over resource pack limit": creates only)
//   - github.com/KwaiVGI/ComfyUI-KLingAI-API py/api/client.py, prediction.py, text2video.py
//     (Kuaishou's own client: JWT headers and payload, the query path `{create path}/{task_id}`,
//     statuses submitted/processing then succeed/failed, videos [{id, url, duration}])
//   - github.com/QuantumNous/new-api pull 2532 (a failed task's reason is task_status_msg; message stays "SUCCEED")
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { answerLater, FakeServer, readBody, sendJson } from '../../../support/fake-server.js';

export interface KlingRecorded {
  n: number;
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: any;
  at: number;
}

export type KlingFault =
  | { kind: 'ok'; delayMs?: number }
  | { kind: 'error'; status: number; code: number; message: string; delayMs?: number }
  /** Destroys the socket once the request has arrived; `create` also makes the task first. */
  | { kind: 'drop'; delayMs?: number; create?: boolean };

/** What successive queries of one task report: 'submitted', 'processing', 'succeed', 'failed:<message>'. The last repeats. */
export type KlingScript = string[];

export const ok = (delayMs?: number): KlingFault => ({ kind: 'ok', ...(delayMs ? { delayMs } : {}) });
/** A dropped connection; `create`: the task was made before the answer was lost. */
export const drop = (create = false, delayMs = 0): KlingFault => ({ kind: 'drop', delayMs, create });
export const fail = (status: number, code: number, message: string, delayMs?: number): KlingFault => ({
  kind: 'error',
  status,
  code,
  message,
  ...(delayMs ? { delayMs } : {}),
});

const CREATE = /^\/v1\/videos\/(text2video|image2video)$/;
const QUERY = /^\/v1\/videos\/(text2video|image2video)\/([^/]+)$/;
const CDN = /^\/cdn\/([^/]+)$/;

interface Task {
  id: string;
  kind: string;
  external?: string;
  script: KlingScript;
  reads: number;
  file: string;
  duration: string;
}

export class FakeKling extends FakeServer<KlingRecorded> {
  video = Buffer.concat([Buffer.from('\x00\x00\x00\x18ftypmp42'), randomBytes(4096)]);
  /** The account's access and secret keys: every /v1 call must carry a JWT they sign. */
  accessKey = 'AKfake0123';
  secretKey = 'SKfake-secret-4567';
  onCreate: ((call: KlingRecorded) => KlingFault | undefined) | undefined;
  scriptFor: ((call: KlingRecorded) => KlingScript | undefined) | undefined;
  /** A fault for every matching query (a lookup that keeps failing, say); undefined: the queue's next. */
  onQuery: ((call: KlingRecorded) => KlingFault | undefined) | undefined;
  private script: KlingScript = ['submitted', 'processing', 'succeed'];
  private createFaults: KlingFault[] = [];
  private readFaults: KlingFault[] = [];
  private downloadFaults: KlingFault[] = [];
  private readonly tasks = new Map<string, Task>();

  constructor() {
    super('fake kling');
  }

  enqueueCreate(...f: KlingFault[]): this {
    this.createFaults.push(...f);
    return this;
  }
  enqueueRead(...f: KlingFault[]): this {
    this.readFaults.push(...f);
    return this;
  }
  enqueueDownload(...f: KlingFault[]): this {
    this.downloadFaults.push(...f);
    return this;
  }
  setScript(s: KlingScript): this {
    this.script = s;
    return this;
  }

  reset(): void {
    this.forget();
    this.createFaults = [];
    this.readFaults = [];
    this.downloadFaults = [];
    this.script = ['submitted', 'processing', 'succeed'];
    this.onCreate = undefined;
    this.scriptFor = undefined;
    this.onQuery = undefined;
  }

  /** How many tasks Kling holds (since the fake started): a create it received makes one. */
  taskCount(): number {
    return this.tasks.size;
  }

  creates(): KlingRecorded[] {
    return this.requests.filter((r) => r.method === 'POST' && CREATE.test(r.path));
  }
  queries(): KlingRecorded[] {
    return this.requests.filter((r) => r.method === 'GET' && QUERY.test(r.path));
  }
  /** Queries by an external_task_id (Kiln's task id) rather than Kling's numeric task_id. */
  lookups(): KlingRecorded[] {
    return this.queries().filter((r) => !/\/\d+$/.test(r.path));
  }
  downloads(): KlingRecorded[] {
    return this.requests.filter((r) => CDN.test(r.path));
  }

  protected handle(req: IncomingMessage, res: ServerResponse): void {
    readBody(req, (_raw, body) => {
      const url = new URL(req.url ?? '/', 'http://fake');
      const call: KlingRecorded = {
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

  private route(call: KlingRecorded, res: ServerResponse): void {
    const { method, path } = call;
    let m = CDN.exec(path);
    if (method === 'GET' && m) {
      const file = m[1]!;
      return this.answer(this.downloadFaults.shift() ?? ok(), res, () => {
        if (![...this.tasks.values()].some((t) => t.file === file))
          return void res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
        res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': this.video.length });
        res.end(this.video);
      });
    }
    const authError = this.authError(call.headers.authorization);
    if (authError) return klingError(res, 401, authError[0], authError[1]);
    m = CREATE.exec(path);
    if (method === 'POST' && m) return this.create(call, m[1]!, res);
    m = QUERY.exec(path);
    if (method === 'GET' && m) {
      const f = this.onQuery?.(call) ?? this.readFaults.shift() ?? ok();
      return this.answer(f, res, () => this.query(m![1]!, decodeURIComponent(m![2]!), res));
    }
    klingError(res, 404, 1202, `no route ${method} ${path}`);
  }

  /** Kling's 1001-1004: the JWT is missing, badly signed (or for another key), not yet valid, expired. */
  private authError(header: string | undefined): [number, string] | undefined {
    if (!header) return [1001, 'Authorization is empty'];
    const token = /^Bearer (.+)$/.exec(header)?.[1];
    const parts = token?.split('.');
    if (!parts || parts.length !== 3) return [1002, 'Authorization is invalid'];
    const [h, p, sig] = parts as [string, string, string];
    const expected = createHmac('sha256', this.secretKey).update(`${h}.${p}`).digest('base64url');
    let payload: { iss?: string; exp?: number; nbf?: number };
    let head: { alg?: string };
    try {
      head = JSON.parse(Buffer.from(h, 'base64url').toString());
      payload = JSON.parse(Buffer.from(p, 'base64url').toString());
    } catch {
      return [1002, 'Authorization is invalid'];
    }
    if (head.alg !== 'HS256' || sig !== expected || payload.iss !== this.accessKey)
      return [1002, 'Authorization is invalid'];
    const now = Date.now() / 1000;
    if (typeof payload.nbf === 'number' && payload.nbf > now) return [1003, 'Authorization is not yet valid'];
    if (typeof payload.exp !== 'number' || payload.exp < now) return [1004, 'Authorization has expired'];
    return undefined;
  }

  private answer(f: KlingFault, res: ServerResponse, then: () => void): void {
    answerLater(res, { delayMs: f.delayMs, drop: f.kind === 'drop' }, () => {
      if (f.kind === 'error') return klingError(res, f.status, f.code, f.message);
      then();
    });
  }

  private make(call: KlingRecorded, kind: string): Task {
    const id = String(800_000_000_000_000_000n + BigInt(this.tasks.size + 1) * 7919n);
    const external = call.body?.external_task_id || undefined;
    const script = this.scriptFor?.(call) ?? this.script;
    const task: Task = {
      id,
      kind,
      ...(external ? { external } : {}),
      script,
      reads: 0,
      file: `${id}.mp4`,
      duration: String(call.body?.duration ?? '5'),
    };
    this.tasks.set(id, task);
    return task;
  }

  /**
   * A valid create becomes a task as soon as it arrives (before a delayed answer, which a killed
   * worker never reads); a dropped one only when the fault says Kling received it.
   */
  private create(call: KlingRecorded, kind: string, res: ServerResponse): void {
    const f = this.onCreate?.(call) ?? this.createFaults.shift() ?? ok();
    const why = invalidCreate(call.body, kind);
    const external = call.body?.external_task_id;
    // external_task_id is unique per account: the fake refuses a second create with the same one.
    const dup = external && this.byExternal(external) ? `external_task_id ${external} already exists` : null;
    const made =
      !why && !dup && (f.kind === 'ok' || (f.kind === 'drop' && f.create)) ? this.make(call, kind) : undefined;
    this.answer(f, res, () => {
      if (!made) return klingError(res, 400, 1201, why ?? dup ?? 'invalid request');
      const now = Date.now();
      sendJson(res, 200, {
        code: 0,
        message: 'SUCCEED',
        request_id: randomUUID(),
        data: {
          task_id: made.id,
          task_status: 'submitted',
          task_info: made.external ? { external_task_id: made.external } : {},
          created_at: now,
          updated_at: now,
        },
      });
    });
  }

  private byExternal(external: string): Task | undefined {
    return [...this.tasks.values()].find((t) => t.external === external);
  }

  private query(kind: string, id: string, res: ServerResponse): void {
    const t = this.tasks.get(id) ?? this.byExternal(id);
    if (!t || t.kind !== kind) return klingError(res, 404, 1203, 'task not found');
    const step = t.script[Math.min(t.reads, t.script.length - 1)]!;
    t.reads++;
    const [state, ...rest] = step.split(':');
    const data: Record<string, unknown> = {
      task_id: t.id,
      task_status: state,
      task_status_msg: state === 'failed' ? rest.join(':') : '',
      task_info: t.external ? { external_task_id: t.external } : {},
      created_at: 1_764_000_000_000,
      updated_at: Date.now(),
    };
    if (state === 'succeed')
      data.task_result = { videos: [{ id: `v-${t.id}`, url: this.cdn(t.file), duration: t.duration }] };
    sendJson(res, 200, { code: 0, message: 'SUCCEED', request_id: randomUUID(), data });
  }

  private cdn(file: string): string {
    return `http://localhost:${this.port}/cdn/${file}?x-kcdn-expires=1764300000`;
  }
}

/** What Kling refuses with 400 1201 (invalid parameters) before creating a task. */
function invalidCreate(body: any, kind: string): string | null {
  if (!body || typeof body !== 'object') return 'request body is not JSON';
  if (body.model_name !== undefined && typeof body.model_name !== 'string') return 'model_name is invalid';
  if (kind === 'text2video' && (typeof body.prompt !== 'string' || body.prompt === '')) return 'prompt is required';
  if (typeof body.prompt === 'string' && body.prompt.length > 2500) return 'prompt cannot exceed 2500 characters';
  if (kind === 'image2video' && (typeof body.image !== 'string' || body.image === '')) return 'image is required';
  if (body.duration !== undefined && !['5', '10'].includes(body.duration))
    return `duration is invalid: ${body.duration}`;
  if (body.mode !== undefined && !['std', 'pro'].includes(body.mode)) return `mode is invalid: ${body.mode}`;
  if (kind === 'text2video' && body.aspect_ratio !== undefined && !['16:9', '9:16', '1:1'].includes(body.aspect_ratio))
    return `aspect_ratio is invalid: ${body.aspect_ratio}`;
  return null;
}

function klingError(res: ServerResponse, status: number, code: number, message: string): void {
  sendJson(res, status, { code, message, request_id: randomUUID() });
}

export async function startFakeKling(): Promise<FakeKling> {
  return new FakeKling().start();
}
