// A fake Runway API for tests: one real HTTP server on 127.0.0.1 speaking the task protocol of API
// version 2024-11-06 as Runway's reference documents it and its official Node client sends it:
//   POST /v1/image_to_video  {model, promptImage, promptText?, ratio, duration?, seed?}  → 200 {id}
//   POST /v1/text_to_video   {model, promptText, ratio, duration?}                        → 200 {id}
//        both with `Authorization: Bearer <key>` and `X-Runway-Version: 2024-11-06`
//   GET  /v1/tasks/{id} → {id, createdAt, status: PENDING|THROTTLED|RUNNING (progress 0–1)|
//        SUCCEEDED (output: [url])|FAILED (failure, failureCode)|CANCELLED}; 404 {error} once deleted
//   DELETE /v1/tasks/{id} → 204 (a task not yet ended is canceled, an ended one deleted); 404 after
//   GET /cdn/{file} → the output bytes (a signed link, no key)
// Errors are `{error}` with the HTTP status (400 adds `issues`, each with the field's `path`); an
// account out of credits is a 400 "You do not have enough credits to run this task.".
// Sources (read, not copied):
//   - github.com/runwayml/sdk-node src/client.ts (Bearer auth, X-Runway-Version default 2024-11-06,
//     maxRetries and the injected fetch, retries on 408/409/429/5xx), src/resources/image-to-video.ts,
//     text-to-video.ts, tasks.ts (models, ratios, durations, task statuses, DELETE), src/core/error.ts
//   - Runway's OpenAPI document as mirrored in github.com/tryAGI/Runway src/libs/Runway/openapi.yaml
//     (task id UUIDs, 404/429 bodies `{error}`, DELETE 204 and "safe to ignore" 404s)
//   - https://docs.dev.runwayml.com/api-details/errors (400 inputs, 401 key, 429 limits,
//     502/503 shedding load, 504 overloaded), /errors/troubleshooting (a 400 names the field, e.g.
//     promptImage; only HTTPS URLs), /errors/task-failures/ (SAFETY.INPUT.*, SAFETY.OUTPUT.*,
//     INTERNAL.BAD_OUTPUT.*, do not retry SAFETY)
//   - github.com/runwayml/sdk-node issue #28 ("You do not have enough credits to run this task.")
import { randomBytes, randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { answerLater, FakeServer, readBody, sendJson } from '../../../support/fake-server.js';

export interface RwRecorded {
  n: number;
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: any;
  at: number;
}

export type RwFault =
  | { kind: 'ok'; delayMs?: number }
  | { kind: 'error'; status: number; body: unknown; headers?: Record<string, string>; delayMs?: number }
  /** Destroys the socket once the request has arrived, without answering. */
  | { kind: 'drop'; delayMs?: number };

/**
 * What successive reads of one task report: 'pending', 'throttled', 'running' or 'running:<0–1>',
 * 'succeeded', 'failed:<failureCode>:<failure>', 'cancelled'. The last entry repeats.
 */
export type RwScript = string[];

export const ok = (delayMs?: number): RwFault => ({ kind: 'ok', ...(delayMs ? { delayMs } : {}) });
export const drop = (delayMs = 0): RwFault => ({ kind: 'drop', delayMs });
export const fail = (status: number, body: unknown, headers?: Record<string, string>): RwFault => ({
  kind: 'error',
  status,
  body,
  ...(headers ? { headers } : {}),
});
/** Runway's answer to an account without credits. */
export const noCredits = (): RwFault => fail(400, { error: 'You do not have enough credits to run this task.' });
export const rateLimited = (retryAfter?: string): RwFault =>
  fail(
    429,
    { error: 'You have exceeded the rate limit for this endpoint.' },
    retryAfter ? { 'retry-after': retryAfter } : undefined,
  );

const CREATE = /^\/v1\/(image_to_video|text_to_video)$/;
const TASK = /^\/v1\/tasks\/([^/]+)$/;
const CDN = /^\/cdn\/([^/]+)$/;
const GEN4_I2V = ['1280:720', '720:1280', '1104:832', '832:1104', '960:960', '1584:672'];
const VEO = ['1280:720', '720:1280', '1080:1920', '1920:1080'];
/** The models the fake knows, as the reference lists them: ratios per call and durations. */
const MODELS: Record<string, { i2v?: string[]; t2v?: string[]; durations: number[] }> = {
  gen4_turbo: { i2v: GEN4_I2V, durations: [2, 3, 4, 5, 6, 7, 8, 9, 10] },
  'gen4.5': { i2v: GEN4_I2V, t2v: ['1280:720', '720:1280'], durations: [2, 3, 4, 5, 6, 7, 8, 9, 10] },
  'veo3.1': { i2v: VEO, t2v: VEO, durations: [4, 6, 8] },
};

interface Task {
  id: string;
  script: RwScript;
  reads: number;
  canceled: boolean;
  deleted: boolean;
  file: string;
  createdAt: string;
}

export class FakeRunway extends FakeServer<RwRecorded> {
  video = Buffer.concat([Buffer.from('\x00\x00\x00\x18ftypmp42'), randomBytes(4096)]);
  /** When set, every /v1 call must carry it as a Bearer token. */
  key: string | undefined;
  onCreate: ((call: RwRecorded) => RwFault | undefined) | undefined;
  scriptFor: ((call: RwRecorded) => RwScript | undefined) | undefined;
  private script: RwScript = ['pending', 'running:0.5', 'succeeded'];
  private createFaults: RwFault[] = [];
  private readFaults: RwFault[] = [];
  private downloadFaults: RwFault[] = [];
  private readonly tasks = new Map<string, Task>();

  constructor() {
    super('fake runway');
  }

  enqueueCreate(...f: RwFault[]): this {
    this.createFaults.push(...f);
    return this;
  }
  enqueueRead(...f: RwFault[]): this {
    this.readFaults.push(...f);
    return this;
  }
  enqueueDownload(...f: RwFault[]): this {
    this.downloadFaults.push(...f);
    return this;
  }
  setScript(s: RwScript): this {
    this.script = s;
    return this;
  }

  reset(): void {
    this.forget();
    this.createFaults = [];
    this.readFaults = [];
    this.downloadFaults = [];
    this.script = ['pending', 'running:0.5', 'succeeded'];
    this.key = undefined;
    this.onCreate = undefined;
    this.scriptFor = undefined;
  }

  creates(): RwRecorded[] {
    return this.requests.filter((r) => r.method === 'POST' && CREATE.test(r.path));
  }
  reads(): RwRecorded[] {
    return this.requests.filter((r) => r.method === 'GET' && TASK.test(r.path));
  }
  cancels(): RwRecorded[] {
    return this.requests.filter((r) => r.method === 'DELETE' && TASK.test(r.path));
  }
  downloads(): RwRecorded[] {
    return this.requests.filter((r) => CDN.test(r.path));
  }

  protected handle(req: IncomingMessage, res: ServerResponse): void {
    readBody(req, (_raw, body) => {
      const url = new URL(req.url ?? '/', 'http://fake');
      const call: RwRecorded = {
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

  private route(call: RwRecorded, res: ServerResponse): void {
    const { method, path } = call;
    let m = CDN.exec(path);
    if (method === 'GET' && m) {
      const file = m[1]!;
      return this.answer(this.downloadFaults.shift() ?? ok(), res, () => {
        if (![...this.tasks.values()].some((t) => t.file === file))
          return void res.writeHead(404, { 'content-type': 'text/plain' }).end('Not Found');
        res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': this.video.length });
        res.end(this.video);
      });
    }
    if (path.startsWith('/v1/') && !this.headersOk(call, res)) return;
    m = CREATE.exec(path);
    if (method === 'POST' && m) {
      const f = this.onCreate?.(call) ?? this.createFaults.shift() ?? ok();
      return this.answer(f, res, () => this.create(call, m![1]!, res));
    }
    m = TASK.exec(path);
    if (method === 'GET' && m) return this.answer(this.readFaults.shift() ?? ok(), res, () => this.read(m![1]!, res));
    if (method === 'DELETE' && m) return this.remove(m[1]!, res);
    if (m) return sendJson(res, 405, { error: 'Method not allowed' });
    sendJson(res, 404, { error: `Not found: ${method} ${path}` });
  }

  /** A missing or wrong key is a 401; a request without the version header a 400 naming it. */
  private headersOk(call: RwRecorded, res: ServerResponse): boolean {
    if (this.key !== undefined && call.headers.authorization !== `Bearer ${this.key}`) {
      sendJson(res, 401, { error: 'Invalid API key' });
      return false;
    }
    if (call.headers['x-runway-version'] !== '2024-11-06') {
      sendJson(res, 400, {
        error: 'Invalid API version',
        issues: [{ code: 'invalid_enum_value', path: ['X-Runway-Version'], message: 'Expected "2024-11-06"' }],
      });
      return false;
    }
    return true;
  }

  private answer(f: RwFault, res: ServerResponse, then: () => void): void {
    answerLater(res, { delayMs: f.delayMs, drop: f.kind === 'drop' }, () => {
      if (f.kind === 'error') return sendJson(res, f.status, f.body, f.headers ?? {});
      then();
    });
  }

  private create(call: RwRecorded, kind: string, res: ServerResponse): void {
    const issue = invalidCreate(call.body, kind === 'image_to_video');
    if (issue) return sendJson(res, 400, { error: 'Validation of body failed', issues: [issue] });
    const id = randomUUID();
    const script = this.scriptFor?.(call) ?? this.script;
    this.tasks.set(id, {
      id,
      script,
      reads: 0,
      canceled: false,
      deleted: false,
      file: `${id}.mp4`,
      createdAt: new Date().toISOString(),
    });
    sendJson(res, 200, { id });
  }

  private read(id: string, res: ServerResponse): void {
    const t = this.tasks.get(id);
    if (!t || t.deleted) return sendJson(res, 404, { error: 'Task not found' });
    const step = t.canceled ? 'cancelled' : t.script[Math.min(t.reads, t.script.length - 1)]!;
    t.reads++;
    const [state, a, ...rest] = step.split(':');
    const task = (fields: Record<string, unknown>) => sendJson(res, 200, { id, createdAt: t.createdAt, ...fields });
    if (state === 'pending') return task({ status: 'PENDING' });
    if (state === 'throttled') return task({ status: 'THROTTLED' });
    if (state === 'running') return task({ status: 'RUNNING', progress: a === undefined ? 0 : Number(a) });
    if (state === 'cancelled') return task({ status: 'CANCELLED' });
    if (state === 'failed') return task({ status: 'FAILED', failureCode: a, failure: rest.join(':') });
    task({ status: 'SUCCEEDED', output: [this.cdn(t.file)] });
  }

  private remove(id: string, res: ServerResponse): void {
    const t = this.tasks.get(id);
    if (!t || t.deleted) return sendJson(res, 404, { error: 'Task not found' });
    // A task not yet ended is canceled (its reads say so until it is gone); an ended one is deleted.
    const step = t.script[Math.min(t.reads, t.script.length - 1)]!;
    if (t.canceled || /^(succeeded|failed|cancelled)/.test(step)) t.deleted = true;
    else t.canceled = true;
    res.writeHead(204).end();
  }

  private cdn(file: string): string {
    return `http://localhost:${this.port}/cdn/${file}?_jwt=${randomBytes(12).toString('hex')}`;
  }
}

/** What Runway refuses with 400 before creating a task, as an `issues` entry naming the field. */
function invalidCreate(body: any, i2v: boolean): { code: string; path: string[]; message: string } | null {
  const issue = (path: string, message: string, code = 'invalid_type') => ({ code, path: [path], message });
  const spec = MODELS[body?.model];
  if (!spec) return issue('model', `Invalid model: ${String(body?.model)}`, 'invalid_union_discriminator');
  const ratios = i2v ? spec.i2v : spec.t2v;
  if (!ratios) return issue('model', `${body.model} is not available for this endpoint`, 'invalid_literal');
  if (i2v && (typeof body.promptImage !== 'string' || !/^(https:\/\/|data:image\/)/.test(body.promptImage)))
    return issue('promptImage', 'Only HTTPS URLs are allowed.', 'invalid_string');
  if (!i2v && (typeof body.promptText !== 'string' || body.promptText === '')) return issue('promptText', 'Required');
  if (typeof body.promptText === 'string' && body.promptText.length > 1000)
    return issue('promptText', 'String must contain at most 1000 character(s)', 'too_big');
  if (!ratios.includes(body.ratio))
    return issue('ratio', `Invalid enum value. Expected ${ratios.join(' | ')}`, 'invalid_enum_value');
  if (body.duration !== undefined && !spec.durations.includes(body.duration))
    return issue('duration', `Invalid duration: ${String(body.duration)}`, 'invalid_enum_value');
  return null;
}

export async function startFakeRunway(): Promise<FakeRunway> {
  return new FakeRunway().start();
}
