// Replicate's predictions API, as its HTTP reference documents it and the official clients
// (replicate-javascript lib/predictions.js, replicate-python) speak it:
//   POST {baseUrl}/v1/models/{owner}/{name}/predictions  {input}            (a model, its latest version)
//   POST {baseUrl}/v1/predictions                         {version, input}   (owner/name:version or a version id)
//   GET  {baseUrl}/v1/predictions/{id}                    the prediction: status, output, error, logs
//   POST {baseUrl}/v1/predictions/{id}/cancel
// with `Authorization: Bearer <key>`. Errors are RFC 7807 problem details ({title, detail, status},
// `invalid_fields` on a 422, `retry_after` on a 429). Hand-written rather than the `replicate` npm
// client: that client retries every 429 (and GET 5xx) itself, up to 5 times, with no way to turn
// it off (its maxRetries falls back to 5 on 0), which would hide refusals and their Retry-After
// from Kiln's own routing. No `Prefer: wait`: Kiln checks the job itself (activities/job-watch.ts).
import type { BlobStore } from '../../../src/blobs/local.js';
import { REPLICATE_MODEL } from '../../../src/config/providers.js';
import type { TaskFailureCode } from '../../../src/shared/errors.js';
import type { JobCheck, JobOutput, UpstreamJob } from '../../../src/shared/upstream-job.js';
import type { VideoResult } from '../../../src/shared/video-task.js';
import { causeCode, isRefusalStatus, statusToCode, upstreamMessage } from '../../../src/upstreams/answers.js';
import { TransportFailure, UpstreamFailure } from '../../../src/upstreams/failures.js';
import { fetchText, parseUpstreamJson } from '../../../src/upstreams/http.js';
import { parseRetryAfter } from '../../../src/upstreams/retry-after.js';
import type { Dispatching } from '../../upstream-call.js';
import { storeDownload } from '../http.js';

/** A prediction as Replicate answers it (the fields Kiln reads). */
export interface Prediction {
  id?: string;
  status?: string;
  output?: unknown;
  error?: unknown;
  logs?: string | null;
}

/** What every call needs of the channel: where, which model, and the key. */
export interface ReplicateCall {
  model: { baseUrl?: string | undefined; upstreamModel?: string | undefined; idempotent: boolean };
  key?: string;
  signal: AbortSignal;
}

/** Replicate's prediction ids are short base32 strings: nothing an answer could use to point a call elsewhere. */
const PREDICTION_ID = /^[A-Za-z0-9_-]{1,128}$/;
/** Outputs a finished prediction may hand on (their URLs travel in the workflow's history). */
const MAX_OUTPUTS = 16;

/** A non-2xx answer with Replicate's problem details: the status names the code, the body says why. */
export class ReplicateHttpFailure extends UpstreamFailure {
  constructor(
    readonly status: number,
    text: string,
    key: string | undefined,
    retryAfterHeader: string | null,
    lead = 'upstream answered',
  ) {
    const problem = parseProblem(text);
    const retryAfterS = parseRetryAfter(retryAfterHeader) ?? problem.retryAfterS;
    const code: TaskFailureCode = statusToCode(status);
    super(code, `${lead} ${status}: ${upstreamMessage(JSON.stringify({ error: problem.message }), key)}`, false, {
      status,
      refused: isRefusalStatus(status),
      ...(status === 429 && retryAfterS !== undefined ? { retryAfterMs: Math.round(retryAfterS * 1000) } : {}),
    });
  }
  override get transient(): boolean {
    return this.status >= 500 || this.status === 429 || this.status === 408;
  }
}

interface Problem {
  message: string;
  retryAfterS?: number;
}

/** title: detail, and each invalid field by name (`input.aspect_ratio: …`), so a 422 says which input. */
function parseProblem(text: string): Problem {
  let j: Record<string, unknown>;
  try {
    j = JSON.parse(text) as Record<string, unknown>;
    if (!j || typeof j !== 'object') return { message: text };
  } catch {
    return { message: text };
  }
  const str = (v: unknown) => (typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined);
  const fields = Array.isArray(j.invalid_fields)
    ? (j.invalid_fields as Record<string, unknown>[])
        .map((f) => [str(f?.field), str(f?.description)].filter(Boolean).join(': '))
        .filter(Boolean)
    : [];
  const detail = fields.length
    ? fields.join('; ')
    : (str(j.detail) ?? (j.detail ? JSON.stringify(j.detail) : undefined));
  const message = [str(j.title), detail].filter(Boolean).join(': ') || text;
  const retry = typeof j.retry_after === 'number' && j.retry_after >= 0 ? j.retry_after : undefined;
  return { message, ...(retry !== undefined ? { retryAfterS: retry } : {}) };
}

