// A fake Replicate predictions API for tests: one real HTTP server on 127.0.0.1 speaking the wire
// shapes Replicate documents and its official clients send and read. Sources (read, not copied):
//   - HTTP API reference, https://replicate.com/docs/reference/http (predictions.create, .get,
//     .cancel; the prediction object: id, status starting|processing|succeeded|failed|canceled,
//     output (file URLs), error, logs, urls), and
//     https://replicate.com/docs/topics/predictions/create-a-prediction (async by default, `Prefer: wait`);
//   - https://replicate.com/changelog/2025-08-05-run-all-models-with-the-same-api-endpoint (owner/name,
//     owner/name:version and a bare 64-hex version id), .../2025-10-16-prediction-deadlines (`aborted`),
//     .../2024-05-01-improved-validation-for-api-prediction-payloads (422 with `invalid_fields`);
//   - github.com/replicate/replicate-javascript @2fd6f39: lib/predictions.js (routes and bodies),
//     index.js (`Authorization: Bearer`, retries of 429 and GET 5xx), lib/util.js (parseProgressFromLogs:
//     tqdm bars in `logs`), lib/identifier.js, index.test.ts (error bodies `{detail, status}` + Retry-After);
//   - github.com/replicate/replicate-python @0110c2c: replicate/exceptions.py (RFC 7807 problem
//     details: type, title, status, detail, instance);
//   - a 429 from Replicate as reported in nodetool-ai/nodetool#5196 (`{detail, status, retry_after}`).
// Routes:
//   POST /v1/models/{owner}/{name}/predictions {input}          → 201 prediction (status starting)
//   POST /v1/predictions {version, input}                       → 201 prediction
//   GET  /v1/predictions/{id}                                   → the prediction, one script step per read
//   POST /v1/predictions/{id}/cancel                            → the prediction, canceled
//   GET  /delivery/{id}/{file} on http://localhost:port         → the output bytes (another origin, no key)
// Fault injection: problem-details errors, delays, dropped connections, predictions that fail (a
// model error, a safety filter), never finish, are canceled or aborted; downloads that fail.
import { randomBytes } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { answerLater, FakeServer, readBody, sendJson } from '../../../support/fake-server.js';
import { TINY_PNG } from '../gemini/fake-gemini.js';

export interface ReplicateRecorded {
  n: number;
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: any;
  at: number;
}

export type ReplicateFault =
  | { kind: 'ok'; delayMs?: number }
  | { kind: 'error'; status: number; body: Record<string, unknown>; headers?: Record<string, string>; delayMs?: number }
  /** Destroys the socket once the request has arrived, without answering. */
  | { kind: 'drop'; delayMs?: number };

export const ok = (delayMs?: number): ReplicateFault => ({ kind: 'ok', ...(delayMs ? { delayMs } : {}) });
export const drop = (delayMs = 0): ReplicateFault => ({ kind: 'drop', delayMs });
/** An RFC 7807 answer as Replicate writes it. */
export const problem = (
  status: number,
  title: string,
  detail: string,
  extra: Record<string, unknown> = {},
  headers?: Record<string, string>,
): ReplicateFault => ({
  kind: 'error',
  status,
  body: { title, detail, status, ...extra },
  ...(headers ? { headers } : {}),
});

/**
 * What successive reads of one prediction report: 'starting', 'processing', 'processing:<pct>' (a
 * tqdm bar in `logs`), 'succeeded', 'failed:<error>', 'canceled', 'aborted'. The last step repeats.
 */
export type ReplicateScript = string[];

const ASPECT_RATIOS = ['1:1', '16:9', '9:16', '4:3', '3:4', '3:2', '2:3', '21:9', '9:21', '4:5', '5:4'];
const TOP_LEVEL = ['version', 'input', 'webhook', 'webhook_events_filter', 'stream'];
const CREATE_BY_MODEL = /^\/v1\/models\/([^/]+)\/([^/]+)\/predictions$/;
const PREDICTION = /^\/v1\/predictions\/([^/]+)$/;
const CANCEL = /^\/v1\/predictions\/([^/]+)\/cancel$/;
const DELIVERY = /^\/delivery\/([^/]+)\/([^/]+)$/;

interface Stored {
  id: string;
  model: string;
  version: string;
  input: Record<string, unknown>;
  script: ReplicateScript;
  reads: number;
  canceled: boolean;
  files: string[];
  video: boolean;
}

export class FakeReplicate extends FakeServer<ReplicateRecorded> {
  /** The bytes every video output serves; images serve a tiny PNG. */
  video = Buffer.concat([Buffer.from('\x00\x00\x00\x18ftypmp42'), randomBytes(4096)]);
  image = TINY_PNG;
  /** When set, every /v1 call must carry `Authorization: Bearer <key>`. */
  key: string | undefined;
  /** Input names a model takes (by owner/name): any other is refused 422, as a model's schema would. */
  schemas = new Map<string, string[]>();
  /** Picks a create's answer from its request (before the queue): parallel tests steer by prompt. */
  onCreate: ((call: ReplicateRecorded) => ReplicateFault | undefined) | undefined;
  scriptFor: ((call: ReplicateRecorded) => ReplicateScript | undefined) | undefined;
  private script: ReplicateScript = ['starting', 'processing:40', 'succeeded'];
  private createFaults: ReplicateFault[] = [];
  private readFaults: ReplicateFault[] = [];
  private downloadFaults: ReplicateFault[] = [];
  readonly predictions = new Map<string, Stored>();

