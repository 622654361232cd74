// Runway's task API (API version 2024-11-06), through the official client `@runwayml/sdk`:
//   POST {baseUrl}/v1/image_to_video | /v1/text_to_video → {id}
//   GET  {baseUrl}/v1/tasks/{id} → {status: PENDING|THROTTLED|RUNNING|SUCCEEDED|FAILED|CANCELLED, …}
//   DELETE {baseUrl}/v1/tasks/{id} → 204 (cancels a task not yet ended; 404 once it is gone)
// The client is Stainless-generated: `maxRetries: 0` switches its own retries off (it would resend a
// create on 429/5xx/connection errors, which may cost a second generation), and its injected
// `fetch` lets Kiln await the dispatch mark right before the request leaves, and keep what failed
// at the send before the client wraps it. Runway takes no id of the caller's, so a create whose
// answer is lost cannot be looked up: it ends the task `uncertain` (no `lookup`).
import RunwayML, { APIError } from '@runwayml/sdk';
import type { TaskFailureCode } from '../../../src/shared/errors.js';
import type { RunwayTask } from '../../../src/shared/runway.js';
import type { UpstreamJob } from '../../../src/shared/upstream-job.js';
import {
  causeCode,
  isRefusalStatus,
  notDispatched,
  statusToCode,
  upstreamMessage,
} from '../../../src/upstreams/answers.js';
import { TransportFailure, UpstreamFailure } from '../../../src/upstreams/failures.js';
import { parseRetryAfter } from '../../../src/upstreams/retry-after.js';
import type { Dispatching } from '../../upstream-call.js';

/** What a call needs: the channel's settings over the model's, the key and Kiln's abort signal. */
export interface RunwayCall {
  model: { baseUrl?: string | undefined; timeoutMs: number; idempotent: boolean };
  key?: string;
  signal: AbortSignal;
}

/** The task as GET /v1/tasks/{id} answers it, as far as Kiln reads it. */
export interface RunwayTaskAnswer {
  id?: string;
  status?: string;
  progress?: number;
  output?: unknown;
  failure?: string;
  failureCode?: string;
}

/** Pinned, so a newer client cannot change the answers' shape under Kiln. */
const RUNWAY_VERSION = '2024-11-06';
/** Task ids are UUIDs: nothing an answer says can point a later call elsewhere on the host. */
const TASK_ID = /^[0-9a-fA-F-]{36}$/;

/**
 * The failure of a non-2xx answer. A 400's body names the field (`issues[].path`) and Runway
 * answers an account out of credits with a 400 too ("You do not have enough credits to run this
 * task."); 502 and 503 are Runway shedding load, refused before any work like a 429.
 */
export class RunwayFailure extends UpstreamFailure {
  constructor(
    readonly status: number,
    body: unknown,
    key: string | undefined,
    retryAfterHeader: string | null | undefined,
  ) {
    const { error, field, issue } = readError(body);
    const credits = /enough credits|insufficient credits|out of credits/i.test(error);
    const code: TaskFailureCode = credits ? 'insufficient_balance' : statusToCode(status);
    const refused = isRefusalStatus(status) || status === 502 || credits;
    const retryAfter = parseRetryAfter(retryAfterHeader ?? null);
    const text = field ? `${field}: ${issue || error}` : error;
    super(code, `upstream answered ${status}: ${upstreamMessage(JSON.stringify({ error: text }), key)}`, false, {
      status,
      refused,
      ...(retryAfter !== undefined ? { retryAfterMs: retryAfter * 1000 } : {}),
    });
  }
  override get transient(): boolean {
    return this.status >= 500 || this.status === 429 || this.status === 408;
  }
}

function readError(body: unknown): { error: string; field?: string; issue?: string } {
  const b = (body && typeof body === 'object' ? body : {}) as { error?: unknown; issues?: unknown };
  const error = typeof b.error === 'string' ? b.error : body === undefined ? '(no body)' : JSON.stringify(body);
  const first = Array.isArray(b.issues)
    ? (b.issues[0] as { path?: unknown; message?: unknown } | undefined)
    : undefined;
  const path = Array.isArray(first?.path) ? first.path.map(String).join('.') : undefined;
  return {
    error,
    ...(path ? { field: path.slice(0, 80) } : {}),
    ...(typeof first?.message === 'string' ? { issue: first.message } : {}),
  };
}

/**
 * A task that ended FAILED, by its `failureCode` (Runway's "task failures" page): SAFETY.* and
 * INPUT_PREPROCESSING.SAFETY.* are its content moderation, which Kiln reports as invalid_request
 * (the caller must change the request; Kiln has no code of its own for it); ASSET.INVALID and other
 * input problems too; INTERNAL.* (a bad output, a system error) are the upstream's.
 */
