// Seedance's content-generation tasks on Volcengine Ark or BytePlus ModelArk: the create, the task
// query, the DELETE that cancels a queued task, and Ark's `{error: {code, message, param, type}}`
// answers in Kiln's terms. Hand-written HTTP: the official clients are Python, Go and Java
// (volcengine-python-sdk's volcenginesdkarkruntime …); none is on npm with an injected fetch.
import type { TaskFailureCode } from '../../../src/shared/errors.js';
import type { SeedanceTaskBody } from '../../../src/shared/seedance.js';
import type { UpstreamJob } from '../../../src/shared/upstream-job.js';
import { isRefusalStatus, statusToCode, upstreamMessage } from '../../../src/upstreams/answers.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import { fetchText, parseUpstreamJson } from '../../../src/upstreams/http.js';
import { parseRetryAfter } from '../../../src/upstreams/retry-after.js';

/** What the task query answers (`GET …/contents/generations/tasks/{id}`), as far as Kiln reads it. */
export interface SeedanceTaskAnswer {
  id?: string;
  status?: string;
  content?: { video_url?: string };
  error?: { code?: string; message?: string } | null;
}

/** The model settings a call reads: the channel's over the model's. */
export interface SeedanceCall {
  model: { baseUrl?: string | undefined; idempotent: boolean };
  key?: string;
  signal: AbortSignal;
}

interface ArkError {
  code?: string;
  message?: string;
  param?: string;
}

/** Task ids look like `cgt-20250331175019-68d9t`: nothing an answer sends can point a check elsewhere. */
const TASK_ID = /^[A-Za-z0-9_-]{1,128}$/;

/**
 * Ark's error codes (ModelArk "Error codes"): its `code` wins over the HTTP status. 429 carries both
 * kinds of limit: `QuotaExceeded` (the account's free quota is spent) and `SetLimitExceeded` (the
 * inference limit the account set for itself) last until someone acts, like a balance; the
 * `…RateLimitExceeded…` family (RPM, TPM, IPM of an endpoint or account) passes within a minute.
 */
export function codeOf(status: number | undefined, code: string): TaskFailureCode {
  if (code === 'AuthenticationError' || code.startsWith('AccessDenied')) return 'auth_failed';
  if (code === 'AccountOverdueError' || code === 'QuotaExceeded' || code === 'SetLimitExceeded')
    return 'insufficient_balance';
  if (/RateLimitExceeded/.test(code)) return 'upstream_rate_limited';
  if (contentPolicy(code)) return 'invalid_request';
  if (code.startsWith('InvalidParameter') || code.startsWith('MissingParameter')) return 'invalid_request';
  if (code === 'ServerOverloaded' || code === 'InternalServiceError') return 'upstream_error';
  if (/Timeout/i.test(code)) return 'upstream_timeout';
  return status === undefined ? 'upstream_error' : statusToCode(status);
}

/** Moderation of the input or the output (text, image, video, audio): Kiln has no code of its own for it. */
export const contentPolicy = (code: string): boolean =>
  /SensitiveContentDetected|RiskDetection|CopyrightDetected|PolicyViolation/i.test(code);

/** The field an InvalidParameter names: its `param`, else the code's suffix (`InvalidParameter.ratio`). */
function fieldOf(e: ArkError): string | undefined {
  if (e.param) return e.param.slice(0, 60);
  const m = /^(?:InvalidParameter|MissingParameter)\.([\w.-]{1,60})$/.exec(e.code ?? '');
  return m?.[1];
}

/** The message of a failed create or task: the content-policy wording, the field named, the key masked. */
function describe(e: ArkError, text: string, key: string | undefined): string {
  const code = e.code ?? '';
  const said = upstreamMessage(JSON.stringify({ error: { message: e.message ?? text } }), key);
  if (contentPolicy(code)) return `content policy: the upstream refused the content (${code.slice(0, 60)}): ${said}`;
  const field = fieldOf(e);
  if (field && codeOf(undefined, code) === 'invalid_request')
    return `parameter "${field}" (${code.slice(0, 60)}): ${said}`;
  return `${code ? `${code.slice(0, 60)}: ` : ''}${said}`;
}

/** A non-2xx Ark answer. */
export class SeedanceFailure extends UpstreamFailure {
  constructor(
    readonly status: number,
    text: string,
    key: string | undefined,
    retryAfterHeader: string | null,
  ) {
    const e = parseError(text);
    const code = codeOf(status, e.code ?? '');
    // Refused before any work: the key, the account, a limit, an overloaded service.
    const refused =
      isRefusalStatus(status) ||
      code === 'auth_failed' ||
      code === 'insufficient_balance' ||
      code === 'upstream_rate_limited' ||
      e.code === 'ServerOverloaded';
    const retryAfter = parseRetryAfter(retryAfterHeader);
    super(code, `upstream answered ${status} ${describe(e, text, key)}`, false, {
      status,
      refused,
      ...(retryAfter !== undefined ? { retryAfterMs: retryAfter * 1000 } : {}),
    });
  }
  override get transient(): boolean {
    return this.status >= 500 || this.status === 429 || this.status === 408;
  }
}

