// Kling's video API (Kuaishou's official one): the JWT every call carries, the create, the task
// query (by Kling's task_id, or by the external_task_id Kiln gave the create), and Kling's
// `{code, message, request_id}` answers in Kiln's terms. Hand-written HTTP: Kling publishes no npm
// client (its own clients are Python, e.g. KwaiVGI/ComfyUI-KLingAI-API), and the npm packages named
// after it are third parties' wrappers over axios with no injected fetch.
import { createHmac } from 'node:crypto';
import { klingCodeOf, klingRefused, type KlingPath, type KlingTask } from '../../../src/shared/kling.js';
import type { UpstreamJob } from '../../../src/shared/upstream-job.js';
import { upstreamMessage } from '../../../src/upstreams/answers.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import { fetchText, parseUpstreamJson } from '../../../src/upstreams/http.js';
import { parseRetryAfter } from '../../../src/upstreams/retry-after.js';

/** The task's `data` in a create or query answer, as far as Kiln reads it. */
export interface KlingTaskData {
  task_id?: string;
  task_status?: string;
  task_status_msg?: string;
  task_info?: { external_task_id?: string };
  task_result?: { videos?: { id?: string; url?: string; duration?: string }[] };
}

interface KlingAnswer {
  code?: number;
  message?: string;
  request_id?: string;
  data?: KlingTaskData;
}

export interface KlingCall {
  model: { baseUrl?: string | undefined };
  key?: string;
  signal: AbortSignal;
}

/** Kling's task ids are numeric strings; Kiln's external ids are `video_<32 hex>`: nothing an answer sends can point a query elsewhere. */
const ID = /^[A-Za-z0-9_-]{1,128}$/;
/** How long a minted token is valid: Kling's own example's 30 minutes. */
const TOKEN_TTL_S = 1800;

/**
 * The Authorization header. The key is `ACCESS_KEY:SECRET_KEY` (one credential variable), from
 * which an HS256 JWT is minted per request ({iss: access key, exp: now + 30 min, nbf: now − 5 s},
 * Kling's recipe); a key without `:` is sent as it is (a relay's own key, or a token minted elsewhere).
 */
export function authorization(key: string | undefined, nowMs = Date.now()): string | undefined {
  if (!key) return undefined;
  const colon = key.indexOf(':');
  if (colon < 0) return `Bearer ${key}`;
  const now = Math.floor(nowMs / 1000);
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const unsigned = `${part({ alg: 'HS256', typ: 'JWT' })}.${part({ iss: key.slice(0, colon), exp: now + TOKEN_TTL_S, nbf: now - 5 })}`;
  const signature = createHmac('sha256', key.slice(colon + 1))
    .update(unsigned)
    .digest('base64url');
  return `Bearer ${unsigned}.${signature}`;
}

/** Masks the key's parts, should an answer echo one. */
function message(text: string, key: string | undefined): string {
  let msg = upstreamMessage(JSON.stringify({ error: { message: text } }));
  for (const secret of key?.split(':') ?? []) if (secret.length >= 4) msg = msg.split(secret).join('[redacted]');
  return msg;
}

/** A Kling answer that is not `code: 0`. */
export class KlingFailure extends UpstreamFailure {
  constructor(
    readonly status: number,
    readonly klingCode: number | undefined,
    text: string,
    key: string | undefined,
    retryAfterHeader: string | null,
  ) {
    const refused = klingRefused(klingCode, status);
    const retryAfter = refused ? parseRetryAfter(retryAfterHeader) : undefined;
    super(
      klingCodeOf(klingCode, status),
      `upstream answered ${status}${klingCode !== undefined ? ` code ${klingCode}` : ''}: ${message(text, key)}`,
      false,
      { status, refused, ...(retryAfter !== undefined ? { retryAfterMs: retryAfter * 1000 } : {}) },
    );
  }
  override get transient(): boolean {
    return this.status >= 500 || this.status === 429 || this.status === 408;
  }
  /** Kling's answer to a query of a task it does not have (1203: the requested resource does not exist). */
  get notFound(): boolean {
    return this.klingCode === 1203;
  }
}