function base(call: ReplicateCall): string {
  return `${call.model.baseUrl!.replace(/\/+$/, '')}/v1`;
}

function headers(call: ReplicateCall, json = false): Record<string, string> {
  return {
    ...(call.key ? { authorization: `Bearer ${call.key}` } : {}),
    ...(json ? { 'content-type': 'application/json' } : {}),
  };
}

async function prediction(url: string, init: RequestInit & { signal: AbortSignal }, key?: string): Promise<Prediction> {
  const { res, text } = await fetchText(url, init);
  if (!res.ok) throw new ReplicateHttpFailure(res.status, text, key, res.headers.get('retry-after'));
  const p = parseUpstreamJson<Prediction>(text);
  if (!p || typeof p !== 'object')
    throw new UpstreamFailure('upstream_error', 'upstream answered with JSON that is not a prediction');
  return p;
}

/** Where a create goes: the model's predictions route for `owner/name`, else /predictions with the version. */
export function createRoute(upstreamModel: string): { path: string; version?: string } {
  if (!REPLICATE_MODEL.test(upstreamModel))
    throw new UpstreamFailure(
      'invalid_request',
      `upstreamModel "${upstreamModel.slice(0, 80)}" is not a Replicate model`,
    );
  const colon = upstreamModel.indexOf(':');
  if (colon >= 0) return { path: '/predictions', version: upstreamModel.slice(colon + 1) };
  if (!upstreamModel.includes('/')) return { path: '/predictions', version: upstreamModel };
  const [owner, name] = upstreamModel.split('/') as [string, string];
  return { path: `/models/${encodeURIComponent(owner)}/${encodeURIComponent(name)}/predictions` };
}

/**
 * Starts a prediction. Replicate takes no idempotency key: a lost answer may have started one
 * (uncertain on a non-idempotent channel). A relay that deduplicates gets the task id in
 * `Idempotency-Key`, as the other providers send it, when the channel says `idempotent`.
 */
export async function createPrediction(
  call: ReplicateCall & { dispatching: Dispatching },
  input: Record<string, unknown>,
  taskId: string,
): Promise<UpstreamJob> {
  const route = createRoute(call.model.upstreamModel ?? '');
  const body = { ...(route.version ? { version: route.version } : {}), input };
  const h = headers(call, true);
  if (call.model.idempotent) h['idempotency-key'] = taskId;
  await call.dispatching();
  const p = await prediction(
    `${base(call)}${route.path}`,
    { method: 'POST', headers: h, body: JSON.stringify(body), signal: call.signal },
    call.key,
  );
  if (typeof p.id !== 'string' || !PREDICTION_ID.test(p.id))
    throw new UpstreamFailure('upstream_error', 'upstream accepted the prediction without a usable id');
  if (p.status === 'failed') throw predictionFailed(p, call.key);
  return { upstreamId: p.id };
}

function predictionUrl(call: ReplicateCall & { job: UpstreamJob }, suffix = ''): string {
  if (!PREDICTION_ID.test(call.job.upstreamId))
    throw new UpstreamFailure('upstream_error', 'the upstream prediction id is not usable');
  return `${base(call)}/predictions/${encodeURIComponent(call.job.upstreamId)}${suffix}`;
}

/** One look at the prediction: running (with the progress its logs show), its outputs, or why it ended. */
export async function checkPrediction(call: ReplicateCall & { job: UpstreamJob }): Promise<JobCheck> {
  const p = await prediction(predictionUrl(call), { headers: headers(call), signal: call.signal }, call.key);
  switch (p.status) {
    case 'starting':
    case 'processing': {
      const progress = progressOf(p.logs);
      return { state: 'running', ...(progress !== undefined ? { progress } : {}) };
    }
    case 'succeeded':
      return { state: 'completed', outputs: outputsOf(p.output) };
    case 'failed':
      throw predictionFailed(p, call.key);
    case 'aborted':
      throw new UpstreamFailure('upstream_timeout', 'the prediction reached its deadline before it started (aborted)');
    case 'canceled':
      throw new UpstreamFailure('upstream_error', 'the prediction was canceled at the upstream');
    default:
      throw new UpstreamFailure(
        'upstream_error',
        `upstream reported an unknown prediction status "${String(p.status).slice(0, 40)}"`,
      );
  }
}

