// MiniMax's video protocol (platform.minimax.io, "Video Generation"): the create, the task query
// and the file lookup, and MiniMax's `base_resp` errors in Kiln's terms. MiniMax answers most
// errors with HTTP 200 and a non-zero `base_resp.status_code`, so every answer is read for it.
// Hand-written HTTP: MiniMax publishes no Node client for this API (its official MCP servers and CLI
// call it over plain HTTP, with retries of their own).
import type { TaskFailureCode } from '../../../src/shared/errors.js';
import type { MinimaxBody } from '../../../src/shared/minimax.js';
import type { UpstreamJob } from '../../../src/shared/upstream-job.js';
import { isRefusalStatus, statusToCode, upstreamMessage } from '../../../src/upstreams/answers.js';
import { fetchText, parseUpstreamJson } from '../../../src/upstreams/http.js';
import { parseRetryAfter } from '../../../src/upstreams/retry-after.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';

interface BaseResp {
  status_code?: number;
  status_msg?: string;
}

/** The task query's answer (`GET /v1/query/video_generation`). */
export interface MinimaxTask {
  task_id?: string;
  status?: string;
  file_id?: string | number;
  base_resp?: BaseResp;
}

/** The settings a call reads: the channel's over the model's. */
export interface MinimaxCall {
  model: { baseUrl?: string | undefined; idempotent: boolean };
  key?: string;
  signal: AbortSignal;
}

/** Task and file ids are decimal strings: nothing an answer sends can point a request elsewhere. */
const ID = /^[0-9A-Za-z_-]{1,64}$/;

/**
 * MiniMax's status codes (platform.minimax.io "Error Codes") in Kiln's. Content moderation (1026 the
 * input, 1027 the output) has no code of its own in Kiln: the caller must change the request.
 */
const CODES: Readonly<Record<number, TaskFailureCode>> = {
  1000: 'upstream_error',
  1001: 'upstream_timeout',
  1002: 'upstream_rate_limited',
  1004: 'auth_failed',
  1008: 'insufficient_balance',
  1013: 'upstream_error',
  1024: 'upstream_error',
  1026: 'invalid_request',
  1027: 'invalid_request',
  1033: 'upstream_error',
  1039: 'upstream_rate_limited',
  1041: 'upstream_rate_limited',
  1042: 'invalid_request',
  2013: 'invalid_request',
  2045: 'upstream_rate_limited',
  2049: 'auth_failed',
};

/** Refused before any work: the key, the balance, a rate or connection limit. Another channel may take it. */
const REFUSED = new Set([1002, 1004, 1008, 1039, 1041, 2045, 2049]);
/** Passing faults: a read (query, file lookup) answered so is asked again. */
const PASSING = new Set([1000, 1001, 1002, 1013, 1024, 1033, 1039, 1041, 2045]);

export function codeOf(statusCode: number, httpStatus?: number): TaskFailureCode {
  return (
    CODES[statusCode] ?? (httpStatus !== undefined && httpStatus >= 400 ? statusToCode(httpStatus) : 'upstream_error')
  );
}

/** An answer that failed: a non-2xx, or a 200 whose `base_resp.status_code` is not 0. */
export class MinimaxFailure extends UpstreamFailure {
  constructor(
    readonly httpStatus: number,
    readonly statusCode: number | undefined,
    statusMsg: string,
    key: string | undefined,
    retryAfterHeader: string | null,
    lead = 'upstream answered',
  ) {
    const code = statusCode ? codeOf(statusCode, httpStatus) : statusToCode(httpStatus);
    const refused = isRefusalStatus(httpStatus) || (statusCode !== undefined && REFUSED.has(statusCode));
    const retryAfter = parseRetryAfter(retryAfterHeader);
    const message = upstreamMessage(JSON.stringify({ error: { message: statusMsg } }), key);
    const what = `${httpStatus}${statusCode ? ` status_code ${statusCode}` : ''}`;
    super(code, `${lead} ${what}: ${message}`, false, {
      ...(httpStatus !== 200 ? { status: httpStatus } : {}),
      refused,
      ...(refused && retryAfter !== undefined ? { retryAfterMs: retryAfter * 1000 } : {}),
    });
  }
  override get transient(): boolean {
    const s = this.httpStatus;
    return s >= 500 || s === 429 || s === 408 || (this.statusCode !== undefined && PASSING.has(this.statusCode));
  }
}

const api = (call: MinimaxCall) => `${call.model.baseUrl!.replace(/\/+$/, '')}/v1`;

