// A fake fal queue for tests: one real HTTP server on 127.0.0.1 speaking fal's queue protocol as
// its public references describe it and @fal-ai/client (fal-ai/fal-js) sends and reads it:
//   POST /{owner}/{app}[/{endpoint path}]            the app's input as JSON
//        → {request_id, status_url, response_url, cancel_url, status: "IN_QUEUE", queue_position}
//          (the three URLs name only owner/app: `fal-ai/flux/dev` is checked at fal-ai/flux/requests/…)
//   GET  /{owner}/{app}/requests/{id}/status         202 {status: IN_QUEUE, queue_position} or
//        {status: IN_PROGRESS, logs}; 200 {status: COMPLETED, logs, metrics} (with `error` and
//        `error_type` when the request failed)
//   GET  /{owner}/{app}/requests/{id}                the model's output (images[].url, video.url), or
//        the error the model answered (422 {detail: [{loc, msg, type}]}, content_policy_violation)
//   PUT  /{owner}/{app}/requests/{id}/cancel         202 CANCELLATION_REQUESTED, 400 ALREADY_COMPLETED,
//        404 NOT_FOUND
//   GET  /cdn/{file} on http://localhost:port        the output files (fal's CDN: another origin, no key)
// The key is checked in `Authorization: Key …`; errors carry fal's bodies: `{detail: string}`
// (request errors also `error_type` and X-Fal-Error-Type), `{detail: [...]}` for a 422.
// Fault injection: error answers, delays, connections dropped after the request arrived, answer
// URLs on another origin, requests that fail, are flagged, or never finish.
//
// Sources (read, not copied):
//   https://docs.fal.ai/model-endpoints/queue and https://fal.ai/docs/documentation/model-apis/queue
//   https://fal.ai/docs/api-reference/inference-api (status 202 while queued / running, 200 when
//     complete; "do not build these URLs yourself"), https://fal.ai/docs/inference-api/queue/result,
//     https://fal.ai/docs/inference-api/queue/cancel
//   https://fal.ai/docs/errors (model errors: 422 detail[] with loc/msg/type, content_policy_violation)
//   https://docs.fal.ai/documentation/model-apis/request-errors (detail + error_type, X-Fal-Error-Type)
//   github.com/fal-ai/fal-js libs/client/src/{queue.ts,request.ts,response.ts,retry.ts,config.ts}
//   github.com/fal-ai/fal issues #1112, #1147 (403 "User is locked. Reason: Exhausted balance …")
import { randomBytes, randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { answerLater, FakeServer, readBody, sendJson } from '../../../support/fake-server.js';
import { TINY_PNG } from '../gemini/fake-gemini.js';

export interface FalRecorded {
  n: number;
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: any;
  at: number;
}

export type FalFault =
  | { kind: 'ok'; delayMs?: number }
  | { kind: 'error'; status: number; body: unknown; headers?: Record<string, string>; delayMs?: number }
  /** Destroys the socket once the request has arrived, without answering. */
  | { kind: 'drop'; delayMs?: number };

export const ok = (delayMs?: number): FalFault => ({ kind: 'ok', ...(delayMs ? { delayMs } : {}) });
export const drop = (delayMs = 0): FalFault => ({ kind: 'drop', delayMs });
export const fail = (status: number, body: unknown, headers?: Record<string, string>): FalFault => ({
  kind: 'error',
  status,
  body,
  ...(headers ? { headers } : {}),
});

/** fal's answers, as its references and issues show them. */
export const BODIES = {
  unauthorized: { detail: 'No user found for Key ID and Secret' },
  balance: { detail: 'User is locked. Reason: Exhausted balance. Top up your balance at fal.ai/dashboard/billing.' },
  rateLimited: { detail: 'Rate limit exceeded. Too many concurrent requests.' },
  unavailable: {
    detail: 'No runner could be allocated to handle the request.',
    error_type: 'runner_scheduling_failure',
  },
  internal: { detail: 'Internal server error' },
  policy: {
    detail: [
      {
        loc: ['body', 'prompt'],
        msg: 'The content was flagged by a content checker.',
        type: 'content_policy_violation',
        url: 'https://docs.fal.ai/errors#content_policy_violation',
      },
    ],
  },
};

/**
 * What successive status reads of one request report: 'queued', 'running', 'done', 'nsfw' (done,
 * every image flagged by the safety checker), 'policy' (done; the result is the 422 content policy
 * error), 'failed:<error_type>' (COMPLETED with `error`), 'hold' (running while `holding` is set).
 * The last entry repeats.
 */
export type FalScript = string[];

interface FalRequest {
  id: string;
  app: string;
  video: boolean;
  input: any;
  script: FalScript;
  reads: number;
  outcome: string | null;
  canceled: boolean;
  file: string;
}

const REQUEST = /^\/([^/]+\/[^/]+)\/requests\/([^/]+)(\/status|\/cancel)?$/;
const CDN = /^\/cdn\/([a-f0-9]+)\.(png|mp4)$/;
const IMAGE_PRESETS = ['square_hd', 'square', 'portrait_4_3', 'portrait_16_9', 'landscape_4_3', 'landscape_16_9'];
const RATIOS = ['16:9', '9:16', '1:1', '4:3', '3:4', '21:9', '9:21'];
const RESOLUTIONS = ['480p', '580p', '720p', '1080p'];

export class FakeFal extends FakeServer<FalRecorded> {
  video = Buffer.concat([Buffer.from('\x00\x00\x00\x18ftypmp42'), randomBytes(4096)]);
  /** When set, every queue call must carry `Authorization: Key <key>`. */
  key: string | undefined;
  /** While set, a 'hold' step keeps the request IN_PROGRESS. */
  holding = false;
  /** Origin of the URLs the submit answers (fault: another host); the fake's own by default. */
  answerOrigin: string | undefined;
  onSubmit: ((call: FalRecorded) => FalFault | undefined) | undefined;
  scriptFor: ((call: FalRecorded) => FalScript | undefined) | undefined;
  private script: FalScript = ['queued', 'running', 'done'];
  private faults: Record<'submit' | 'status' | 'result' | 'cancel' | 'file', FalFault[]> = {
    submit: [],
    status: [],
    result: [],
    cancel: [],
    file: [],
  };
  private readonly jobs = new Map<string, FalRequest>();

  constructor() {
    super('fake fal');
  }

  enqueue(where: keyof FakeFal['faults'], ...f: FalFault[]): this {
    this.faults[where].push(...f);
    return this;
  }
  setScript(s: FalScript): this {
    this.script = s;
    return this;
  }
  reset(): void {
    this.forget();
    for (const k of Object.keys(this.faults) as (keyof FakeFal['faults'])[]) this.faults[k] = [];
    this.script = ['queued', 'running', 'done'];
    this.key = undefined;
    this.holding = false;
    this.answerOrigin = undefined;
    this.onSubmit = undefined;
    this.scriptFor = undefined;
  }

  /** The CDN's origin: the same server under another name, as fal's files live off the queue host. */
  get cdnOrigin(): string {
    return `http://localhost:${this.port}`;
  }

  submits(): FalRecorded[] {
    return this.requests.filter((r) => r.method === 'POST');
  }
  statusReads(): FalRecorded[] {
    return this.requests.filter((r) => r.method === 'GET' && r.path.endsWith('/status'));
  }
  resultReads(): FalRecorded[] {
    return this.requests.filter((r) => {
      const m = r.method === 'GET' ? REQUEST.exec(r.path) : null;
      return m !== null && m[3] === undefined;
    });
  }
  cancels(): FalRecorded[] {
    return this.requests.filter((r) => r.method === 'PUT');
  }
  files(): FalRecorded[] {
    return this.requests.filter((r) => CDN.test(r.path));
  }

  protected handle(req: IncomingMessage, res: ServerResponse): void {
    readBody(req, (_raw, body) => {
      const url = new URL(req.url ?? '/', 'http://fake');
      const call: FalRecorded = {
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

  private route(call: FalRecorded, res: ServerResponse): void {
    const { method, path } = call;
    const file = CDN.exec(path);
    if (method === 'GET' && file)
      return this.answer(this.faults.file.shift() ?? ok(), res, () => {
        const bytes = file[2] === 'mp4' ? this.video : TINY_PNG;
        res.writeHead(200, {
          'content-type': file[2] === 'mp4' ? 'video/mp4' : 'image/png',
          'content-length': bytes.length,
        });
        res.end(bytes);
      });
    if (!this.keyOk(call, res)) return;
    const m = REQUEST.exec(path);
    if (m) {
      const job = this.jobs.get(m[2]!);
      if (!job || job.app !== m[1]) return sendJson(res, 404, { detail: `Request ${m[2]} not found` });
      if (method === 'GET' && m[3] === '/status')
        return this.answer(this.faults.status.shift() ?? ok(), res, () => this.status(job, res));
      if (method === 'GET' && !m[3])
        return this.answer(this.faults.result.shift() ?? ok(), res, () => this.result(job, res));
      if (method === 'PUT' && m[3] === '/cancel')
        return this.answer(this.faults.cancel.shift() ?? ok(), res, () => {
          if (job.outcome !== null) return sendJson(res, 400, { status: 'ALREADY_COMPLETED' });
          job.canceled = true;
          sendJson(res, 202, { status: 'CANCELLATION_REQUESTED' });
        });
      return sendJson(res, 405, { detail: 'Method Not Allowed' });
    }
    const segments = path.split('/').filter(Boolean);
    if (method === 'POST' && segments.length >= 2) {
      const f = this.onSubmit?.(call) ?? this.faults.submit.shift() ?? ok();
      return this.answer(f, res, () => this.submit(call, segments, res));
    }
    sendJson(res, 404, { detail: `Application '${segments.slice(0, 2).join('/')}' not found` });
  }

  private keyOk(call: FalRecorded, res: ServerResponse): boolean {
    if (this.key === undefined || call.headers.authorization === `Key ${this.key}`) return true;
    sendJson(res, 401, BODIES.unauthorized);
    return false;
  }

  private answer(f: FalFault, res: ServerResponse, then: () => void): void {
    answerLater(res, { delayMs: f.delayMs, drop: f.kind === 'drop' }, () => {
      if (f.kind === 'error') return sendJson(res, f.status, f.body, f.headers ?? {});
      then();
    });
  }

  private submit(call: FalRecorded, segments: string[], res: ServerResponse): void {
    const app = segments.slice(0, 2).join('/');
    const video = segments.join('/').includes('video');
    const invalid = video ? invalidVideo(call.body) : invalidImage(call.body);
    if (invalid) return sendJson(res, 422, { detail: [invalid] });
    const id = randomUUID();
    const script = this.scriptFor?.(call) ?? this.script;
    this.jobs.set(id, {
      id,
      app,
      video,
      input: call.body,
      script,
      reads: 0,
      outcome: null,
      canceled: false,
      file: randomBytes(8).toString('hex'),
    });
    const base = `${this.answerOrigin ?? this.baseUrl}/${app}/requests/${id}`;
    sendJson(res, 200, {
      status: 'IN_QUEUE',
      request_id: id,
      response_url: base,
      status_url: `${base}/status`,
      cancel_url: `${base}/cancel`,
      queue_position: 0,
    });
  }

  private status(job: FalRequest, res: ServerResponse): void {
    const at = () => job.script[Math.min(job.reads, job.script.length - 1)]!;
    let step = at();
    // A 'hold' reports IN_PROGRESS without moving on while `holding`; released, the script goes on.
    if (step === 'hold' && !this.holding) {
      job.reads++;
      step = at();
    }
    if (step !== 'hold') job.reads++;
    const response_url = `${this.baseUrl}/${job.app}/requests/${job.id}`;
    if (step === 'queued') return sendJson(res, 202, { status: 'IN_QUEUE', queue_position: 2, response_url });
    if (step === 'running' || step === 'hold')
      return sendJson(res, 202, { status: 'IN_PROGRESS', logs: [], response_url });
    job.outcome = step;
    const [kind, errorType] = step.split(':');
    if (kind === 'failed')
      return sendJson(res, 200, {
        status: 'COMPLETED',
        logs: [],
        response_url,
        error: 'Request timed out',
        error_type: errorType,
      });
    sendJson(res, 200, { status: 'COMPLETED', logs: [], metrics: { inference_time: 0.42 }, response_url });
  }

  private result(job: FalRequest, res: ServerResponse): void {
    if (job.outcome === null) return sendJson(res, 400, { detail: 'Request is still in progress' });
    const [kind, errorType] = job.outcome.split(':');
    if (kind === 'failed')
      return sendJson(
        res,
        504,
        { detail: 'Request timed out', error_type: errorType },
        { 'x-fal-error-type': errorType! },
      );
    if (kind === 'policy') return sendJson(res, 422, BODIES.policy);
    if (job.video)
      return sendJson(res, 200, {
        video: {
          url: `${this.cdnOrigin}/cdn/${job.file}.mp4`,
          content_type: 'video/mp4',
          file_name: 'output.mp4',
          file_size: this.video.length,
        },
        seed: 42,
      });
    const n = job.input?.num_images ?? 1;
    sendJson(res, 200, {
      images: Array.from({ length: n }, (_, i) => ({
        url: `${this.cdnOrigin}/cdn/${job.file}${i}.png`,
        width: 1024,
        height: 1024,
        content_type: 'image/png',
      })),
      timings: { inference: 0.42 },
      seed: 42,
      has_nsfw_concepts: Array.from({ length: n }, () => kind === 'nsfw'),
      prompt: job.input?.prompt,
    });
  }
}

/** What an image app's input schema refuses (pydantic's 422 entry), as flux/dev's does. */
function invalidImage(b: any): object | null {
  if (typeof b?.prompt !== 'string' || b.prompt === '') return missing('prompt');
  const s = b.image_size;
  if (s !== undefined) {
    const pixels = (v: unknown) => Number.isInteger(v) && (v as number) > 0 && (v as number) <= 14142;
    if (typeof s === 'string' ? !IMAGE_PRESETS.includes(s) : !(pixels(s?.width) && pixels(s?.height)))
      return {
        loc: ['body', 'image_size'],
        msg: 'Input should be a valid ImageSize or one of the presets',
        type: 'value_error',
      };
  }
  if (b.num_images !== undefined && !(Number.isInteger(b.num_images) && b.num_images >= 1 && b.num_images <= 4))
    return { loc: ['body', 'num_images'], msg: 'Input should be less than or equal to 4', type: 'less_than_equal' };
  if (b.image_url !== undefined && !/^(https?:|data:image\/)/.test(String(b.image_url)))
    return { loc: ['body', 'image_url'], msg: 'Input should be a valid URL', type: 'url_parsing' };
  return null;
}

/** What a video app's input schema refuses (duration as a string, kling's and wan's enums). */
function invalidVideo(b: any): object | null {
  if (typeof b?.prompt !== 'string' || b.prompt === '') return missing('prompt');
  if (b.duration !== undefined && !['4', '5', '8', '10', '12'].includes(b.duration))
    return { loc: ['body', 'duration'], msg: "Input should be '5' or '10'", type: 'literal_error' };
  if (b.aspect_ratio !== undefined && !RATIOS.includes(b.aspect_ratio))
    return { loc: ['body', 'aspect_ratio'], msg: 'Input should be 16:9, 9:16 or 1:1', type: 'literal_error' };
  if (b.resolution !== undefined && !RESOLUTIONS.includes(b.resolution))
    return { loc: ['body', 'resolution'], msg: 'Input should be 480p, 720p or 1080p', type: 'literal_error' };
  return null;
}

const missing = (field: string) => ({ loc: ['body', field], msg: 'Field required', type: 'missing' });

export async function startFakeFal(): Promise<FakeFal> {
  return new FakeFal().start();
}