function parseError(text: string): ArkError {
  try {
    const e = (JSON.parse(text) as { error?: unknown })?.error;
    if (!e || typeof e !== 'object') return {};
    const { code, message, param } = e as Record<string, unknown>;
    return {
      ...(typeof code === 'string' ? { code } : {}),
      ...(typeof message === 'string' ? { message } : {}),
      ...(typeof param === 'string' && param !== '' ? { param } : {}),
    };
  } catch {
    return {};
  }
}

/** A task that ended `failed`: its `error.code` says why. */
export function taskFailed(error: SeedanceTaskAnswer['error'], key?: string): UpstreamFailure {
  const e: ArkError = {
    ...(typeof error?.code === 'string' ? { code: error.code } : {}),
    message: typeof error?.message === 'string' ? error.message : 'no message',
  };
  return new UpstreamFailure(codeOf(undefined, e.code ?? ''), `the upstream task failed: ${describe(e, '', key)}`);
}

/** `{baseUrl}/api/v3/contents/generations/tasks`; a baseUrl that already ends in /api/v3 (the SDKs' form) is taken as is. */
function tasksUrl(call: SeedanceCall): string {
  const base = call.model.baseUrl!.replace(/\/+$/, '');
  return `${/\/api\/v3$/.test(base) ? base : `${base}/api/v3`}/contents/generations/tasks`;
}

function taskUrl(call: SeedanceCall, job: UpstreamJob): string {
  if (!TASK_ID.test(job.upstreamId)) throw new UpstreamFailure('upstream_error', 'the upstream task id is not usable');
  return `${tasksUrl(call)}/${job.upstreamId}`;
}

function headers(call: SeedanceCall, json: boolean): Record<string, string> {
  return {
    ...(call.key ? { authorization: `Bearer ${call.key}` } : {}),
    ...(json ? { 'content-type': 'application/json' } : {}),
  };
}

async function send(
  url: string,
  init: RequestInit & { signal: AbortSignal },
  key?: string,
): Promise<SeedanceTaskAnswer> {
  const { res, text } = await fetchText(url, init);
  if (!res.ok) throw new SeedanceFailure(res.status, text, key, res.headers.get('retry-after'));
  if (text.trim() === '') return {};
  const body = parseUpstreamJson<SeedanceTaskAnswer>(text);
  if (!body || typeof body !== 'object')
    throw new UpstreamFailure('upstream_error', 'upstream answered JSON that is not a task');
  return body;
}

/**
 * Creates the task. Ark takes no client id, so a create whose answer is lost cannot be found again:
 * `dispatching` is awaited right before the request leaves, which makes it uncertain.
 */
export async function createTask(
  call: SeedanceCall & { dispatching(): Promise<void> },
  body: SeedanceTaskBody,
  taskId: string,
): Promise<UpstreamJob> {
  const h = headers(call, true);
  // A relay in front of Ark may deduplicate on the header the other providers send.
  if (call.model.idempotent) h['idempotency-key'] = taskId;
  await call.dispatching();
  const answer = await send(
    tasksUrl(call),
    { method: 'POST', headers: h, body: JSON.stringify(body), signal: call.signal },
    call.key,
  );
  if (typeof answer.id !== 'string' || !TASK_ID.test(answer.id))
    throw new UpstreamFailure('upstream_error', 'upstream accepted the task without a usable id');
  return { upstreamId: answer.id };
}

/** One look at the task; a task that ended without success throws its failure. */
export async function readTask(
  call: SeedanceCall,
  job: UpstreamJob,
): Promise<{ state: 'running' } | { state: 'succeeded'; videoUrl: string | undefined }> {
  const answer = await send(taskUrl(call, job), { headers: headers(call, false), signal: call.signal }, call.key);
  switch (answer.status) {
    case 'queued':
    case 'running':
      return { state: 'running' };
    case 'succeeded':
      return { state: 'succeeded', videoUrl: answer.content?.video_url };
    case 'failed':
      throw taskFailed(answer.error, call.key);
    case 'cancelled':
      throw new UpstreamFailure('upstream_error', 'the upstream task was cancelled there');
    case 'expired':
      // The task outlived its execution_expires_after (48 h by default) in Ark's queue.
      throw new UpstreamFailure('upstream_timeout', 'the upstream task expired before it ran');
    default:
      throw new UpstreamFailure(
        'upstream_error',
        `upstream reported an unknown task status "${String(answer.status).slice(0, 40)}"`,
      );
  }
}

/**
 * Asks Ark to cancel the task: only a queued task can be; a running one is refused (an error
 * answer), which Kiln reports as a job it could not stop.
 */
export async function cancelTask(call: SeedanceCall, job: UpstreamJob): Promise<void> {
  await send(taskUrl(call, job), { method: 'DELETE', headers: headers(call, false), signal: call.signal }, call.key);
}
