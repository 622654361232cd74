// A fake MiniMax video API for tests: one real HTTP server on 127.0.0.1 speaking the Hailuo video
// protocol as MiniMax's public API reference documents it:
//   POST /v1/video_generation  {model, prompt, duration, resolution, first_frame_image?, prompt_optimizer?}
//        with `Authorization: Bearer <key>` → {task_id, base_resp: {status_code: 0, status_msg: "success"}}
//   GET  /v1/query/video_generation?task_id= → {task_id, status: Preparing|Queueing|Processing|Success|Fail,
//        file_id (on Success), video_width, video_height, base_resp} (a failed task: status Fail and
//        base_resp naming why, e.g. 1026 / 1027 sensitive content)
//   GET  /v1/files/retrieve?file_id= → {file: {file_id, bytes, created_at, filename, purpose, download_url}, base_resp}
//   GET  /cdn/{file} → the video bytes (the signed download link, no key)
// MiniMax answers errors with HTTP 200 and a non-zero base_resp.status_code (1002 rate limit, 1004
// not authorized, 1008 insufficient balance, 1026 / 1027 sensitive content, 2013 invalid params,
// 1000 / 1001 / 1024 / 1033 server faults); there is no cancel call.
// Sources (read, not copied):
//   - https://platform.minimax.io/docs/api-reference/video-generation-intro (create → task_id,
//     query → file_id, files/retrieve → download)
//   - https://platform.minimax.io/docs/api-reference/video/generation/api/openapi.json and
//     https://platform.minimax.io/docs/api-reference/video-generation-query.md (QueryVideoGenerationTaskResp,
//     VideoProcessStatus, RetrieveFileResp)
//   - https://platform.minimax.io/docs/api-reference/errorcode.md (the status codes above)
//   - github.com/MiniMax-AI/MiniMax-MCP minimax_mcp/client.py (base_resp checked on every answer, 1004)
//   - github.com/MiniMax-AI/cli src/sdk/video/index.ts (model rules: Hailuo-2.3-Fast needs an image;
//     polling and file download) and src/errors/api.ts (1026 / 1027 content filter)
//   - model limits: 768P 6 or 10 s, 1080P 6 s only, Hailuo-02 512P from an image, 01 series 720P 6 s
//     (platform.minimax.io text-to-video and image-to-video pages, as relayed by docs.fast-token.com)
import { randomBytes } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { answerLater, FakeServer, readBody, sendJson } from '../../../support/fake-server.js';

export interface MmRecorded {
  n: number;
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: any;
  at: number;
}

export type MmFault =
  | { kind: 'ok'; delayMs?: number }
  /** HTTP 200 with a non-zero base_resp: MiniMax's usual error answer. */
  | { kind: 'base'; code: number; message: string; delayMs?: number }
  /** A non-2xx (a gateway's), with MiniMax's body. */
  | { kind: 'http'; status: number; code: number; message: string; delayMs?: number }
  /** Destroys the socket once the request has arrived, without answering. */
  | { kind: 'drop'; delayMs?: number };

/** What successive queries of one task report: 'preparing', 'queueing', 'processing', 'success', 'fail:<code>:<msg>'. The last repeats. */
export type MmScript = string[];

export const ok = (delayMs?: number): MmFault => ({ kind: 'ok', ...(delayMs ? { delayMs } : {}) });
export const drop = (delayMs = 0): MmFault => ({ kind: 'drop', delayMs });
export const base = (code: number, message: string): MmFault => ({ kind: 'base', code, message });
export const httpFail = (status: number, code: number, message: string): MmFault => ({
  kind: 'http',
  status,
  code,
  message,
});

/** What each model renders (resolution → durations), and whether it takes text alone / an image. */
const MODELS: Record<string, { t2v: boolean; i2v: boolean; res: Record<string, number[]>; i2vRes?: string[] }> = {
  'MiniMax-Hailuo-2.3': { t2v: true, i2v: true, res: { '768P': [6, 10], '1080P': [6] } },
  'MiniMax-Hailuo-2.3-Fast': { t2v: false, i2v: true, res: { '768P': [6, 10], '1080P': [6] } },
  'MiniMax-Hailuo-02': {
    t2v: true,
    i2v: true,
    res: { '512P': [6, 10], '768P': [6, 10], '1080P': [6] },
    i2vRes: ['512P'],
  },
  'T2V-01': { t2v: true, i2v: false, res: { '720P': [6] } },
  'I2V-01': { t2v: false, i2v: true, res: { '720P': [6] } },
};