async function send(url: string, init: RequestInit & { signal: AbortSignal }, key?: string): Promise<KlingTaskData> {
  const { res, text } = await fetchText(url, init);
  let body: KlingAnswer | undefined;
  try {
    body = JSON.parse(text) as KlingAnswer;
  } catch {
    /* not JSON: judged by its status below */
  }
  const code = typeof body?.code === 'number' ? body.code : undefined;
  if (!res.ok || (code !== undefined && code !== 0))
    throw new KlingFailure(res.status, code, body?.message ?? text, key, res.headers.get('retry-after'));
  const answer = parseUpstreamJson<KlingAnswer>(text);
  if (!answer?.data || typeof answer.data !== 'object')
    throw new UpstreamFailure('upstream_error', 'upstream answered without a task (no data)');
  return answer.data;
}

const videos = (call: KlingCall) => `${call.model.baseUrl!.replace(/\/+$/, '')}/v1/videos`;

function headers(call: KlingCall, json: boolean): Record<string, string> {
  const auth = authorization(call.key);
  return { ...(auth ? { authorization: auth } : {}), ...(json ? { 'content-type': 'application/json' } : {}) };
}

/** The job Kiln keeps of a Kling task: its id, and which query path it answers at. */
function jobOf(data: KlingTaskData, path: KlingPath): UpstreamJob {
  const id = data.task_id;
  if (typeof id !== 'string' || !ID.test(id))
    throw new UpstreamFailure('upstream_error', 'upstream answered a task without a usable task_id');
  return { upstreamId: id, refs: { path } };
}

/**
 * Creates the task. `external_task_id` (Kiln's task id) makes a lost answer recoverable: the task
 * is then looked up by it (`findTask`). `dispatching` is awaited right before the request leaves.
 */
export async function createTask(
  call: KlingCall & { dispatching(): Promise<void> },
  task: KlingTask,
): Promise<UpstreamJob> {
  const init = { method: 'POST', headers: headers(call, true), body: JSON.stringify(task.body), signal: call.signal };
  await call.dispatching();
  const data = await send(`${videos(call)}/${task.path}`, init, call.key);
  if (data.task_status === 'failed') throw taskFailed(data.task_status_msg, call.key);
  return jobOf(data, task.path);
}

/** The task Kiln's create asked for under `externalTaskId`; undefined when Kling has none (1203). */
export async function findTask(
  call: KlingCall,
  path: KlingPath,
  externalTaskId: string,
): Promise<UpstreamJob | undefined> {
  if (!ID.test(externalTaskId)) throw new UpstreamFailure('upstream_error', 'the external task id is not usable');
  try {
    const data = await send(
      `${videos(call)}/${path}/${externalTaskId}`,
      { headers: headers(call, false), signal: call.signal },
      call.key,
    );
    const echoed = data.task_info?.external_task_id;
    // A task answered for another id is not the one asked for (a relay that ignores the id, say).
    if (echoed !== undefined && echoed !== externalTaskId)
      throw new UpstreamFailure('upstream_error', 'upstream answered a lookup with another external_task_id');
    return jobOf(data, path);
  } catch (err) {
    if (err instanceof KlingFailure && err.notFound) return undefined;
    throw err;
  }
}

/** One look at the task; a task that ended failed throws its failure. */
export async function readTask(call: KlingCall, job: UpstreamJob): Promise<KlingTaskData & { done: boolean }> {
  const path = job.refs?.path === 'image2video' ? 'image2video' : 'text2video';
  if (!ID.test(job.upstreamId)) throw new UpstreamFailure('upstream_error', 'the upstream task id is not usable');
  const data = await send(
    `${videos(call)}/${path}/${job.upstreamId}`,
    { headers: headers(call, false), signal: call.signal },
    call.key,
  );
  switch (data.task_status) {
    case 'submitted':
    case 'processing':
      return { ...data, done: false };
    case 'succeed':
      return { ...data, done: true };
    case 'failed':
      throw taskFailed(data.task_status_msg, call.key);
    default:
      throw new UpstreamFailure(
        'upstream_error',
        `upstream reported an unknown task status "${String(data.task_status).slice(0, 40)}"`,
      );
  }
}

/**
 * A task that ended `failed`: Kling says why only in words (task_status_msg), so a content refusal
 * reads as invalid_request by its wording, and anything else as upstream_error.
 */
export function taskFailed(reason: string | undefined, key?: string): UpstreamFailure {
  const text = reason || 'no reason given';
  const policy = /risk|safety|sensitive|policy|moderation|violat|inappropriate|prohibit|invalid|not supported/i.test(
    text,
  );
  return new UpstreamFailure(
    policy ? 'invalid_request' : 'upstream_error',
    `the upstream task failed: ${message(text, key)}`,
  );
}
