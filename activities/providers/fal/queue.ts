// fal's queue API, by hand (docs.fal.ai "Queue" and the Inference API reference): POST
// {baseUrl}/{app} submits, and the status, result and cancel calls go to the status_url,
// response_url and cancel_url the submit answered; they leave out an app's endpoint path
// (`fal-ai/flux/dev` is checked at `fal-ai/flux/requests/{id}/status`), so they are never rebuilt.
// The key travels as `Authorization: Key …`, and only to the channel's own origin: an answer naming
// another host is refused, so an upstream cannot make Kiln send its key (or requests) elsewhere.
//
// Why not @fal-ai/client: it takes an injected `fetch`, but its queue calls pass their own retry
// settings (submit: 3 retries on 429/502/503/504 and connection errors), which override the
// client's, so a non-idempotent submit could be sent twice; and it rebuilds the status, result
// and cancel URLs on https://queue.fal.run instead of following the ones the submit answered.
import type { JobCheck, UpstreamJob } from '../../../src/shared/upstream-job.js';
import type { TaskFailureCode } from '../../../src/shared/errors.js';
import { isRefusalStatus, statusToCode, upstreamMessage } from '../../../src/upstreams/answers.js';
import { fetchText, parseUpstreamJson } from '../../../src/upstreams/http.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import { parseRetryAfter } from '../../../src/upstreams/retry-after.js';
import type { Dispatching } from '../../upstream-call.js';

/** What the queue calls need of a call: the channel's settings, the key and the abort signal. */
export interface FalCall {
  model: { baseUrl?: string | undefined; upstreamModel?: string | undefined; id: string };
  key?: string;
  signal: AbortSignal;
}

/** One entry of a 422 `detail` (FastAPI / pydantic's shape, which fal's apps answer). */
interface FalErrorItem {
  loc?: unknown[];
  msg?: string;
  type?: string;
}

interface FalErrorBody {
  detail?: string | FalErrorItem[];
  error_type?: string;
}

/** fal's request error types (the Request Errors reference) that mean the job ran out of time. */
const TIMEOUT_TYPES = new Set(['request_timeout', 'startup_timeout']);

/**
 * A non-2xx answer of fal, with its `detail` (a string, or the list of pydantic errors of a 422)
 * in Kiln's terms: 401/403 the key, 402 or a locked account's "Exhausted balance" the balance,
 * 422 the field it names (or the content checker's flag), 429 and 503 refused before processing.
 */
export class FalHttpFailure extends UpstreamFailure {
  constructor(
    readonly status: number,
    text: string,
    key: string | undefined,
    headers: Headers,
    lead = 'fal answered',
  ) {
    const body = parseError(text);
    const errorType = body?.error_type ?? headers.get('x-fal-error-type') ?? undefined;
    const detail = describe(body, text);
    const balance = status === 402 || /exhausted balance|insufficient (balance|credit)/i.test(detail);
    const policy = Array.isArray(body?.detail) && body.detail.some((d) => d?.type === 'content_policy_violation');
    const code: TaskFailureCode = balance
      ? 'insufficient_balance'
      : errorType && TIMEOUT_TYPES.has(errorType)
        ? 'upstream_timeout'
        : statusToCode(status);
    const retryAfter = status === 429 ? parseRetryAfter(headers.get('retry-after')) : undefined;
    const what = policy ? 'content policy: ' : '';
    super(code, `${lead} ${status}${errorType ? ` ${errorType}` : ''}: ${what}${upstreamMessage(detail, key)}`, false, {
      status,
      refused: isRefusalStatus(status),
      ...(retryAfter !== undefined ? { retryAfterMs: retryAfter * 1000 } : {}),
    });
  }
  override get transient(): boolean {
    return this.status >= 500 || this.status === 429 || this.status === 408;
  }
}

function parseError(text: string): FalErrorBody | undefined {
  try {
    const j = JSON.parse(text) as unknown;
    // A model error may come as the bare list of error objects.
    if (Array.isArray(j)) return { detail: j as FalErrorItem[] };
    return j && typeof j === 'object' ? (j as FalErrorBody) : undefined;
  } catch {
    return undefined;
  }
}

/** The answer's words: `detail` as given, or each pydantic error as `field: msg` (loc without "body"). */
function describe(body: FalErrorBody | undefined, text: string): string {
  const d = body?.detail;
  if (typeof d === 'string') return d;
  if (Array.isArray(d) && d.length)
    return d
      .slice(0, 5)
      .map((e) => {
        const loc = (Array.isArray(e?.loc) ? e.loc : []).filter((p, i) => !(i === 0 && p === 'body')).join('.');
        return `${loc || 'body'}: ${typeof e?.msg === 'string' ? e.msg : (e?.type ?? 'invalid')}`;
      })
      .join('; ');
  return text;
}

export function headers(call: FalCall, json = false): Record<string, string> {
  return {
    ...(call.key ? { authorization: `Key ${call.key}` } : {}),
    ...(json ? { 'content-type': 'application/json' } : {}),
    accept: 'application/json',
  };
}

/** One queue call; a non-2xx answer throws FalHttpFailure. */
export async function falJson(
  call: FalCall,
  url: string,
  init: RequestInit & { signal: AbortSignal },
  lead?: string,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const { res, text } = await fetchText(url, init);
  if (!res.ok) throw new FalHttpFailure(res.status, text, call.key, res.headers, lead);
  const body = parseUpstreamJson<unknown>(text);
  if (!body || typeof body !== 'object' || Array.isArray(body))
    throw new UpstreamFailure('upstream_error', 'fal answered with JSON that is not an object');
  return { status: res.status, body: body as Record<string, unknown> };
}