  constructor() {
    super('fake replicate');
  }

  enqueueCreate(...f: ReplicateFault[]): this {
    this.createFaults.push(...f);
    return this;
  }
  enqueueRead(...f: ReplicateFault[]): this {
    this.readFaults.push(...f);
    return this;
  }
  enqueueDownload(...f: ReplicateFault[]): this {
    this.downloadFaults.push(...f);
    return this;
  }
  setScript(s: ReplicateScript): this {
    this.script = s;
    return this;
  }

  reset(): void {
    this.forget();
    this.predictions.clear();
    this.createFaults = [];
    this.readFaults = [];
    this.downloadFaults = [];
    this.script = ['starting', 'processing:40', 'succeeded'];
    this.key = undefined;
    this.onCreate = undefined;
    this.scriptFor = undefined;
  }

  creates(): ReplicateRecorded[] {
    return this.requests.filter(
      (r) => r.method === 'POST' && (CREATE_BY_MODEL.test(r.path) || r.path === '/v1/predictions'),
    );
  }
  reads(): ReplicateRecorded[] {
    return this.requests.filter((r) => r.method === 'GET' && PREDICTION.test(r.path));
  }
  cancels(): ReplicateRecorded[] {
    return this.requests.filter((r) => r.method === 'POST' && CANCEL.test(r.path));
  }
  downloads(): ReplicateRecorded[] {
    return this.requests.filter((r) => DELIVERY.test(r.path));
  }

