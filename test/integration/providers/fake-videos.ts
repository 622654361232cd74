// A fake video upstream for tests: one real HTTP server on 127.0.0.1 speaking both OpenAI videos
// (POST /v1/videos, GET /v1/videos/{id}, GET /v1/videos/{id}/content) and a RunningHub-style
// workflow API (POST /task/openapi/{create,status,outputs,cancel}, files under /files/). It records every
// request and answers as programmed: create behaviours, per-job status scripts, fault injection.
import { randomBytes } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { answerLater, FakeServer, readBody, sendJson as json } from '../../support/fake-server.js';

export interface Recorded {
  n: number;
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: any;
  at: number;
  /** Creates: the id of the job (OpenAI video id or RunningHub taskId) it started. */
  jobId?: string;
}

/** How the next create (or check) call is answered. */
export type Fault =
  | { kind: 'ok'; delayMs?: number }
  | { kind: 'error'; status: number; message: string; delayMs?: number }
  /** RunningHub: HTTP 200 with a non-zero code of its own. */
  | { kind: 'envelope'; code: number; msg: string }
  /** Destroys the socket once the request has arrived, without answering. */
  | { kind: 'drop'; delayMs?: number };

/**
 * What successive status checks of one job report. OpenAI: 'queued', 'in_progress:<progress>',
 * 'completed', 'failed:<code>:<message>'. RunningHub: 'QUEUED', 'RUNNING', 'SUCCESS', 'FAILED:<reason>'.
 * The last entry repeats.
 */
export type Script = string[];

export const ok = (delayMs?: number): Fault => ({ kind: 'ok', ...(delayMs ? { delayMs } : {}) });
export const fail = (status: number, message: string): Fault => ({ kind: 'error', status, message });
export const drop = (delayMs = 0): Fault => ({ kind: 'drop', delayMs });
export const envelope = (code: number, msg: string): Fault => ({ kind: 'envelope', code, msg });

interface Job {
  id: string;
  script: Script;
  checks: number;
  outputs: { name: string; fileType: string }[];
}

export class FakeVideos extends FakeServer<Recorded> {
  /** Bytes of the finished video (OpenAI content and RunningHub mp4 outputs). */
  video = Buffer.concat([Buffer.from('\x00\x00\x00\x18ftypmp42'), randomBytes(4096)]);
  image = Buffer.from('fake-png-output');
  private createFaults: Fault[] = [];
  private checkFaults: Fault[] = [];
  private script: Script = ['queued', 'in_progress:40', 'completed'];
  private rhScript: Script = ['QUEUED', 'RUNNING', 'SUCCESS'];
  private rhOutputs = [
    { name: 'out.mp4', fileType: 'mp4' },
    { name: 'cover.png', fileType: 'png' },
  ];
  private readonly jobs = new Map<string, Job>();

  constructor() {
    super('fake videos');
  }

