// Webhook delivery attempts (Standard Webhooks): one POST per activity run, signed with the owner's
// current secret, through the same address rules as reference-image downloads. The delivery
// workflow (workflows/webhook-delivery.ts) runs the attempts and sleeps between them, so retries
// survive restarts and each attempt is its own activity in the Web UI.
import type { LookupAddress } from 'node:dns';
import { lookup as dnsLookup } from 'node:dns';
import { request, type RequestOptions } from 'node:https';
import type { LookupFunction } from 'node:net';
import { ApplicationFailure } from '@temporalio/activity';
import ipaddr from 'ipaddr.js';
import { refusedAddress, type Resolver } from '../src/infra/safe-fetch.js';
import { deadline } from '../src/shared/deadline.js';
import type { TaskStore } from '../src/tasks/store/task-store.js';
import { recordWebhookState } from '../src/tasks/store/webhook-state.js';
import { STATUS_RANK, TERMINAL_STATUSES, type TaskStatus } from '../src/shared/task.js';
import type { AnyTaskRecord } from '../src/shared/records.js';
import { storedViews } from '../src/shared/views.js';
import type { WebhookState } from '../src/shared/webhook-types.js';
import { currentGeneration, signature, signingKey, webhookRoot } from '../src/webhooks/secret.js';

/** One delivery: a task's record at one event, for one URL. The same on every attempt. */
export interface WebhookDelivery {
  /** The `webhook-id` header: receivers recognise a repeated delivery by it. */
  messageId: string;
  url: string;
  /** The task's record when the event happened; its status is the event. */
  record: AnyTaskRecord;
  /** `webhook_events=all`: the event delivered before this one, whose first attempt goes first. */
  after?: TaskStatus;
}

export interface WebhookAttempt extends WebhookDelivery {
  /** 1 for the first attempt. */
  attempt: number;
  /** When the delivery began (epoch ms): retries stop `maxAgeMs` after it. */
  startedAtMs: number;
}

/** An attempt's outcome: the state written to the task, and when to try again (null: never). */
export interface AttemptResult {
  state: WebhookState;
  retryInMs: number | null;
}

export interface WebhookRetry {
  initialMs: number;
  maxMs: number;
  /** How long a delivery is retried before it is given up (`failed`). */
  maxAgeMs: number;
}

export interface WebhookDeps {
  store: Pick<TaskStore, 'redis' | 'taskKey' | 'get'>;
  /** The owner key (derived from KILN_SECRET): signing keys are derived from it. */
  ownerKey: Buffer;
  redisPrefix: string;
  retry: WebhookRetry;
  /** Test-only exemptions from the address rules (as REFERENCE_FETCH_ALLOW). */
  allow?: string[];
  /** Extra trusted CA certificates (PEM) for receivers behind a private CA. */
  ca?: string;
  resolve?: Resolver;
}

export const WEBHOOK_TIMEOUT_MS = 10_000;
/** How long a delivery waits for the previous event's first attempt before going ahead anyway. */
const ORDER_WAIT_MS = 10_000;

/** The receiver must not be contacted: a permanent failure. */
class Refused extends Error {}

const systemResolve: Resolver = (hostname) =>
  new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses)));
  });

