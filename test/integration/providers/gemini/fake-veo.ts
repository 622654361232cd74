// A fake Gemini API Veo upstream for tests: one real HTTP server on 127.0.0.1 speaking the wire
// shapes Google documents, as @google/genai sends and reads them:
//   POST /v1beta/models/{model}:predictLongRunning   {instances: [{prompt, image?}], parameters}
//                                                    → {name: "models/{model}/operations/{id}"}
//   GET  /v1beta/models/{model}/operations/{id}      → the operation: {name} while it runs, then
//        {name, done: true, response: {generateVideoResponse: {generatedSamples: [{video: {uri}}]}}}
//        or {name, done: true, error: {code, message}} (google.rpc.Status, numeric code)
//   GET  /v1beta/files/{file}:download?alt=media     → 302 to its storage on another origin
//   GET  /storage/{file}.mp4 (on http://localhost:port) → the bytes, no key needed
// Errors carry Google's body {error: {code, message, status, details?}}; the key is checked in
// x-goog-api-key as Google does (missing: 403 PERMISSION_DENIED; wrong: 400 API_KEY_INVALID).
// Fault injection: error answers, delays, dropped connections, operations that fail, downloads that fail.
import { randomBytes } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { answerLater, FakeServer, readBody, sendJson } from '../../../support/fake-server.js';

export interface VeoRecorded {
  n: number;
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: any;
  at: number;
}

/** How a create, operation read or download is answered. */
export type VeoFault =
  | { kind: 'ok'; delayMs?: number }
  | { kind: 'error'; status: number; message: string; googleStatus?: string; details?: unknown[]; delayMs?: number }
  /** Destroys the socket once the request has arrived, without answering. */
  | { kind: 'drop'; delayMs?: number };

/**
 * What successive reads of one operation report: 'running', 'done' (a video uri), 'inline' (the
 * video's bytes in `encodedVideo`), 'filtered' (RAI filtered, no sample), 'error:<rpc code>:<message>'.
 * The last entry repeats.
 */
export type VeoScript = string[];

export const ok = (delayMs?: number): VeoFault => ({ kind: 'ok', ...(delayMs ? { delayMs } : {}) });
export const drop = (delayMs = 0): VeoFault => ({ kind: 'drop', delayMs });
export const fail = (status: number, message: string, extra: Partial<Extract<VeoFault, { kind: 'error' }>> = {}) =>
  ({ kind: 'error', status, message, ...extra }) as VeoFault;

const GOOGLE_STATUS: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  429: 'RESOURCE_EXHAUSTED',
  500: 'INTERNAL',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

interface Operation {
  name: string;
  script: VeoScript;
  reads: number;
  file: string;
}

const CREATE = /^\/v1beta\/models\/([^/:]+):predictLongRunning$/;
const OPERATION = /^\/v1beta\/(models\/[^/]+\/operations\/[^/]+)$/;
const DOWNLOAD = /^\/v1beta\/files\/([^/:]+):download$/;
const STORAGE = /^\/storage\/([^/]+)\.mp4$/;

export class FakeVeo extends FakeServer<VeoRecorded> {
  /** The video every finished operation serves. */
  video = Buffer.concat([Buffer.from('\x00\x00\x00\x18ftypmp42'), randomBytes(8192)]);
  /** When set, every /v1beta call must carry it in x-goog-api-key. */
  key: string | undefined;
  /** Picks a create's answer from its request (before the queue): tests running in parallel steer by prompt. */
  onCreate: ((call: VeoRecorded) => VeoFault | undefined) | undefined;
  /** Picks the script of a new operation from its create request; else `script`. */
  scriptFor: ((call: VeoRecorded) => VeoScript | undefined) | undefined;
  private script: VeoScript = ['running', 'done'];
  private createFaults: VeoFault[] = [];
  private readFaults: VeoFault[] = [];
  private downloadFaults: VeoFault[] = [];
  private readonly operations = new Map<string, Operation>();

  constructor() {
    super('fake veo');
  }

  enqueueCreate(...f: VeoFault[]): this {
    this.createFaults.push(...f);
    return this;
  }
  enqueueRead(...f: VeoFault[]): this {
    this.readFaults.push(...f);
    return this;
  }
  /** Answers for the next file downloads (the URI on the API host), in order; then the file. */
  enqueueDownload(...f: VeoFault[]): this {
    this.downloadFaults.push(...f);
    return this;
  }
  setScript(s: VeoScript): this {
    this.script = s;
    return this;
  }

  reset(): void {
    this.forget();
    this.createFaults = [];
    this.readFaults = [];
    this.downloadFaults = [];
    this.script = ['running', 'done'];
    this.key = undefined;
    this.onCreate = undefined;
    this.scriptFor = undefined;
  }

  creates(): VeoRecorded[] {
    return this.requests.filter((r) => r.method === 'POST' && CREATE.test(r.path));
  }
  reads(): VeoRecorded[] {
    return this.requests.filter((r) => r.method === 'GET' && OPERATION.test(r.path));
  }
  downloads(): VeoRecorded[] {
    return this.requests.filter((r) => DOWNLOAD.test(r.path));
  }
  storageGets(): VeoRecorded[] {
    return this.requests.filter((r) => STORAGE.test(r.path));
  }

