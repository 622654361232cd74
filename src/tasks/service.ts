// The task kernel's service: one submit flow (idempotency, admission, start, replay) and one read
// path (poll, long-poll, Temporal fallback, cancel) for every task kind. A kind's service adds only
// what is its own: its request, its workflow input and its answers.
import { randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { type Config } from '../config/env.js';
import { upstreamQueue, type ImageModel, type Model, type VideoModel } from '../config/models.js';
import { findModel } from '../infra/models.js';
import type { Caller } from '../infra/callers.js';
import type { TaskStore } from './store/task-store.js';
import { longPoll } from './long-poll.js';
import type { WaitAsk, WaitRegistry } from './waits.js';
import { idempotencySecret, idempotentTaskId, requestFingerprint } from '../shared/idempotency.js';
import { KilnError } from '../shared/errors.js';
import type { AnyTaskRecord } from '../shared/records.js';
import { UNFINISHED_STATUSES, type ActivityPolicy, type TaskInput } from '../shared/task.js';
import type { WebhookTarget } from '../shared/webhook-types.js';
import { cancelTask, type CancelAnswer } from './cancel.js';
import { readFromTemporal } from './fallback.js';
import { notFound, type TaskKind } from './kind.js';
import { finishedView, pollViews, taskLimiterKey, type ViewText } from './poll.js';
import { priorSubmit, replayedRecord } from './replay.js';
import { startTask, type StartTask } from './start.js';
import { taskSummary } from './summary.js';
import { imageRunsJobs } from '../config/providers.js';

/** Lookups in Temporal per read at most: a batch of unknown ids must not become a visibility scan. */
const FALLBACK_LOOKUPS = 100;

/** The input every task kind's workflow starts with: the task, its attempt policy and the model's queue. */
export interface BaseWorkflowInput<Q> {
  task: TaskInput<Q>;
  policy: ActivityPolicy;
  activityQueue: string;
}

/** A kind's submit, as the kernel runs it. */
export interface Submission<Q, I, R> {
  request: Q;
  /** What the request was made through (`generateContent`, `videos`): part of a keyed submit's fingerprint. */
  operation: string;
  idempotencyKey?: string;
  webhook?: WebhookTarget;
  /** The prompt, for the workflow's summary in the Web UI. */
  prompt: string;
  /** The kind's workflow and its input (and memo) from the common input. */
  workflow(base: BaseWorkflowInput<Q>): {
    workflowType: StartTask['workflowType'];
    input: I;
    memo?: Record<string, unknown>;
  };
  /** The record a new task starts with (`accepted`). */
  record(input: I): R;
  /** What the task costs against its owner's quota (the model's units; per second of video). */
  units: number;
}

/** A submit's claim on its owner's limits: what the admission reserves before a workflow starts. */
export interface AdmissionAsk {
  caller: Caller;
  id: string;
  model: { id: string; chargeFailed: boolean };
  units: number;
}

/**
 * What the kernel is handed rather than imports: the owner's limits (src/usage), a key's model
 * allow-list (src/keys) and the webhook parameters' rules (src/webhooks). src/api/kernel.ts builds it.
 */
export interface KernelDeps {
  /** Reserves the submit's units, or throws the refusal; `fresh`: this call made the reservation. */
  admit(ask: AdmissionAsk): Promise<{ fresh: boolean }>;
  /** Gives back a reservation no task came of (best effort: the sweep is the net under it). */
  unadmit(owner: string, id: string): Promise<void>;
  /** Throws model_not_allowed for a model outside the caller's key's allow-list. */
  allowModel(caller: Caller, model: string): void;
  /** The submit's webhook parameters, checked (invalid_webhook_url); undefined when none was given. */
  webhookTarget(url: unknown, events: unknown): WebhookTarget | undefined;
  /** Long-polls (`wait`); without it a wait answers at once. */
  waits?: WaitRegistry;
}

export abstract class TaskService<R extends AnyTaskRecord> {
  protected abstract readonly spec: TaskKind<R>;
  private readonly idSecret: Buffer;
  constructor(
    protected readonly config: Config,
    protected readonly store: TaskStore,
    protected readonly temporal: Client,
    protected readonly deps: KernelDeps,
  ) {
    this.idSecret = idempotencySecret(config.ownerKey);
  }

  protected get waits(): WaitRegistry | undefined {
    return this.deps.waits;
  }

  /** This kind's model of that id; model_not_found otherwise, model_not_allowed outside the caller's key's list. */
  model(id: string, caller?: Caller): Extract<Model, { kind: R['kind'] }> {
    const model = findModel(this.config.models, this.spec.kind, id);
    if (caller) this.deps.allowModel(caller, id);
    return model;
  }

  /** The submit's webhook parameters, checked (invalid_webhook_url); undefined when none was given. */
  webhookTarget(url: unknown, events: unknown): WebhookTarget | undefined {
    return this.deps.webhookTarget(url, events);
  }

  /**
   * Starts the caller's task, or with an Idempotency-Key finds the task that key already named for
   * the same request (`replayed`). Temporal decides between concurrent submits of one key.
   */
  protected async submitTask<Q, I>(
    caller: Caller,
    model: ImageModel | VideoModel,
    sub: Submission<Q, I, R>,
  ): Promise<{ record: R; replayed: boolean }> {
    // Whatever route led here: no workflow starts for a model outside the key's allow-list.
    this.deps.allowModel(caller, model.id);
    const { kind } = this.spec;
    const key = sub.idempotencyKey;
    const id = key
      ? idempotentTaskId(this.idSecret, this.spec.idPrefix, caller.owner, key)
      : `${this.spec.idPrefix}_${randomBytes(16).toString('hex')}`;
    const fingerprint = key ? requestFingerprint(sub.operation, model.id, sub.request, sub.webhook) : undefined;
    const prior = fingerprint && (await priorSubmit<R>(this.store, id, kind, caller.owner, fingerprint));
    if (prior) return { record: prior, replayed: true };
    const created_at = Math.floor(Date.now() / 1000);
    const workflow = sub.workflow(this.workflowInput(caller, model, id, created_at, sub.request, sub.webhook));
    const { fresh } = await this.deps.admit({ caller, id, model, units: sub.units });
    // Test-only: the crash the sweep exists for, between the reservation and the workflow's start.
    if (this.config.crashAfterAdmission) process.kill(process.pid, 'SIGKILL');
    // A reservation this submit made, when no task of its own came of it.
    const undo = () => (fresh ? this.deps.unadmit(caller.owner, id).catch(() => undefined) : undefined);
    const outcome = await startTask({ config: this.config, store: this.store, temporal: this.temporal }, {
      ...workflow,
      id,
      owner: caller.owner,
      model: model.id,
      summary: taskSummary(kind, model.id, caller.owner, sub.prompt, this.config.ops.summaryPromptChars),
      ...(fingerprint ? { idempotency: { fingerprint, created_at } } : {}),
      // The kind pairs its workflow type with that workflow's input; TypeScript cannot follow the pairing here.
    } as StartTask).catch(async (err: unknown) => {
      await undo();
      throw err;
    });
    if (outcome.replayed) {
      await undo();
      const ids = { id, owner: caller.owner, model: model.id };
      return {
        record: await replayedRecord(this.store, this.spec.fallback, kind, ids, outcome.existing),
        replayed: true,
      };
    }
    const record = sub.record(workflow.input);
    // The workflow records its own transitions; this write makes an immediate poll cheap, and a
    // failure here only means that poll takes the Temporal path.
    await this.store.transition(record).catch(() => undefined);
    if (fingerprint) await this.store.rememberFingerprint(id, fingerprint).catch(() => undefined);
    return { record, replayed: false };
  }

  private workflowInput<Q>(
    caller: Caller,
    model: ImageModel | VideoModel,
    id: string,
    created_at: number,
    request: Q,
    webhook?: WebhookTarget,
  ): BaseWorkflowInput<Q> {
    return {
      task: {
        id,
        owner: caller.owner,
        model: model.id,
        created_at,
        request,
        ...(caller.credential ? { credential: caller.credential } : {}),
        ...(webhook ? { webhook } : {}),
      },
      policy: {
        // The longest call any of its channels may make, after the longest wait for one with room.
        timeoutMs: Math.max(...model.channels.map((c) => c.timeoutMs)),
        queueMs: model.queueTimeoutMs,
        heartbeatTimeoutMs: model.heartbeatTimeoutMs,
        maxAttempts: model.maxAttempts,
        // Only when set, so other tasks' input (and history) stays as it was.
        ...(model.kind === 'image' && model.inline ? { inline: true } : {}),
        ...(model.kind === 'image' && imageRunsJobs(model.provider)
          ? { job: { pollIntervalMs: model.pollIntervalMs, overallTimeoutMs: model.overallTimeoutMs } }
          : {}),
      },
      activityQueue: upstreamQueue(this.config.temporal, model.id),
    };
  }

  /**
   * One task, behind the per-task poll limiter. With `wait`, a long-poll: the limited read comes
   * first, the read after a change or the time is not limited; `waited` says it was honoured.
   */
  async get(caller: Caller, id: string, wait?: WaitAsk): Promise<ViewText & { waited?: boolean }> {
    // Built only when needed: an Error's stack trace is a visible share of a poll's CPU.
    if (!this.spec.idPattern.test(id)) throw notFound(this.spec, id);
    const limiter = taskLimiterKey(caller.owner, id);
    const read = (limited: boolean) =>
      this.views(caller, [id], limited ? limiter : null, limited ? this.config.rateLimitTaskMs : 0);
    const share = `${this.spec.kind}\n${caller.owner}\n${id}`;
    const { views, applied } = await longPoll(this.waits, [id], wait, read, { label: this.spec.label, share });
    const [view] = views;
    if (!view) throw notFound(this.spec, id);
    return applied ? { ...view, waited: true } : view;
  }

  /** `get` without `wait`, when memory answers it (a finished task, no poll limit); else undefined. */
  peek(caller: Caller, id: string): ViewText | undefined {
    return finishedView(this.store, id, caller.owner, this.spec.kind, this.config.rateLimitTaskMs);
  }

  /** Cancels the caller's unfinished task (202), or answers a finished one unchanged (200). */
  cancel(caller: Caller, id: string): Promise<CancelAnswer> {
    return cancelTask(
      { temporal: this.temporal, store: this.store, models: this.config.models },
      this.spec,
      caller.owner,
      id,
    );
  }

  /**
   * A finished task's stored view, parsed, for its content: task_not_ready while it runs. The kind
   * finds the URL; without one (or not succeeded) the answer is task_failed.
   */
  protected async finished<V extends { error?: { message: string } | null }>(
    caller: Caller,
    id: string,
    contentOf: (view: V) => string | undefined,
    what: string,
  ): Promise<string> {
    const [stored] = await this.views(caller, [id], null, 0);
    if (!stored) throw notFound(this.spec, id);
    const label = this.spec.label ?? ((s) => s);
    const { noun } = this.spec;
    if (UNFINISHED_STATUSES.includes(stored.status)) {
      throw new KilnError(
        'task_not_ready',
        `${noun} ${id} is ${label(stored.status)}; its content is not ready yet.`,
        this.config.pollAfterSeconds,
      );
    }
    const view = JSON.parse(stored.json) as V;
    const url = contentOf(view);
    if (stored.status !== 'succeeded' || !url) {
      throw new KilnError(
        'task_failed',
        `${noun} ${id} ended ${label(stored.status)} and has no ${what}${view.error ? `: ${view.error.message}` : '.'}`,
      );
    }
    return url;
  }

  /** Owner-scoped views for ids, in order; null where absent or another owner's. */
  protected async views(
    caller: Caller,
    ids: string[],
    limiterKey: string | null,
    intervalMs: number,
  ): Promise<(ViewText | null)[]> {
    const { kind, idPattern } = this.spec;
    const valid = ids.map((id) => idPattern.test(id));
    // With Redis unreachable every id takes the Temporal path: polls keep answering, unthrottled.
    const wanted = ids.filter((_, i) => valid[i]);
    const stored = await pollViews(this.store, wanted, caller.owner, kind, limiterKey, intervalMs);
    const out: (ViewText | null)[] = ids.map(() => null);
    const missing: number[] = [];
    for (let i = 0, j = 0; i < ids.length; i++) {
      if (!valid[i]) continue;
      const s = stored[j++];
      if (typeof s === 'object') out[i] = { status: s.status, json: s.view };
      else if (s === 'absent' && missing.length < FALLBACK_LOOKUPS) missing.push(i);
    }
    if (missing.length === 0) return out;
    // Redis has no record for these ids (lost, or not yet written): Temporal answers, and Redis is repaired.
    const deps = { temporal: this.temporal, store: this.store, models: this.config.models };
    const found = await readFromTemporal(
      deps,
      this.spec.fallback,
      caller.owner,
      missing.map((i) => ids[i]!),
    );
    for (const i of missing) {
      const r = found.get(ids[i]!);
      // Every kind shares the keyspace: another kind's record is never this kind's task.
      if (r && r.owner === caller.owner && r.kind === kind)
        out[i] = { status: r.status, json: JSON.stringify(this.spec.view(r)) };
    }
    return out;
  }
}