export function createWebhookActivities(deps: WebhookDeps) {
  const root = webhookRoot(deps.ownerKey);
  const allow = deps.allow ?? [];
  const resolve = deps.resolve ?? systemResolve;
  const refusal = (host: string, address: string) => {
    const why = refusedAddress(address, allow);
    return why ? new Refused(`${host} resolves to a ${why} (${address}); webhooks go to public addresses only`) : null;
  };
  // Runs inside net.connect, so the address checked is the address connected to.
  const guardedLookup: LookupFunction = (hostname, options, callback) => {
    resolve(hostname)
      .then((addresses: LookupAddress[]) => {
        if (addresses.length === 0) throw new Refused(`${hostname} does not resolve`);
        for (const a of addresses) {
          const r = refusal(hostname, a.address);
          if (r) throw r;
        }
        if (options.all) (callback as (e: null, a: LookupAddress[]) => void)(null, addresses);
        else callback(null, addresses[0]!.address, addresses[0]!.family);
      })
      .catch((err: Error) => callback(err, '', 0));
  };

  /** POSTs once; resolves with the status code (the body is read and dropped). */
  function post(url: URL, headers: Record<string, string>, body: string): Promise<number> {
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (ipaddr.isValid(host)) {
      const r = refusal(host, host);
      if (r) return Promise.reject(r);
    }
    const timeout = deadline(WEBHOOK_TIMEOUT_MS);
    const options: RequestOptions = {
      method: 'POST',
      agent: false,
      lookup: guardedLookup,
      signal: timeout.signal,
      headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      ...(deps.ca ? { ca: deps.ca } : {}),
    };
    return new Promise<number>((done, fail) => {
      const req = request(url, options, (res) => {
        res.resume();
        res.on('end', () => done(res.statusCode ?? 0));
        res.on('error', fail);
      });
      req.on('error', fail);
      req.end(body);
    }).finally(timeout.clear);
  }

  /** Why an attempt failed, in words for `last_error`; `permanent` when retrying cannot help. */
  function failure(err: unknown): { why: string; permanent: boolean } {
    const e = err as NodeJS.ErrnoException & { cause?: unknown };
    if (e instanceof Refused) return { why: e.message, permanent: true };
    if (e.cause instanceof Refused) return { why: e.cause.message, permanent: true };
    if (e.name === 'TimeoutError' || e.name === 'AbortError')
      return { why: `no answer within ${WEBHOOK_TIMEOUT_MS / 1000} s`, permanent: false };
    return { why: `the receiver could not be reached (${e.code ?? e.message})`, permanent: false };
  }

  // Which events of a task have had a first attempt: the next event's delivery waits for it, so a
  // healthy receiver sees a task's events in order.
  const triedKey = (id: string) => `${deps.redisPrefix}webhook-tried:{${id}}`;
  const markTried = async (id: string, status: TaskStatus) => {
    await deps.store.redis.hset(triedKey(id), status, '1');
    await deps.store.redis.expire(triedKey(id), 2 * 86400);
  };
  async function waitForPrevious(id: string, previous: TaskStatus): Promise<void> {
    const until = Date.now() + ORDER_WAIT_MS;
    while (Date.now() < until && !(await deps.store.redis.hexists(triedKey(id), previous)))
      await new Promise((r) => setTimeout(r, 50));
  }

  return {
    /**
     * One delivery attempt. Sends only once the read model shows the event's state (a poll is
     * never behind a webhook), then writes the outcome into the task's `webhook`.
     */
    async deliverWebhook(a: WebhookAttempt): Promise<AttemptResult> {
      const stored = (await deps.store.get(a.record.id)) as AnyTaskRecord | null;
      if (!stored || STATUS_RANK[stored.status] < STATUS_RANK[a.record.status])
        throw ApplicationFailure.retryable(`the read model does not show ${a.record.status} yet`, 'read_model_behind');
      // A terminal event is sent as stored (the first terminal write wins); an earlier one as it was.
      const ended = (r: AnyTaskRecord) => TERMINAL_STATUSES.includes(r.status);
      const source = stored.status === a.record.status || (ended(stored) && ended(a.record)) ? stored : a.record;
      // `webhook` describes this very delivery: not part of what is delivered.
      const { webhook: _self, ...view } = JSON.parse(storedViews(source).view) as Record<string, unknown>;
      const body = JSON.stringify(view);
      if (a.after && a.attempt === 1) await waitForPrevious(a.record.id, a.after);
      const generation = await currentGeneration(deps.store.redis, deps.redisPrefix, a.record.owner);
      const key = signingKey(root, a.record.owner, generation);
      const timestamp = Math.floor(Date.now() / 1000);
      const headers = {
        'content-type': 'application/json',
        'user-agent': 'kiln-webhook',
        'webhook-id': a.messageId,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signature(key, a.messageId, timestamp, body),
      };
      let result: AttemptResult;
      try {
        const status = await post(new URL(a.url), headers, body);
        if (status >= 200 && status < 300)
          result = { state: { status: 'delivered', attempts: a.attempt, last_error: null }, retryInMs: null };
        else if (status === 410)
          result = {
            state: { status: 'stopped', attempts: a.attempt, last_error: 'the receiver answered 410 Gone' },
            retryInMs: null,
          };
        else result = retryOrGiveUp(a, `the receiver answered ${status}`, deps.retry);
      } catch (err) {
        const { why, permanent } = failure(err);
        result = permanent
          ? { state: { status: 'failed', attempts: a.attempt, last_error: why }, retryInMs: null }
          : retryOrGiveUp(a, why, deps.retry);
      }
      // Best effort: a state Redis refused now is written by the next attempt.
      await recordWebhookState(deps.store, a.record.id, source.status, result.state).catch(() => false);
      if (a.attempt === 1) await markTried(a.record.id, a.record.status).catch(() => undefined);
      return result;
    },
  };
}

/** Doubling backoff from initialMs up to maxMs; past maxAgeMs since the first attempt, failed. */
export function retryOrGiveUp(a: Pick<WebhookAttempt, 'attempt' | 'startedAtMs'>, why: string, r: WebhookRetry) {
  const delay = Math.min(r.maxMs, r.initialMs * 2 ** Math.min(a.attempt - 1, 30));
  if (Date.now() + delay - a.startedAtMs > r.maxAgeMs) {
    const hours = Math.round((r.maxAgeMs / 3_600_000) * 100) / 100;
    return {
      state: { status: 'failed', attempts: a.attempt, last_error: `${why}; gave up after ${hours} h` },
      retryInMs: null,
    } satisfies AttemptResult;
  }
  return {
    state: { status: 'pending', attempts: a.attempt, last_error: why },
    retryInMs: delay,
  } satisfies AttemptResult;
}

export type WebhookActivities = ReturnType<typeof createWebhookActivities>;