interface Task {
  id: string;
  script: MmScript;
  reads: number;
  fileId: string;
  width: number;
  height: number;
}

export class FakeMinimax extends FakeServer<MmRecorded> {
  video = Buffer.concat([Buffer.from('\x00\x00\x00\x18ftypmp42'), randomBytes(4096)]);
  /** When set, every /v1 call must carry it as a Bearer token (else base_resp 1004). */
  key: string | undefined;
  onCreate: ((call: MmRecorded) => MmFault | undefined) | undefined;
  scriptFor: ((call: MmRecorded) => MmScript | undefined) | undefined;
  private script: MmScript = ['queueing', 'processing', 'success'];
  private createFaults: MmFault[] = [];
  private readFaults: MmFault[] = [];
  private retrieveFaults: MmFault[] = [];
  private downloadFaults: MmFault[] = [];
  private readonly tasks = new Map<string, Task>();
  private next = 400000000000000;

  constructor() {
    super('fake minimax');
  }

  enqueueCreate(...f: MmFault[]): this {
    this.createFaults.push(...f);
    return this;
  }
  enqueueRead(...f: MmFault[]): this {
    this.readFaults.push(...f);
    return this;
  }
  enqueueRetrieve(...f: MmFault[]): this {
    this.retrieveFaults.push(...f);
    return this;
  }
  enqueueDownload(...f: MmFault[]): this {
    this.downloadFaults.push(...f);
    return this;
  }
  setScript(s: MmScript): this {
    this.script = s;
    return this;
  }

  reset(): void {
    this.forget();
    this.createFaults = [];
    this.readFaults = [];
    this.retrieveFaults = [];
    this.downloadFaults = [];
    this.script = ['queueing', 'processing', 'success'];
    this.key = undefined;
    this.onCreate = undefined;
    this.scriptFor = undefined;
  }

  creates(): MmRecorded[] {
    return this.requests.filter((r) => r.method === 'POST' && r.path === '/v1/video_generation');
  }
  reads(): MmRecorded[] {
    return this.requests.filter((r) => r.method === 'GET' && r.path === '/v1/query/video_generation');
  }
  retrieves(): MmRecorded[] {
    return this.requests.filter((r) => r.method === 'GET' && r.path === '/v1/files/retrieve');
  }
  downloads(): MmRecorded[] {
    return this.requests.filter((r) => r.path.startsWith('/cdn/'));
  }

  protected handle(req: IncomingMessage, res: ServerResponse): void {
    readBody(req, (_raw, body) => {
      const url = new URL(req.url ?? '/', 'http://fake');
      const call: MmRecorded = {
        n: this.requests.length + 1,
        method: req.method ?? '',
        path: url.pathname,
        query: url.searchParams,
        headers: req.headers,
        body,
        at: Date.now(),
      };
      this.record(call);
      this.route(call, res);
    });
  }

  private route(call: MmRecorded, res: ServerResponse): void {
    const { method, path } = call;
    if (method === 'GET' && path.startsWith('/cdn/')) {
      const file = path.slice('/cdn/'.length);
      return this.answer(this.downloadFaults.shift() ?? ok(), res, () => {
        if (![...this.tasks.values()].some((t) => `${t.fileId}.mp4` === file) || !call.query.get('Signature'))
          return void res.writeHead(403, { 'content-type': 'application/xml' }).end('<Error>AccessDenied</Error>');
        res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': this.video.length });
        res.end(this.video);
      });
    }
    if (path.startsWith('/v1/') && !this.keyOk(call, res)) return;
    if (method === 'POST' && path === '/v1/video_generation') {
      const f = this.onCreate?.(call) ?? this.createFaults.shift() ?? ok();
      return this.answer(f, res, () => this.create(call, res));
    }
    if (method === 'GET' && path === '/v1/query/video_generation')
      return this.answer(this.readFaults.shift() ?? ok(), res, () => this.read(call.query.get('task_id') ?? '', res));
    if (method === 'GET' && path === '/v1/files/retrieve')
      return this.answer(this.retrieveFaults.shift() ?? ok(), res, () =>
        this.retrieve(call.query.get('file_id') ?? '', res),
      );
    sendJson(res, 404, { base_resp: { status_code: 404, status_msg: `no route ${method} ${path}` } });
  }