export async function cancelPrediction(call: ReplicateCall & { job: UpstreamJob }): Promise<void> {
  await prediction(
    predictionUrl(call, '/cancel'),
    { method: 'POST', headers: headers(call), signal: call.signal },
    call.key,
  );
}

/** The file URLs of `output`: one URL, a list of them, or an object holding them (in its order). */
export function outputsOf(output: unknown): JobOutput[] {
  const urls: string[] = [];
  const walk = (v: unknown, depth: number) => {
    if (urls.length >= MAX_OUTPUTS || depth > 3) return;
    if (typeof v === 'string') {
      if (/^https?:\/\//i.test(v) && v.length <= 2048) urls.push(v);
    } else if (Array.isArray(v)) v.forEach((x) => walk(x, depth + 1));
    else if (v && typeof v === 'object') Object.values(v).forEach((x) => walk(x, depth + 1));
  };
  walk(output, 0);
  if (!urls.length) throw new UpstreamFailure('upstream_error', 'the prediction succeeded without an output file');
  return urls.map((url) => ({ url }));
}

/** Models report progress only in their logs: the last tqdm bar (`76%|███   | 7568/10000`), as the SDK reads it. */
export function progressOf(logs: unknown): number | undefined {
  if (typeof logs !== 'string') return undefined;
  const lines = logs
    .slice(-8192)
    .split(/[\r\n]+/)
    .reverse();
  for (const line of lines) {
    const m = /^\s*(\d{1,3})%\s*\|.*?\|\s*\d+\/\d+/.exec(line);
    if (m) return Math.min(99, Number(m[1]));
  }
  return undefined;
}

/** Safety checkers' wording on Replicate's models (NSFW, "flagged as sensitive" E005, content policy). */
const CONTENT_POLICY =
  /nsfw|flagged as sensitive|\bE005\b|content (policy|moderation|filter)|safety (filter|checker|system)|unsafe content/i;

/** A prediction that ended `failed`: a safety refusal is the caller's request (invalid_request), else upstream_error. */
export function predictionFailed(p: Prediction, key?: string): UpstreamFailure {
  const error = typeof p.error === 'string' ? p.error : p.error ? JSON.stringify(p.error) : 'no error given';
  const message = upstreamMessage(JSON.stringify({ error }), key);
  if (CONTENT_POLICY.test(error))
    return new UpstreamFailure('invalid_request', `the upstream refused the content (safety filter): ${message}`);
  return new UpstreamFailure('upstream_error', `the prediction failed: ${message}`);
}

const TYPE_BY_MIME: Record<string, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/webp': 'webp',
  'image/gif': 'gif',
  'video/mp4': 'mp4',
};

/**
 * Copies one output file into the blob store. The key goes only to the channel's own origin (files
 * served by the API itself); delivery hosts get none, and fetch drops it on a redirect elsewhere.
 */
export async function copyOutput(
  blobs: BlobStore,
  call: ReplicateCall,
  url: string,
  fallbackType: string,
): Promise<VideoResult> {
  const target = new URL(url);
  if (target.protocol !== 'https:' && target.protocol !== 'http:')
    throw new UpstreamFailure('upstream_error', `an output is a ${target.protocol} URL, which is not fetched`);
  const own = new URL(call.model.baseUrl!).origin;
  const h: Record<string, string> = call.key && target.origin === own ? { authorization: `Bearer ${call.key}` } : {};
  let res: Response;
  try {
    res = await fetch(target, { headers: h, signal: call.signal });
  } catch (err) {
    if (call.signal.aborted) throw err;
    throw new TransportFailure(`download failed (${causeCode(err) ?? (err as Error).message})`, false);
  }
  const ext = /\.([A-Za-z0-9]{1,5})$/.exec(target.pathname)?.[1]?.toLowerCase();
  const mime = res.headers.get('content-type')?.split(';')[0]?.trim().toLowerCase() ?? '';
  const type = ext && ext !== 'bin' ? ext : (TYPE_BY_MIME[mime] ?? fallbackType);
  return storeDownload(blobs, res, url, type, call.signal, call.key);
}