function headers(call: MinimaxCall, json: boolean): Record<string, string> {
  return {
    ...(call.key ? { authorization: `Bearer ${call.key}` } : {}),
    ...(json ? { 'content-type': 'application/json' } : {}),
  };
}

/** One call; throws MinimaxFailure for a non-2xx or a non-zero `base_resp.status_code`. */
async function send<T extends { base_resp?: BaseResp }>(
  url: string,
  init: RequestInit & { signal: AbortSignal },
  key?: string,
  accept?: (body: T) => boolean,
): Promise<T> {
  const { res, text } = await fetchText(url, init);
  const retryAfter = res.headers.get('retry-after');
  if (!res.ok) {
    const b = baseOf(text);
    throw new MinimaxFailure(res.status, b.status_code, b.status_msg ?? text, key, retryAfter);
  }
  const body = parseUpstreamJson<T>(text);
  if (!body || typeof body !== 'object')
    throw new UpstreamFailure('upstream_error', 'upstream answered JSON that is not an object');
  const sc = body.base_resp?.status_code;
  if (typeof sc === 'number' && sc !== 0 && !accept?.(body))
    throw new MinimaxFailure(res.status, sc, body.base_resp?.status_msg ?? '(no message)', key, retryAfter);
  return body;
}

function baseOf(text: string): BaseResp {
  try {
    const b = (JSON.parse(text) as { base_resp?: BaseResp }).base_resp;
    return {
      ...(typeof b?.status_code === 'number' ? { status_code: b.status_code } : {}),
      ...(typeof b?.status_msg === 'string' ? { status_msg: b.status_msg } : {}),
    };
  } catch {
    return {};
  }
}

/**
 * Creates the task. MiniMax takes no id of the caller's and does not deduplicate, so a create whose
 * answer is lost cannot be found again: `dispatching` is awaited right before the request leaves,
 * which makes it `uncertain`.
 */
export async function createTask(
  call: MinimaxCall & { dispatching(): Promise<void> },
  body: MinimaxBody,
  taskId: string,
): Promise<UpstreamJob> {
  const h = headers(call, true);
  // A relay in front of MiniMax may deduplicate on the header the other providers send.
  if (call.model.idempotent) h['idempotency-key'] = taskId;
  await call.dispatching();
  const answer = await send<{ task_id?: unknown; base_resp?: BaseResp }>(
    `${api(call)}/video_generation`,
    { method: 'POST', headers: h, body: JSON.stringify(body), signal: call.signal },
    call.key,
  );
  const id = answer.task_id;
  if (typeof id !== 'string' || !ID.test(id))
    throw new UpstreamFailure('upstream_error', 'upstream accepted the video without a usable task_id');
  return { upstreamId: id };
}

/** One look at the task: a task that failed answers `status: Fail` with its reason in `base_resp`. */
export async function queryTask(call: MinimaxCall, job: UpstreamJob): Promise<MinimaxTask> {
  if (!ID.test(job.upstreamId)) throw new UpstreamFailure('upstream_error', 'the upstream task id is not usable');
  return send<MinimaxTask>(
    `${api(call)}/query/video_generation?task_id=${encodeURIComponent(job.upstreamId)}`,
    { headers: headers(call, false), signal: call.signal },
    call.key,
    (t) => t.status === 'Fail',
  );
}

/** The finished file's download link (`file.download_url`, which expires: fetched right before the download). */
export async function downloadUrl(call: MinimaxCall, fileId: string): Promise<string> {
  if (!ID.test(fileId)) throw new UpstreamFailure('upstream_error', 'the upstream file id is not usable');
  const answer = await send<{ file?: { download_url?: unknown }; base_resp?: BaseResp }>(
    `${api(call)}/files/retrieve?file_id=${encodeURIComponent(fileId)}`,
    { headers: headers(call, false), signal: call.signal },
    call.key,
  );
  const url = answer.file?.download_url;
  if (typeof url !== 'string' || !/^https?:\/\//.test(url))
    throw new UpstreamFailure('upstream_error', 'the upstream file has no download_url');
  return url;
}

/** A task that ended `Fail`: its `base_resp` says why (1026/1027 moderation), else MiniMax's failure. */
export function taskFailed(task: MinimaxTask, key?: string): UpstreamFailure {
  const sc = task.base_resp?.status_code;
  const msg = upstreamMessage(JSON.stringify({ error: { message: task.base_resp?.status_msg ?? 'no message' } }), key);
  return new UpstreamFailure(
    sc ? codeOf(sc) : 'upstream_error',
    `the upstream video task failed${sc ? ` (status_code ${sc})` : ''}: ${msg}`,
  );
}
