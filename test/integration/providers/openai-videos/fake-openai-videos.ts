// A fake OpenAI videos upstream for tests: one real HTTP server on 127.0.0.1 speaking
//   POST /v1/videos                      {model, prompt, seconds, size, input_reference?} → the video object (queued)
//   GET  /v1/videos/{id}                 → the video object: queued, in_progress (progress), completed,
//                                          failed with error {code, message}
//   GET  /v1/videos/{id}/content         → the mp4 bytes (?variant=video)
// It records every request and answers as programmed: create faults, per-job status scripts.
// Errors are OpenAI's body {error: {message, type}} with its HTTP status.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  answerFault,
  fakeVideoBytes,
  FakeServer,
  ok,
  readRequest,
  scriptStep,
  sendJson as json,
  type Fault,
  type RecordedRequest,
} from '../../../support/fake-server.js';

export { drop, fail, ok, type Fault } from '../../../support/fake-server.js';

export interface Recorded extends RecordedRequest {
  /** Creates: the id of the video it started. */
  jobId?: string;
}

/**
 * What successive status checks of one video report: 'queued', 'in_progress:<progress>', 'completed',
 * 'failed:<code>:<message>'. The last entry repeats.
 */
export type Script = string[];

interface Job {
  id: string;
  script: Script;
  checks: number;
}

const DEFAULT_SCRIPT: Script = ['queued', 'in_progress:40', 'completed'];

export class FakeOpenAIVideos extends FakeServer<Recorded> {
  /** Bytes of the finished video. */
  video = fakeVideoBytes();
  private createFaults: Fault[] = [];
  private checkFaults: Fault[] = [];
  private script: Script = DEFAULT_SCRIPT;
  private readonly jobs = new Map<string, Job>();

  constructor() {
    super('fake openai videos');
  }

  protected handle(req: IncomingMessage, res: ServerResponse): void {
    readRequest(req, this.requests.length + 1, (call: Recorded) => {
      this.record(call);
      this.route(call, res);
    });
  }

  /** Answers for the next create calls, in order; then `ok`. */
  enqueueCreate(...f: Fault[]): this {
    this.createFaults.push(...f);
    return this;
  }
  /** Answers for the next status checks, in order; then the job's script. */
  enqueueCheck(...f: Fault[]): this {
    this.checkFaults.push(...f);
    return this;
  }
  /** The status script of videos created from now on. */
  setScript(s: Script): this {
    this.script = s;
    return this;
  }

  reset(): void {
    this.forget();
    this.createFaults = [];
    this.checkFaults = [];
    this.script = DEFAULT_SCRIPT;
  }

  creates(): Recorded[] {
    return this.requests.filter((r) => r.method === 'POST' && r.path === '/v1/videos');
  }

  private route(call: Recorded, res: ServerResponse): void {
    const { method, path } = call;
    const error = (status: number, message: string) => json(res, status, { error: { message, type: 'fake_error' } });
    if (method === 'POST' && path === '/v1/videos')
      return answerFault(res, this.createFaults.shift() ?? ok(), error, () => this.create(call, res));
    let m = /^\/v1\/videos\/([^/]+)$/.exec(path);
    if (method === 'GET' && m)
      return answerFault(res, this.checkFaults.shift() ?? ok(), error, () => this.retrieve(m![1]!, res));
    m = /^\/v1\/videos\/([^/]+)\/content$/.exec(path);
    if (method === 'GET' && m) {
      if (!this.jobs.has(m[1]!)) return json(res, 404, { error: { message: 'no such video' } });
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': this.video.length });
      return void res.end(this.video);
    }
    json(res, 404, { error: { message: `no route ${method} ${path}` } });
  }

  private create(call: Recorded, res: ServerResponse): void {
    const id = `video_fake_${randomBytes(6).toString('hex')}`;
    call.jobId = id;
    this.jobs.set(id, { id, script: this.script, checks: 0 });
    json(res, 200, video(id, 'queued', 0, call.body));
  }

  private retrieve(id: string, res: ServerResponse): void {
    const job = this.jobs.get(id);
    if (!job) return json(res, 404, { error: { message: 'no such video' } });
    const [status, a, ...rest] = scriptStep(job.script, job.checks++).split(':');
    if (status === 'failed')
      return json(res, 200, {
        ...video(id, 'failed', 0),
        error: { code: a ?? 'video_generation_failed', message: rest.join(':') || 'the job failed' },
      });
    json(res, 200, video(id, status!, status === 'completed' ? 100 : Number(a ?? 0)));
  }
}

function video(id: string, status: string, progress: number, req: any = {}) {
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

export async function startFakeOpenAIVideos(): Promise<FakeOpenAIVideos> {
  return new FakeOpenAIVideos().start();
}
