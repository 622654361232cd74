// DashScope's async-task protocol (Alibaba Cloud Model Studio), shared by the image and video
// providers: the create (`X-DashScope-Async: enable`), the task query, the cancel of a PENDING task,
// and DashScope's `{code, message, request_id}` errors in Kiln's terms. Hand-written HTTP: the
// official SDKs are Python and Java; the Node one on GitHub (dashscope-sdk-nodejs) is not on npm,
// sends through axios (no injected fetch) and turns every transport failure into one
// "NetworkError", which cannot tell a request that never left from one whose answer was lost.
import type { TaskFailureCode } from '../../../src/shared/errors.js';
import { isRefusalStatus, statusToCode, upstreamMessage } from '../../../src/upstreams/answers.js';
import { fetchText, parseUpstreamJson } from '../../../src/upstreams/http.js';
import { parseRetryAfter } from '../../../src/upstreams/retry-after.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import type { DashScopeTask } from '../../../src/shared/dashscope.js';
import type { UpstreamJob } from '../../../src/shared/upstream-job.js';

/** What the task query answers (`GET /api/v1/tasks/{task_id}`), as far as Kiln reads it. */
export interface DashScopeTaskAnswer {
  request_id?: string;
  output?: {
    task_id?: string;
    task_status?: string;
    code?: string;
    message?: string;
    /** Images: one entry per image; an image that failed alone carries `code` and `message` instead of `url`. */
    results?: { url?: string; code?: string; message?: string }[];
    video_url?: string;
  };
}

/** The model settings a call reads: the channel's over the model's. */
export interface DashScopeCall {
  model: { baseUrl?: string | undefined; idempotent: boolean };
  key?: string;
  signal: AbortSignal;
}

/** Task ids are UUIDs: nothing an answer sends can point a check elsewhere on the host. */
const TASK_ID = /^[A-Za-z0-9_-]{1,128}$/;

/**
 * DashScope's error codes (Model Studio "Status codes" / error-code reference). Its `code` wins
 * over the HTTP status: an overdue account is a 400 `Arrearage`, a content refusal a 400
 * `DataInspectionFailed`, a busy model a 429 or 503.
 */
export function codeOf(status: number | undefined, code: string, message: string): TaskFailureCode {
  if (code === 'InvalidApiKey') return 'auth_failed';
  if (
    code === 'Arrearage' ||
    code === 'AccessDenied.Unpurchased' ||
    /AllocationQuota|FreeTierOnly/.test(code) ||
    status === 402
  )
    return 'insufficient_balance';
  if (code.startsWith('Throttling')) return 'upstream_rate_limited';
  // Content moderation: Kiln has no code of its own for it; the caller must change the request.
  if (/^DataInspection|IPInfringement|^InappropriateContent/.test(code)) return 'invalid_request';
  if (/Timeout|TimeOut/.test(code)) return 'upstream_timeout';
  if (code.startsWith('InvalidParameter') || code.startsWith('BadRequest') || code === 'InvalidURL')
    return 'invalid_request';
  if (code.startsWith('AccessDenied')) return 'auth_failed';
  if (/ServiceUnavailable|ModelUnavailable|InternalError|ModelServingError/.test(code) || busy(message))
    return 'upstream_error';
  return status === undefined ? 'upstream_error' : statusToCode(status);
}

const busy = (message: string) => /system (is )?busy|too busy|overloaded/i.test(message);

/** A non-2xx DashScope answer. */
export class DashScopeFailure extends UpstreamFailure {
  constructor(
    readonly status: number,
    text: string,
    key: string | undefined,
    retryAfterHeader: string | null,
    lead = 'upstream answered',
  ) {
    const body = parseError(text);
    const dsCode = body.code ?? '';
    const code = codeOf(status, dsCode, body.message ?? '');
    // Refused before any work: the key, the account's balance or quota, throttling, a busy service.
    const refused =
      isRefusalStatus(status) ||
      code === 'auth_failed' ||
      code === 'insufficient_balance' ||
      code === 'upstream_rate_limited' ||
      /ServiceUnavailable|ModelUnavailable/.test(dsCode) ||
      busy(body.message ?? '');
    const retryAfter = parseRetryAfter(retryAfterHeader);
    const message = upstreamMessage(JSON.stringify({ error: { message: body.message ?? text } }), key);
    super(code, `${lead} ${status}${dsCode ? ` ${dsCode.slice(0, 60)}` : ''}: ${message}`, false, {
      status,
      refused,
      ...(retryAfter !== undefined ? { retryAfterMs: retryAfter * 1000 } : {}),
    });
  }
  override get transient(): boolean {
    return this.status >= 500 || this.status === 429 || this.status === 408;
  }
}

