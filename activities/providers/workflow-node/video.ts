// RunningHub-style workflow upstream: create with a workflow id and nodeInfoList, then status and
// outputs ([{fileUrl, fileType}]); every output is copied into the blob store as results[*].url.
import type { BlobStore } from '../../../src/blobs/local.js';
import type { TaskFailureCode } from '../../../src/shared/errors.js';
import type { NodeInfo, VideoCheck, VideoJob, VideoOutput, VideoResult } from '../../../src/shared/video-task.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import { copyToBlobs, requestJson } from '../http.js';
import type { VideoCall, VideoFinished, VideoProvider } from '../contract.js';

interface Envelope<T> {
  code?: number;
  msg?: string;
  data?: T;
}

/**
 * The workflow's inputs: the model's node mapping for prompt/image/seconds/size, then the caller's own entries (which
 * win).
 */
export function nodeInfoList(call: VideoCall): NodeInfo[] {
  const r = call.input.request;
  const out = new Map<string, NodeInfo>();
  const put = (n: NodeInfo) => out.set(`${n.nodeId}\u0000${n.fieldName}`, n);
  const nodes = call.model.nodes;
  const mapped: [keyof typeof nodes, string | undefined][] = [
    ['prompt', r.prompt],
    ['image', r.image],
    ['seconds', r.seconds],
    ['size', r.size],
  ];
  for (const [field, value] of mapped) {
    const at = nodes[field];
    if (at && value !== undefined && value !== '') put({ ...at, fieldValue: value });
  }
  for (const n of r.nodeInfoList ?? []) put(n);
  return [...out.values()];
}

export class WorkflowNodeVideoProvider implements VideoProvider {
  constructor(private readonly blobs: BlobStore) {}

  private async call<T>(call: VideoCall, path: string, body: Record<string, unknown>): Promise<Envelope<T>> {
    const url = `${call.model.baseUrl!.replace(/\/+$/, '')}${path}`;
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (call.model.idempotent && path.endsWith('/create')) headers['idempotency-key'] = call.input.id;
    const env = (await requestJson(
      url,
      {
        method: 'POST',
        headers,
        body: JSON.stringify({ ...(call.key ? { apiKey: call.key } : {}), ...body }),
        signal: call.signal,
      },
      call.key,
    )) as Envelope<T>;
    return env ?? {};
  }

  async create(call: VideoCall & { dispatching(): Promise<void> }): Promise<VideoJob> {
    const body = { workflowId: call.model.workflowId, nodeInfoList: nodeInfoList(call) };
    await call.dispatching();
    const env = await this.call<{ taskId?: string | number }>(call, '/task/openapi/create', body);
    if (env.code !== 0) throw envelopeFailure(env, call.key);
    const id = env.data?.taskId;
    if (id === undefined || id === '')
      throw new UpstreamFailure('upstream_error', 'upstream accepted the workflow without a taskId');
    return { upstreamId: String(id) };
  }

  async check(call: VideoCall & { job: VideoJob }): Promise<VideoCheck> {
    const env = await this.call<string>(call, '/task/openapi/status', { taskId: call.job.upstreamId });
    if (env.code !== 0) throw envelopeFailure(env, call.key);
    const status = String(env.data ?? '').toUpperCase();
    if (status === 'QUEUED' || status === 'CREATE') return { state: 'running', progress: 0 };
    if (status === 'RUNNING') return { state: 'running' };
    if (status === 'FAILED') {
      const out = await this.call<{ failedReason?: Record<string, unknown> }>(call, '/task/openapi/outputs', {
        taskId: call.job.upstreamId,
      }).catch(() => ({}) as Envelope<{ failedReason?: Record<string, unknown> }>);
      const reason = out.data?.failedReason?.exception_message ?? out.msg ?? 'no reason given';
      throw new UpstreamFailure(
        'upstream_error',
        `the upstream workflow failed: ${redact(String(reason), call.key).slice(0, 300)}`,
      );
    }
    if (status !== 'SUCCESS')
      throw new UpstreamFailure(
        'upstream_error',
        `upstream reported an unknown workflow status "${status.slice(0, 40)}"`,
      );
    const out = await this.call<{ fileUrl?: string; fileType?: string; nodeId?: string | number }[]>(
      call,
      '/task/openapi/outputs',
      { taskId: call.job.upstreamId },
    );
    if (out.code !== 0) throw envelopeFailure(out, call.key);
    const outputs: VideoOutput[] = (Array.isArray(out.data) ? out.data : [])
      .filter((o) => typeof o?.fileUrl === 'string' && /^https?:\/\//.test(o.fileUrl))
      .map((o) => ({
        url: o.fileUrl!,
        ...(o.fileType ? { fileType: String(o.fileType) } : {}),
        ...(o.nodeId !== undefined ? { nodeId: String(o.nodeId) } : {}),
      }));
    if (outputs.length === 0)
      throw new UpstreamFailure('upstream_error', 'the upstream workflow finished without output files');
    return { state: 'completed', outputs };
  }

  /** The owner canceled the task: RunningHub's cancel call stops a queued or running task. */
  async cancel(call: VideoCall & { job: VideoJob }): Promise<void> {
    const env = await this.call<unknown>(call, '/task/openapi/cancel', { taskId: call.job.upstreamId });
    if (env.code !== 0) throw envelopeFailure(env, call.key);
  }

  async fetch(call: VideoCall & { job: VideoJob; outputs: VideoOutput[] }): Promise<VideoFinished> {
    const results: VideoResult[] = [];
    for (const o of call.outputs) {
      const stored = await copyToBlobs(this.blobs, o.url, o.fileType, call.signal);
      results.push({ ...stored, ...(o.nodeId ? { node_id: o.nodeId } : {}) });
    }
    const video = results.find((r) => r.file_type === 'mp4' || r.file_type === 'webm' || r.file_type === 'mov');
    return { ...(video ? { video_url: video.url } : {}), results };
  }
}

const redact = (s: string, key?: string) => (key ? s.split(key).join('[redacted]') : s);

/** RunningHub answers HTTP 200 with its own code; map the ones whose cause is known. */
function envelopeFailure(env: Envelope<unknown>, key?: string): UpstreamFailure {
  const msg = redact(String(env.msg ?? 'no message'), key).slice(0, 300);
  const text = `${env.code} ${msg}`.toUpperCase();
  let code: TaskFailureCode = 'upstream_error';
  if (/BALANCE|COINS?\b|INSUFFICIENT/.test(text)) code = 'insufficient_balance';
  else if (/APIKEY|TOKEN|UNAUTHORI[SZ]ED|FORBIDDEN/.test(text) && !/NODE_INFO/.test(text)) code = 'auth_failed';
  else if (/QUEUE_MAXED|RATE|TOO_MANY/.test(text)) code = 'upstream_rate_limited';
  else if ([380, 433, 803].includes(Number(env.code)) || /NOT_EXISTS|VALIDATE|NODE_INFO|PARAM/.test(text))
    code = 'invalid_request';
  // Balance, credential and rate refusals come before the workflow runs: another channel may take it.
  const refused = code === 'insufficient_balance' || code === 'auth_failed' || code === 'upstream_rate_limited';
  return new UpstreamFailure(code, `upstream refused the workflow (code ${env.code}): ${msg}`, false, { refused });
}
