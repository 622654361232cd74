// A fake RunningHub-style workflow host for tests (the workflow-node provider): one real HTTP server
// on 127.0.0.1 speaking
//   POST /task/openapi/create   {apiKey, workflowId, nodeInfoList} → {code: 0, data: {taskId, taskStatus}}
//   POST /task/openapi/status   {apiKey, taskId} → {code: 0, data: QUEUED | RUNNING | SUCCESS | FAILED}
//   POST /task/openapi/outputs  {apiKey, taskId} → {code: 0, data: [{fileUrl, fileType, nodeId}]}, or
//                               804 (still running) / 805 (failed, with failedReason)
//   POST /task/openapi/cancel   {apiKey, taskId} → {code: 0}; the task reports FAILED from then on
//   GET  /files/{taskId}/{name} → an output's bytes
// Every answer is HTTP 200 with RunningHub's envelope {code, msg, data}; a code other than 0 is its
// error (a non-2xx answer is its gateway's). It records every request and answers as programmed: create faults, per-task status scripts.
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

export { drop, fail, ok } from '../../../support/fake-server.js';

export interface Recorded extends RecordedRequest {
  /** Creates: the taskId it started. */
  jobId?: string;
}

/** How the next create (or status check) is answered: a shared fault, or HTTP 200 with a non-zero code of RunningHub's. */
export type NodeFault = Fault | { kind: 'envelope'; code: number; msg: string };

export const envelope = (code: number, msg: string): NodeFault => ({ kind: 'envelope', code, msg });

/** What successive status checks of one task report: 'QUEUED', 'RUNNING', 'SUCCESS', 'FAILED:<reason>'. The last entry repeats. */
export type Script = string[];

interface Task {
  id: string;
  script: Script;
  checks: number;
  outputs: { name: string; fileType: string }[];
}

const DEFAULT_SCRIPT: Script = ['QUEUED', 'RUNNING', 'SUCCESS'];
const DEFAULT_OUTPUTS = [
  { name: 'out.mp4', fileType: 'mp4' },
  { name: 'cover.png', fileType: 'png' },
];
const NOT_FOUND = { code: 807, msg: 'TASK_NOT_FOUND', data: null };

export class FakeWorkflowNode extends FakeServer<Recorded> {
  /** Bytes of mp4 outputs. */
  video = fakeVideoBytes();
  /** Bytes of every other output. */
  image = Buffer.from('fake-png-output');
  private createFaults: NodeFault[] = [];
  private checkFaults: NodeFault[] = [];
  private script: Script = DEFAULT_SCRIPT;
  private outputs = DEFAULT_OUTPUTS;
  private readonly tasks = new Map<string, Task>();

  constructor() {
    super('fake workflow-node host');
  }

  protected handle(req: IncomingMessage, res: ServerResponse): void {
    readRequest(req, this.requests.length + 1, (call: Recorded) => {
      this.record(call);
      this.route(call, res);
    });
  }

  /** Answers for the next create calls, in order; then `ok`. */
  enqueueCreate(...f: NodeFault[]): this {
    this.createFaults.push(...f);
    return this;
  }
  /** Answers for the next status checks, in order; then the task's script. */
  enqueueCheck(...f: NodeFault[]): this {
    this.checkFaults.push(...f);
    return this;
  }
  /** The status script and outputs of tasks created from now on. */
  setWorkflow(s: Script, outputs = this.outputs): this {
    this.script = s;
    this.outputs = outputs;
    return this;
  }

  reset(): void {
    this.forget();
    this.createFaults = [];
    this.checkFaults = [];
    this.script = DEFAULT_SCRIPT;
    this.outputs = DEFAULT_OUTPUTS;
  }

  creates(): Recorded[] {
    return this.requests.filter((r) => r.method === 'POST' && r.path === '/task/openapi/create');
  }
  statusChecks(): Recorded[] {
    return this.requests.filter((r) => r.method === 'POST' && r.path === '/task/openapi/status');
  }
  cancels(): Recorded[] {
    return this.requests.filter((r) => r.method === 'POST' && r.path === '/task/openapi/cancel');
  }

  private route(call: Recorded, res: ServerResponse): void {
    const { method, path } = call;
    if (method === 'POST' && path === '/task/openapi/create')
      return this.fault(this.createFaults, res, () => this.create(call, res));
    if (method === 'POST' && path === '/task/openapi/status')
      return this.fault(this.checkFaults, res, () => this.status(call, res));
    if (method === 'POST' && path === '/task/openapi/outputs') return this.outputsOf(call, res);
    if (method === 'POST' && path === '/task/openapi/cancel') return this.cancel(call, res);
    const m = /^\/files\/([^/]+)\/([^/]+)$/.exec(path);
    if (method === 'GET' && m) {
      const data = m[2]!.endsWith('.mp4') ? this.video : this.image;
      res.writeHead(200, {
        'content-type': m[2]!.endsWith('.mp4') ? 'video/mp4' : 'image/png',
        'content-length': data.length,
      });
      return void res.end(data);
    }
    json(res, 404, { code: 404, msg: `no route ${method} ${path}`, data: null });
  }

  private fault(queue: NodeFault[], res: ServerResponse, answer: () => void): void {
    const f = queue.shift() ?? ok();
    if (f.kind === 'envelope') return json(res, 200, { code: f.code, msg: f.msg, data: null });
    // A non-2xx answer comes from the host's gateway, not RunningHub's envelope.
    answerFault(res, f, (status, message) => json(res, status, { error: { message, type: 'fake_error' } }), answer);
  }

  private taskOf(call: Recorded): Task | undefined {
    return this.tasks.get(String(call.body?.taskId));
  }

  private create(call: Recorded, res: ServerResponse): void {
    const id = String(Date.now()) + randomBytes(3).readUIntBE(0, 3);
    call.jobId = id;
    this.tasks.set(id, { id, script: this.script, checks: 0, outputs: this.outputs });
    json(res, 200, {
      code: 0,
      msg: 'success',
      data: { taskId: id, taskStatus: 'QUEUED', clientId: 'c', netWssUrl: null, promptTips: '{}' },
    });
  }

  private status(call: Recorded, res: ServerResponse): void {
    const task = this.taskOf(call);
    if (!task) return json(res, 200, NOT_FOUND);
    json(res, 200, { code: 0, msg: 'success', data: scriptStep(task.script, task.checks++).split(':')[0] });
  }

  /** A canceled task reports FAILED from then on, as RunningHub's do. */
  private cancel(call: Recorded, res: ServerResponse): void {
    const task = this.taskOf(call);
    if (!task) return json(res, 200, NOT_FOUND);
    task.script = ['FAILED:canceled'];
    task.checks = 0;
    json(res, 200, { code: 0, msg: 'success', data: null });
  }

  private outputsOf(call: Recorded, res: ServerResponse): void {
    const task = this.taskOf(call);
    if (!task) return json(res, 200, NOT_FOUND);
    const last = task.script[Math.min(task.checks, task.script.length) - 1] ?? '';
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
      data: task.outputs.map((o, i) => ({
        fileUrl: `${this.baseUrl}/files/${task.id}/${o.name}`,
        fileType: o.fileType,
        taskCostTime: '3',
        nodeId: String(9 + i),
      })),
    });
  }
}

export async function startFakeWorkflowNode(): Promise<FakeWorkflowNode> {
  return new FakeWorkflowNode().start();
}