function parseError(text: string): { code?: string; message?: string } {
  try {
    const j = JSON.parse(text) as { code?: unknown; message?: unknown };
    return {
      ...(typeof j?.code === 'string' ? { code: j.code } : {}),
      ...(typeof j?.message === 'string' ? { message: j.message } : {}),
    };
  } catch {
    return {};
  }
}

/** A task that ended FAILED (or an image answer whose every image failed): its `code` says why. */
export function taskFailed(code: string | undefined, message: string | undefined, key?: string): UpstreamFailure {
  const c = code ?? 'unknown';
  const text = upstreamMessage(JSON.stringify({ error: { message: message ?? 'no message' } }), key);
  return new UpstreamFailure(
    codeOf(undefined, c, message ?? ''),
    `the upstream task failed (${c.slice(0, 60)}): ${text}`,
  );
}

const api = (call: DashScopeCall) => `${call.model.baseUrl!.replace(/\/+$/, '')}/api/v1`;

function headers(call: DashScopeCall, json: boolean): Record<string, string> {
  return {
    ...(call.key ? { authorization: `Bearer ${call.key}` } : {}),
    ...(json ? { 'content-type': 'application/json' } : {}),
  };
}

async function send(
  url: string,
  init: RequestInit & { signal: AbortSignal },
  key?: string,
): Promise<DashScopeTaskAnswer> {
  const { res, text } = await fetchText(url, init);
  if (!res.ok) throw new DashScopeFailure(res.status, text, key, res.headers.get('retry-after'));
  const body = parseUpstreamJson<DashScopeTaskAnswer>(text);
  if (!body || typeof body !== 'object')
    throw new UpstreamFailure('upstream_error', 'upstream answered JSON that is not a task');
  return body;
}

/**
 * Creates the task. DashScope takes no client id, so a create whose answer is lost cannot be
 * matched later: `dispatching` is awaited right before the request leaves, which makes it uncertain.
 */
export async function createTask(
  call: DashScopeCall & { dispatching(): Promise<void> },
  task: DashScopeTask,
  taskId: string,
): Promise<UpstreamJob> {
  const h: Record<string, string> = { ...headers(call, true), 'x-dashscope-async': 'enable' };
  // A relay in front of DashScope may deduplicate on the header the other providers send.
  if (call.model.idempotent) h['idempotency-key'] = taskId;
  await call.dispatching();
  const answer = await send(
    `${api(call)}/services/aigc/${task.path}`,
    { method: 'POST', headers: h, body: JSON.stringify(task.body), signal: call.signal },
    call.key,
  );
  const id = answer.output?.task_id;
  if (typeof id !== 'string' || !TASK_ID.test(id))
    throw new UpstreamFailure('upstream_error', 'upstream accepted the task without a usable task_id');
  if (answer.output?.task_status === 'FAILED') throw taskFailed(answer.output.code, answer.output.message, call.key);
  return { upstreamId: id };
}

/** One look at the task; a task that ended without success throws its failure. */
export async function readTask(
  call: DashScopeCall,
  job: UpstreamJob,
): Promise<{ state: 'running' } | { state: 'succeeded'; output: NonNullable<DashScopeTaskAnswer['output']> }> {
  const answer = await send(`${taskUrl(call, job)}`, { headers: headers(call, false), signal: call.signal }, call.key);
  const output = answer.output ?? {};
  switch (output.task_status) {
    case 'PENDING':
    case 'RUNNING':
      return { state: 'running' };
    case 'SUCCEEDED':
      return { state: 'succeeded', output };
    case 'FAILED':
      throw taskFailed(output.code, output.message, call.key);
    case 'CANCELED':
      throw new UpstreamFailure('upstream_error', 'the upstream task was canceled there');
    case 'UNKNOWN':
      throw new UpstreamFailure(
        'upstream_error',
        'the upstream no longer knows the task (expired after 24 h, or never created)',
      );
    default:
      throw new UpstreamFailure(
        'upstream_error',
        `upstream reported an unknown task status "${String(output.task_status).slice(0, 40)}"`,
      );
  }
}

/**
 * Asks DashScope to cancel the task: it cancels only a task still PENDING; one already RUNNING is
 * refused (400 UnsupportedOperation), which Kiln reports as a job it could not stop.
 */
export async function cancelTask(call: DashScopeCall, job: UpstreamJob): Promise<void> {
  await send(
    `${taskUrl(call, job)}/cancel`,
    { method: 'POST', headers: headers(call, false), signal: call.signal },
    call.key,
  );
}

function taskUrl(call: DashScopeCall, job: UpstreamJob): string {
  if (!TASK_ID.test(job.upstreamId)) throw new UpstreamFailure('upstream_error', 'the upstream task id is not usable');
  return `${api(call)}/tasks/${job.upstreamId}`;
}