export function taskFailed(
  failureCode: string | undefined,
  failure: string | undefined,
  key?: string,
): UpstreamFailure {
  const c = (failureCode ?? 'unknown').slice(0, 60);
  const why = upstreamMessage(JSON.stringify({ error: failure ?? 'no reason given' }), key);
  if (/^(INPUT_PREPROCESSING\.)?SAFETY\b/.test(c))
    return new UpstreamFailure(
      'invalid_request',
      `content policy: Runway's moderation refused the request (${c}): ${why}`,
    );
  if (/^ASSET\.|^INPUT_PREPROCESSING\./.test(c))
    return new UpstreamFailure('invalid_request', `Runway could not use an input (${c}): ${why}`);
  return new UpstreamFailure('upstream_error', `the upstream task failed (${c}): ${why}`);
}

/**
 * The fetch the client is given: it awaits the dispatch mark right before the request can leave,
 * and keeps a failure at the send (the mark's own, or a transport failure with whether the request
 * may have left), which the client would wrap as an APIConnectionError.
 */
function sender(dispatching: Dispatching) {
  const s: { failed?: Error; fetch: typeof fetch } = {
    fetch: async (url, init) => {
      try {
        await dispatching();
      } catch (err) {
        s.failed = err as Error;
        throw err;
      }
      try {
        return await fetch(url, init);
      } catch (err) {
        if (!init?.signal?.aborted) {
          const code = causeCode(err);
          s.failed = new TransportFailure(
            `upstream connection failed (${code ?? (err as Error).message})`,
            !notDispatched(code),
          );
        }
        throw err;
      }
    },
  };
  return s;
}

/**
 * A client for one call. The key, base URL, version and log level are set here, so nothing is read
 * from the worker's RUNWAYML_* variables but RUNWAYML_CUSTOM_HEADERS (extra headers an operator
 * sets on purpose); the call's budget is Kiln's (the signal), the client's timeout only a backstop.
 */
function client(call: RunwayCall, fetchFn: typeof fetch): RunwayML {
  return new RunwayML({
    apiKey: call.key ?? 'none',
    ...(call.key ? {} : { defaultHeaders: { Authorization: null } }),
    baseURL: call.model.baseUrl!.replace(/\/+$/, ''),
    runwayVersion: RUNWAY_VERSION,
    maxRetries: 0,
    timeout: call.model.timeoutMs + 60_000,
    logLevel: 'off',
    fetch: fetchFn,
  });
}

/** Runs one client call, its failure in Kiln's terms. */
async function send<T>(
  call: RunwayCall,
  dispatching: Dispatching,
  request: (c: RunwayML) => PromiseLike<T>,
): Promise<T> {
  const sent = sender(dispatching);
  try {
    return await request(client(call, sent.fetch));
  } catch (err) {
    if (call.signal.aborted) throw err;
    if (sent.failed) throw sent.failed;
    if (err instanceof APIError && err.status !== undefined)
      throw new RunwayFailure(err.status, err.error, call.key, err.headers?.get('retry-after'));
    // The answer broke off after its request left (its body cut or not JSON).
    throw new TransportFailure(`upstream answer failed (${causeCode(err) ?? (err as Error).message})`, true);
  }
}

const noMark: Dispatching = () => Promise.resolve();

/** Starts the task: its id, or the failure (a lost answer is a dispatched TransportFailure: `uncertain`). */
export async function createTask(
  call: RunwayCall & { dispatching: Dispatching },
  task: RunwayTask,
  taskId: string,
): Promise<UpstreamJob> {
  // Runway documents no idempotency header; a relay in front of it may deduplicate on this one.
  const headers = call.model.idempotent ? { 'Idempotency-Key': taskId } : undefined;
  const answer = await send(call, call.dispatching, (c) =>
    c.post<{ id?: unknown }>(`/v1/${task.path}`, {
      body: task.body,
      signal: call.signal,
      ...(headers ? { headers } : {}),
    }),
  );
  const id = answer?.id;
  if (typeof id !== 'string' || !TASK_ID.test(id))
    throw new UpstreamFailure('upstream_error', 'upstream accepted the task without a usable id');
  return { upstreamId: id };
}

/** One look at the task. */
export async function readTask(call: RunwayCall, job: UpstreamJob): Promise<RunwayTaskAnswer> {
  const id = taskId(job);
  try {
    return (await send(call, noMark, (c) => c.tasks.retrieve(id, { signal: call.signal }))) as RunwayTaskAnswer;
  } catch (err) {
    if (err instanceof RunwayFailure && err.status === 404)
      throw new UpstreamFailure('upstream_error', 'Runway no longer knows the task (canceled or deleted there)');
    throw err;
  }
}

/** Cancels the task; one Runway no longer has (404: already ended and deleted) is already stopped. */
export async function deleteTask(call: RunwayCall, job: UpstreamJob): Promise<void> {
  const id = taskId(job);
  try {
    await send(call, noMark, (c) => c.tasks.delete(id, { signal: call.signal }));
  } catch (err) {
    if (err instanceof RunwayFailure && err.status === 404) return;
    throw err;
  }
}

function taskId(job: UpstreamJob): string {
  if (!TASK_ID.test(job.upstreamId)) throw new UpstreamFailure('upstream_error', 'the upstream task id is not usable');
  return job.upstreamId;
}