  protected handle(req: IncomingMessage, res: ServerResponse): void {
    readBody(req, (_raw, body) => {
      const url = new URL(req.url ?? '/', 'http://fake');
      const call: ReplicateRecorded = {
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

  private route(call: ReplicateRecorded, res: ServerResponse): void {
    const { method, path } = call;
    let m = DELIVERY.exec(path);
    if (method === 'GET' && m) {
      const p = this.predictions.get(m[1]!);
      if (!p || !p.files.includes(m[2]!)) return sendProblem(res, 404, 'Not found', 'No such file.');
      return this.answer(this.downloadFaults.shift() ?? ok(), res, () => {
        const bytes = p.video ? this.video : this.image;
        res.writeHead(200, {
          'content-type': p.video ? 'video/mp4' : 'image/png',
          'content-length': bytes.length,
        });
        res.end(bytes);
      });
    }
    if (path.startsWith('/v1/') && !this.keyOk(call, res)) return;
    m = CREATE_BY_MODEL.exec(path);
    if (method === 'POST' && (m || path === '/v1/predictions')) {
      const f = this.onCreate?.(call) ?? this.createFaults.shift() ?? ok();
      return this.answer(f, res, () => this.create(call, m ? `${m[1]}/${m[2]}` : undefined, res));
    }
    m = CANCEL.exec(path);
    if (method === 'POST' && m) {
      const p = this.predictions.get(m[1]!);
      if (!p) return sendProblem(res, 404, 'Not found', 'The requested resource could not be found.');
      p.canceled = true;
      return sendJson(res, 200, this.view(p, 'canceled'));
    }
    m = PREDICTION.exec(path);
    if (method === 'GET' && m) return this.answer(this.readFaults.shift() ?? ok(), res, () => this.read(m![1]!, res));
    sendProblem(res, 404, 'Not found', `no route ${method} ${path}`);
  }

  /** Replicate's key check: a missing or unknown token is refused 401. */
  private keyOk(call: ReplicateRecorded, res: ServerResponse): boolean {
    if (this.key === undefined || call.headers.authorization === `Bearer ${this.key}`) return true;
    sendProblem(res, 401, 'Unauthenticated', 'You did not pass a valid authentication token');
    return false;
  }

  private answer(f: ReplicateFault, res: ServerResponse, then: () => void): void {
    answerLater(res, { delayMs: f.delayMs, drop: f.kind === 'drop' }, () => {
      if (f.kind === 'error') return sendJson(res, f.status, f.body, f.headers ?? {}, 'application/problem+json');
      then();
    });
  }

  /** Checks the body as Replicate does (top-level fields, the version, the model's inputs), then starts it. */
  private create(call: ReplicateRecorded, byModel: string | undefined, res: ServerResponse): void {
    const body = call.body;
    if (!body || typeof body !== 'object') return sendProblem(res, 400, 'Bad request', 'The body is not JSON.');
    const invalid: { type: string; field: string; description: string }[] = [];
    for (const k of Object.keys(body))
      if (!TOP_LEVEL.includes(k))
        invalid.push({
          type: 'additional_property_not_allowed',
          field: '',
          description: `Additional property ${k} is not allowed`,
        });
    if (!body.input || typeof body.input !== 'object')
      invalid.push({ type: 'required', field: '', description: 'input is required' });
    let model = byModel;
    if (!byModel) {
      const v = typeof body.version === 'string' ? body.version : '';
      const vm = /^(?:([^/:]+\/[^/:]+):)?([0-9a-f]{64})$/.exec(v) ?? (/^[^/:]+\/[^/:]+$/.test(v) ? [v, v, ''] : null);
      if (!vm) invalid.push({ type: 'required', field: 'version', description: 'version is required (a version id)' });
      model = vm?.[1] ?? 'unknown/model';
    } else if (body.version !== undefined)
      invalid.push({
        type: 'additional_property_not_allowed',
        field: '',
        description: 'Additional property version is not allowed',
      });
    const input = (body.input ?? {}) as Record<string, unknown>;
    const known = this.schemas.get(model!);
    for (const k of Object.keys(input))
      if (known && !known.includes(k))
        invalid.push({
          type: 'additional_property_not_allowed',
          field: 'input',
          description: `Additional property ${k} is not allowed`,
        });
    if (input.aspect_ratio !== undefined && !ASPECT_RATIOS.includes(String(input.aspect_ratio)))
      invalid.push({
        type: 'enum',
        field: 'input.aspect_ratio',
        description: `input.aspect_ratio must be one of the following: ${ASPECT_RATIOS.map((a) => `"${a}"`).join(', ')}`,
      });
    if (typeof input.prompt !== 'string' && (!known || known.includes('prompt')))
      invalid.push({ type: 'required', field: 'input', description: 'prompt is required' });
    if (invalid.length)
      return sendJson(
        res,
        422,
        {
          title: 'Input validation failed',
          detail: invalid.map((i) => `- ${i.field}: ${i.description}`).join('\n'),
          status: 422,
          invalid_fields: invalid,
        },
        {},
        'application/problem+json',
      );
    const id = randomBytes(13).toString('hex').slice(0, 26);
    const video = 'duration' in input;
    const count = typeof input.num_outputs === 'number' ? input.num_outputs : 1;
    const p: Stored = {
      id,
      model: model!,
      version: typeof body.version === 'string' ? body.version.slice(-64) : randomBytes(32).toString('hex'),
      input,
      script: this.scriptFor?.(call) ?? this.script,
      reads: 0,
      canceled: false,
      files: video ? ['output.mp4'] : Array.from({ length: count }, (_, i) => `out-${i}.png`),
      video,
    };
    this.predictions.set(id, p);
    sendJson(res, 201, this.view(p, 'starting'));
  }

  private read(id: string, res: ServerResponse): void {
    const p = this.predictions.get(id);
    if (!p) return sendProblem(res, 404, 'Not found', 'The requested resource could not be found.');
    if (p.canceled) return sendJson(res, 200, this.view(p, 'canceled'));
    const step = p.script[Math.min(p.reads, p.script.length - 1)]!;
    p.reads++;
    sendJson(res, 200, this.view(p, step));
  }

  /** The prediction object for one script step. */
  private view(p: Stored, step: string): Record<string, unknown> {
    const [state, ...rest] = step.split(':');
    const arg = rest.join(':');
    const urls = {
      get: `${this.baseUrl}/v1/predictions/${p.id}`,
      cancel: `${this.baseUrl}/v1/predictions/${p.id}/cancel`,
    };
    const delivery = (f: string) => `http://localhost:${this.port}/delivery/${p.id}/${f}`;
    const done = ['succeeded', 'failed', 'canceled', 'aborted'].includes(state!);
    const pct = state === 'processing' && arg ? Number(arg) : undefined;
    return {
      id: p.id,
      model: p.model,
      version: p.version,
      input: p.input,
      status: state,
      output: state === 'succeeded' ? (p.video ? delivery(p.files[0]!) : p.files.map(delivery)) : null,
      error: state === 'failed' ? arg || 'Prediction failed.' : null,
      logs:
        pct !== undefined
          ? `Using seed: 42\n${pct}%|${'█'.repeat(pct / 10)}${' '.repeat(10 - pct / 10)}| ${pct}/100 [00:01<00:02, 30.00it/s]`
          : state === 'starting'
            ? null
            : 'Using seed: 42',
      created_at: new Date().toISOString(),
      started_at: state === 'starting' ? null : new Date().toISOString(),
      completed_at: done ? new Date().toISOString() : null,
      ...(done ? { metrics: { predict_time: 1.5 } } : {}),
      urls,
    };
  }
}

function sendProblem(res: ServerResponse, status: number, title: string, detail: string): void {
  sendJson(res, status, { title, detail, status }, {}, 'application/problem+json');
}

export async function startFakeReplicate(): Promise<FakeReplicate> {
  return new FakeReplicate().start();
}