  protected handle(req: IncomingMessage, res: ServerResponse): void {
    readBody(req, (_raw, body) => {
      const url = new URL(req.url ?? '/', 'http://fake');
      const call: VeoRecorded = {
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

  private route(call: VeoRecorded, res: ServerResponse): void {
    const { method, path } = call;
    let m = STORAGE.exec(path);
    if (method === 'GET' && m) {
      if (![...this.operations.values()].some((o) => o.file === m![1])) return googleError(res, 404, 'no such file');
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': this.video.length });
      return void res.end(this.video);
    }
    if (path.startsWith('/v1beta/') && !this.keyOk(call, res)) return;
    m = CREATE.exec(path);
    if (method === 'POST' && m) {
      const model = decodeURIComponent(m[1]);
      const f = this.onCreate?.(call) ?? this.createFaults.shift() ?? ok();
      return this.answer(f, res, () => this.create(call, model, res));
    }
    m = OPERATION.exec(path);
    if (method === 'GET' && m) return this.answer(this.readFaults.shift() ?? ok(), res, () => this.read(m![1], res));
    m = DOWNLOAD.exec(path);
    if (method === 'GET' && m) {
      const file = m[1];
      return this.answer(this.downloadFaults.shift() ?? ok(), res, () => {
        if (call.query.get('alt') !== 'media') return googleError(res, 400, 'alt=media is required');
        // Google's file URI answers with its storage's address: another origin, no key needed.
        res.writeHead(302, { location: `http://localhost:${this.port}/storage/${file}.mp4?sig=${file.slice(0, 6)}` });
        res.end();
      });
    }
    googleError(res, 404, `no route ${method} ${path}`);
  }

  /** Google's key check: a missing key is refused with 403, a wrong one with 400 API_KEY_INVALID. */
  private keyOk(call: VeoRecorded, res: ServerResponse): boolean {
    if (this.key === undefined) return true;
    const got = call.headers['x-goog-api-key'];
    if (got === this.key) return true;
    if (got === undefined) googleError(res, 403, "Method doesn't allow unregistered callers. Please use an API key.");
    else
      googleError(res, 400, 'API key not valid. Please pass a valid API key.', 'INVALID_ARGUMENT', [
        { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com' },
      ]);
    return false;
  }

  private answer(f: VeoFault, res: ServerResponse, then: () => void): void {
    answerLater(res, { delayMs: f.delayMs, drop: f.kind === 'drop' }, () => {
      if (f.kind === 'error') return googleError(res, f.status, f.message, f.googleStatus, f.details);
      then();
    });
  }

  /** Checks the request as Google's API would (the fields the SDK sends), then starts an operation. */
  private create(call: VeoRecorded, model: string, res: ServerResponse): void {
    const why = invalidCreate(call.body);
    if (why) return googleError(res, 400, why);
    const id = randomBytes(8).toString('hex');
    const name = `models/${model}/operations/${id}`;
    const script = this.scriptFor?.(call) ?? this.script;
    this.operations.set(name, { name, script, reads: 0, file: `f${id}` });
    sendJson(res, 200, { name }, {}, 'application/json; charset=UTF-8');
  }

  private read(name: string, res: ServerResponse): void {
    const op = this.operations.get(name);
    if (!op) return googleError(res, 404, `Operation ${name} not found.`);
    const step = op.script[Math.min(op.reads, op.script.length - 1)]!;
    op.reads++;
    const [state, code, ...rest] = step.split(':');
    const body = (extra: Record<string, unknown>) =>
      sendJson(res, 200, { name, ...extra }, {}, 'application/json; charset=UTF-8');
    if (state === 'running') return body({});
    if (state === 'error') return body({ done: true, error: { code: Number(code), message: rest.join(':') } });
    const response = (generateVideoResponse: unknown) => ({
      done: true,
      response: {
        '@type': 'type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse',
        generateVideoResponse,
      },
    });
    if (state === 'filtered')
      return body(
        response({ raiMediaFilteredCount: 1, raiMediaFilteredReasons: ['The prompt could not be submitted.'] }),
      );
    if (state === 'inline')
      return body(
        response({
          generatedSamples: [{ video: { encodedVideo: this.video.toString('base64'), encoding: 'video/mp4' } }],
        }),
      );
    body(
      response({
        generatedSamples: [{ video: { uri: `${this.baseUrl}/v1beta/files/${op.file}:download?alt=media` } }],
      }),
    );
  }
}

/** What Google refuses with 400 INVALID_ARGUMENT before starting an operation (fields as the SDK writes them). */
function invalidCreate(body: any): string | null {
  const inst = body?.instances;
  if (!Array.isArray(inst) || inst.length !== 1) return 'instances must hold exactly one instance';
  if (typeof inst[0]?.prompt !== 'string' || inst[0].prompt === '') return 'instances[0].prompt is required';
  const img = inst[0].image;
  if (img !== undefined) {
    if (typeof img?.bytesBase64Encoded !== 'string' || typeof img?.mimeType !== 'string')
      return 'instances[0].image needs bytesBase64Encoded and mimeType';
    if (Buffer.from(img.bytesBase64Encoded, 'base64').toString('base64') !== img.bytesBase64Encoded)
      return 'instances[0].image.bytesBase64Encoded is not base64';
  }
  const p = body?.parameters ?? {};
  if (p.durationSeconds !== undefined && !Number.isInteger(p.durationSeconds))
    return 'parameters.durationSeconds must be an integer';
  if (p.aspectRatio !== undefined && !['16:9', '9:16'].includes(p.aspectRatio))
    return `parameters.aspectRatio ${p.aspectRatio} is not supported`;
  if (p.resolution !== undefined && !['720p', '1080p', '4k'].includes(p.resolution))
    return `parameters.resolution ${p.resolution} is not supported`;
  return null;
}

function googleError(res: ServerResponse, status: number, message: string, googleStatus?: string, details?: unknown[]) {
  const error = { code: status, message, status: googleStatus ?? GOOGLE_STATUS[status] ?? 'UNKNOWN' };
  sendJson(res, status, { error: details ? { ...error, details } : error }, {}, 'application/json; charset=UTF-8');
}

export async function startFakeVeo(): Promise<FakeVeo> {
  return new FakeVeo().start();
}