/** The channel's origin: the only one its key and its queue calls go to. */
function ownOrigin(call: FalCall): string {
  return new URL(call.model.baseUrl!).origin;
}

/** A URL the submit answered, if it is on the channel's own origin. */
function sameOrigin(call: FalCall, value: unknown, name: string): string {
  let url: URL;
  try {
    url = new URL(String(value));
  } catch {
    throw new UpstreamFailure('upstream_error', `fal accepted the request without a usable ${name}`);
  }
  if (url.origin !== ownOrigin(call))
    throw new UpstreamFailure(
      'upstream_error',
      `fal answered a ${name} on ${url.origin}, not on the channel's ${ownOrigin(call)}: it is not followed`,
    );
  return url.href;
}

/**
 * Submits `input` to the channel's app. fal takes no client id, so an answer lost after sending is
 * ambiguous: Kiln cannot find the request again, and a non-idempotent task ends uncertain.
 */
export async function submit(
  call: FalCall & { dispatching: Dispatching },
  input: Record<string, unknown>,
): Promise<UpstreamJob> {
  const app = (call.model.upstreamModel ?? call.model.id).replace(/^\/+|\/+$/g, '');
  const url = `${call.model.baseUrl!.replace(/\/+$/, '')}/${app.split('/').map(encodeURIComponent).join('/')}`;
  const body = JSON.stringify(input);
  await call.dispatching();
  const { body: answer } = await falJson(call, url, {
    method: 'POST',
    headers: headers(call, true),
    body,
    signal: call.signal,
  });
  const id = answer.request_id;
  if (typeof id !== 'string' || id === '' || id.length > 200)
    throw new UpstreamFailure('upstream_error', 'fal accepted the request without a request_id');
  return {
    upstreamId: id,
    refs: {
      status: sameOrigin(call, answer.status_url, 'status_url'),
      response: sameOrigin(call, answer.response_url, 'response_url'),
      cancel: sameOrigin(call, answer.cancel_url, 'cancel_url'),
    },
  };
}

/** A stored URL of the job, checked again: the job may come from an older worker or a changed models file. */
function ref(call: FalCall, job: UpstreamJob, name: 'status' | 'response' | 'cancel'): string {
  return sameOrigin(call, job.refs?.[name], `${name} URL`);
}

/**
 * One look at the request: IN_QUEUE and IN_PROGRESS run on (fal gives no progress); COMPLETED with
 * an `error` failed (its `error_type` says why); COMPLETED is otherwise done, its result at response_url.
 */
export async function status(call: FalCall, job: UpstreamJob): Promise<JobCheck> {
  const { body } = await falJson(call, ref(call, job, 'status'), { headers: headers(call), signal: call.signal });
  const s = body.status;
  if (s === 'IN_QUEUE' || s === 'IN_PROGRESS') return { state: 'running' };
  if (s !== 'COMPLETED')
    throw new UpstreamFailure('upstream_error', `fal reported an unknown status "${String(s).slice(0, 40)}"`);
  if (body.error !== undefined && body.error !== null) {
    const type = typeof body.error_type === 'string' ? body.error_type : undefined;
    const code: TaskFailureCode = type && TIMEOUT_TYPES.has(type) ? 'upstream_timeout' : 'upstream_error';
    const msg = upstreamMessage(typeof body.error === 'string' ? body.error : JSON.stringify(body.error), call.key);
    throw new UpstreamFailure(code, `the fal request failed${type ? ` (${type.slice(0, 60)})` : ''}: ${msg}`);
  }
  return { state: 'completed' };
}

/** The finished request's output: fal answers a model's error here as the model returned it. */
export async function result(call: FalCall, job: UpstreamJob): Promise<Record<string, unknown>> {
  const { body } = await falJson(
    call,
    ref(call, job, 'response'),
    { headers: headers(call), signal: call.signal },
    'the fal result answered',
  );
  return body;
}

/**
 * Asks fal to stop the request: one in the queue is removed, one in progress is signalled. A request
 * that already completed (400 ALREADY_COMPLETED) or is gone (404) has nothing left to stop.
 */
export async function cancel(call: FalCall, job: UpstreamJob): Promise<void> {
  try {
    await falJson(call, ref(call, job, 'cancel'), { method: 'PUT', headers: headers(call), signal: call.signal });
  } catch (err) {
    if (err instanceof FalHttpFailure && (err.status === 400 || err.status === 404)) return;
    throw err;
  }
}

/** An output's file type from its content_type (`image/png` is png) or its URL's extension. */
export function fileTypeOf(contentType: unknown, url: string): string | undefined {
  const sub = typeof contentType === 'string' ? /^(?:image|video)\/([a-z0-9]+)/i.exec(contentType)?.[1] : undefined;
  if (sub) return sub.toLowerCase() === 'jpeg' ? 'jpg' : sub.toLowerCase();
  try {
    return /\.([A-Za-z0-9]{1,5})$/.exec(new URL(url).pathname)?.[1]?.toLowerCase();
  } catch {
    return undefined;
  }
}

/** A result's file URL, if it is one Kiln downloads (http or https). */
export function fileUrl(file: unknown): string | undefined {
  const url = (file as { url?: unknown } | null)?.url;
  return typeof url === 'string' && /^https?:\/\//i.test(url) ? url : undefined;
}