  /** MiniMax answers a missing or wrong key with HTTP 200 and base_resp 1004. */
  private keyOk(call: MmRecorded, res: ServerResponse): boolean {
    if (this.key === undefined) return true;
    const got = call.headers.authorization;
    if (got === `Bearer ${this.key}`) return true;
    mmError(
      res,
      1004,
      got
        ? 'token not match group'
        : "login fail: Please carry the API secret key in the 'Authorization' field of the request header",
    );
    return false;
  }

  private answer(f: MmFault, res: ServerResponse, then: () => void): void {
    answerLater(res, { delayMs: f.delayMs, drop: f.kind === 'drop' }, () => {
      if (f.kind === 'base') return mmError(res, f.code, f.message);
      if (f.kind === 'http') return mmError(res, f.code, f.message, f.status);
      then();
    });
  }

  private create(call: MmRecorded, res: ServerResponse): void {
    const why = invalidCreate(call.body);
    if (why) return mmError(res, 2013, `invalid params, ${why}`);
    const id = String(this.next++);
    const [w, h] = dims(call.body.resolution ?? Object.keys(MODELS[call.body.model]!.res)[0]!);
    const script = this.scriptFor?.(call) ?? this.script;
    this.tasks.set(id, { id, script, reads: 0, fileId: String(this.next++), width: w, height: h });
    sendJson(res, 200, { task_id: id, base_resp: { status_code: 0, status_msg: 'success' } });
  }

  private read(id: string, res: ServerResponse): void {
    const t = this.tasks.get(id);
    if (!t) return mmError(res, 2013, 'invalid params, task_id not found');
    const step = t.script[Math.min(t.reads, t.script.length - 1)]!;
    t.reads++;
    const [state, code, ...rest] = step.split(':');
    const ok = { status_code: 0, status_msg: 'success' };
    const answer = (status: string, extra: Record<string, unknown> = {}, baseResp: object = ok) =>
      sendJson(res, 200, {
        task_id: id,
        status,
        file_id: '',
        video_width: 0,
        video_height: 0,
        ...extra,
        base_resp: baseResp,
      });
    if (state === 'preparing') return answer('Preparing');
    if (state === 'queueing') return answer('Queueing');
    if (state === 'processing') return answer('Processing');
    if (state === 'fail') return answer('Fail', {}, { status_code: Number(code), status_msg: rest.join(':') });
    answer('Success', { file_id: t.fileId, video_width: t.width, video_height: t.height });
  }

  private retrieve(fileId: string, res: ServerResponse): void {
    const t = [...this.tasks.values()].find((x) => x.fileId === fileId && x.reads > 0);
    if (!t) return mmError(res, 2013, 'invalid params, file_id not found');
    sendJson(res, 200, {
      file: {
        file_id: Number(fileId),
        bytes: this.video.length,
        created_at: 1764300000,
        filename: 'output.mp4',
        purpose: 'video_generation',
        download_url: `http://localhost:${this.port}/cdn/${fileId}.mp4?Expires=1764332400&Signature=${fileId.slice(-6)}`,
      },
      base_resp: { status_code: 0, status_msg: 'success' },
    });
  }
}

/** What MiniMax refuses with 2013 invalid params before creating a task. */
function invalidCreate(body: any): string | null {
  const m = MODELS[body?.model];
  if (!m) return `model ${String(body?.model)} not supported`;
  if (typeof body.prompt !== 'string' || body.prompt === '') return 'prompt is required';
  const image = body.first_frame_image;
  if (image !== undefined && (typeof image !== 'string' || !/^(https?:\/\/|data:image\/)/.test(image)))
    return 'invalid image url';
  if (image && !m.i2v) return `first_frame_image not supported by ${body.model}`;
  if (!image && !m.t2v) return `first_frame_image is required by ${body.model}`;
  const res = body.resolution ?? Object.keys(m.res)[0];
  const seconds = m.res[res];
  if (!seconds) return `resolution ${res} not supported by ${body.model}`;
  if (!image && m.i2vRes?.includes(res)) return `resolution ${res} needs first_frame_image`;
  const duration = body.duration ?? 6;
  if (!seconds.includes(duration)) return `duration ${duration} not supported at ${res}`;
  return null;
}

function dims(resolution: string): [number, number] {
  return resolution === '1080P'
    ? [1920, 1080]
    : resolution === '768P'
      ? [1366, 768]
      : resolution === '512P'
        ? [912, 512]
        : [1280, 720];
}

function mmError(res: ServerResponse, code: number, message: string, status = 200): void {
  sendJson(res, status, { base_resp: { status_code: code, status_msg: message } });
}

export async function startFakeMinimax(): Promise<FakeMinimax> {
  return new FakeMinimax().start();
}