  protected handle(req: IncomingMessage, res: ServerResponse): void {
    readBody(req, (_raw, body) => {
      const url = new URL(req.url ?? '/', 'http://fake');
      const call: Recorded = {
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

  /** Answers for the next create calls (either API), in order; then `ok`. */
  enqueueCreate(...f: Fault[]): this {
    this.createFaults.push(...f);
    return this;
  }
  /** Answers for the next status checks (either API), in order; then the job's script. */
  enqueueCheck(...f: Fault[]): this {
    this.checkFaults.push(...f);
    return this;
  }
  /** The status script of OpenAI jobs created from now on. */
  setScript(s: Script): this {
    this.script = s;
    return this;
  }
  /** The status script and outputs of RunningHub tasks created from now on. */
  setWorkflow(s: Script, outputs = this.rhOutputs): this {
    this.rhScript = s;
    this.rhOutputs = outputs;
    return this;
  }

  reset(): void {
    this.forget();
    this.createFaults = [];
    this.checkFaults = [];
    this.script = ['queued', 'in_progress:40', 'completed'];
    this.rhScript = ['QUEUED', 'RUNNING', 'SUCCESS'];
    this.rhOutputs = [
      { name: 'out.mp4', fileType: 'mp4' },
      { name: 'cover.png', fileType: 'png' },
    ];
  }

  /** RunningHub cancel calls, in order. */
  cancels(): Recorded[] {
    return this.requests.filter((r) => r.method === 'POST' && r.path === '/task/openapi/cancel');
  }

  creates(): Recorded[] {
    return this.requests.filter(
      (r) => r.method === 'POST' && (r.path === '/v1/videos' || r.path === '/task/openapi/create'),
    );
  }

  private route(call: Recorded, res: ServerResponse): void {
    const { method, path } = call;
    if (method === 'POST' && path === '/v1/videos')
      return this.fault(this.createFaults, res, () => this.openaiCreate(call, res));
    let m = /^\/v1\/videos\/([^/]+)$/.exec(path);
    if (method === 'GET' && m) return this.fault(this.checkFaults, res, () => this.openaiRetrieve(m![1], res));
    m = /^\/v1\/videos\/([^/]+)\/content$/.exec(path);
    if (method === 'GET' && m) {
      if (!this.jobs.has(m[1])) return json(res, 404, { error: { message: 'no such video' } });
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': this.video.length });
      return void res.end(this.video);
    }
    if (method === 'POST' && path === '/task/openapi/create')
      return this.fault(this.createFaults, res, () => this.rhCreate(call, res));
    if (method === 'POST' && path === '/task/openapi/status')
      return this.fault(this.checkFaults, res, () => this.rhStatus(call, res));
    if (method === 'POST' && path === '/task/openapi/outputs') return this.rhOutputsOf(call, res);
    if (method === 'POST' && path === '/task/openapi/cancel') return this.rhCancel(call, res);
    m = /^\/files\/([^/]+)\/([^/]+)$/.exec(path);
    if (method === 'GET' && m) {
      const data = m[2].endsWith('.mp4') ? this.video : this.image;
      res.writeHead(200, {
        'content-type': m[2].endsWith('.mp4') ? 'video/mp4' : 'image/png',
        'content-length': data.length,
      });
      return void res.end(data);
    }
    json(res, 404, { error: { message: `no route ${method} ${path}` } });
  }

  private fault(queue: Fault[], res: ServerResponse, answer: () => void): void {
    const f = queue.shift() ?? ok();
    answerLater(res, { delayMs: 'delayMs' in f ? f.delayMs : undefined, drop: f.kind === 'drop' }, () => {
      if (f.kind === 'error') return json(res, f.status, { error: { message: f.message, type: 'fake_error' } });
      if (f.kind === 'envelope') return json(res, 200, { code: f.code, msg: f.msg, data: null });
      answer();
    });
  }

  private step(job: Job): string {
    const s = job.script[Math.min(job.checks, job.script.length - 1)];
    job.checks++;
    return s;
  }

  private openaiCreate(call: Recorded, res: ServerResponse): void {
    const id = `video_fake_${randomBytes(6).toString('hex')}`;
    call.jobId = id;
    this.jobs.set(id, { id, script: this.script, checks: 0, outputs: [] });
    json(res, 200, this.openaiVideo(id, 'queued', 0, call.body));
  }

  private openaiRetrieve(id: string, res: ServerResponse): void {
    const job = this.jobs.get(id);
    if (!job) return json(res, 404, { error: { message: 'no such video' } });
    const [status, a, ...rest] = this.step(job).split(':');
    if (status === 'failed')
      return json(res, 200, {
        ...this.openaiVideo(id, 'failed', 0),
        error: { code: a ?? 'video_generation_failed', message: rest.join(':') || 'the job failed' },
      });
    json(res, 200, this.openaiVideo(id, status, status === 'completed' ? 100 : Number(a ?? 0)));
  }

  private openaiVideo(id: string, status: string, progress: number, req: any = {}) {
    return {
      id,
      object: 'video',
      model: req?.model ?? 'sora-fake',
      status,
      progress,
      created_at: Math.floor(Date.now() / 1000),
      completed_at: null,
      expires_at: null,
      prompt: req?.prompt ?? null,
      seconds: req?.seconds ?? '4',
      size: req?.size ?? '720x1280',
      remixed_from_video_id: null,
      error: null,
    };
  }

  private rhCreate(call: Recorded, res: ServerResponse): void {
    const id = String(Date.now()) + randomBytes(3).readUIntBE(0, 3);
    call.jobId = id;
    this.jobs.set(id, { id, script: this.rhScript, checks: 0, outputs: this.rhOutputs });
    json(res, 200, {
      code: 0,
      msg: 'success',
      data: { taskId: id, taskStatus: 'QUEUED', clientId: 'c', netWssUrl: null, promptTips: '{}' },
    });
  }

  private rhStatus(call: Recorded, res: ServerResponse): void {
    const job = this.jobs.get(String(call.body?.taskId));
    if (!job) return json(res, 200, { code: 807, msg: 'TASK_NOT_FOUND', data: null });
    json(res, 200, { code: 0, msg: 'success', data: this.step(job).split(':')[0] });
  }

  /** A canceled task reports FAILED from then on, as RunningHub's do. */
  private rhCancel(call: Recorded, res: ServerResponse): void {
    const job = this.jobs.get(String(call.body?.taskId));
    if (!job) return json(res, 200, { code: 807, msg: 'TASK_NOT_FOUND', data: null });
    job.script = ['FAILED:canceled'];
    job.checks = 0;
    json(res, 200, { code: 0, msg: 'success', data: null });
  }

  private rhOutputsOf(call: Recorded, res: ServerResponse): void {
    const job = this.jobs.get(String(call.body?.taskId));
    if (!job) return json(res, 200, { code: 807, msg: 'TASK_NOT_FOUND', data: null });
    const last = job.script[Math.min(job.checks, job.script.length) - 1] ?? '';
    if (last.startsWith('FAILED'))
      return json(res, 200, {
        code: 805,
        msg: 'APIKEY_TASK_STATUS_ERROR',
        data: { failedReason: { exception_message: last.split(':').slice(1).join(':') || 'node failed' } },
      });
    if (last !== 'SUCCESS') return json(res, 200, { code: 804, msg: 'APIKEY_TASK_IS_RUNNING', data: null });
    json(res, 200, {
      code: 0,
      msg: 'success',
      data: job.outputs.map((o, i) => ({
        fileUrl: `${this.baseUrl}/files/${job.id}/${o.name}`,
        fileType: o.fileType,
        taskCostTime: '3',
        nodeId: String(9 + i),
      })),
    });
  }
}

export async function startFakeVideos(): Promise<FakeVideos> {
  return new FakeVideos().start();
}
