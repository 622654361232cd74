// The read side of a keyed submit (Idempotency-Key), shared by image and video tasks: the task a
// key already names, found in the read model before a start is tried, or after Temporal refused a
// second workflow for the key.
import { randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { modelTaskQueue, type Config, type ImageModel, type Model, type VideoModel } from '../config.js';
import { findModel } from '../infra/models.js';
import type { Caller } from '../infra/auth.js';
import type { TaskStore } from './store/task-store.js';
import type { WaitRegistry } from './waits.js';
import { idempotencySecret, idempotentTaskId } from '../shared/idempotency.js';
import type { AnyTaskRecord } from '../shared/records.js';
import type { WebhookTarget } from '../shared/webhook.js';
import { webhookTarget } from '../webhooks/target.js';
import { endedWithoutResult, statusOf, type FallbackKind } from './fallback.js';
import { keyReused, startTask, type ExistingTask, type StartTask } from './start.js';

/**
 * The caller's task of this id when the read model knows it with a fingerprint; throws
 * idempotency_key_reused when it was submitted for another request. Null: Temporal decides.
 */
export async function priorSubmit<R extends AnyTaskRecord>(
  store: TaskStore,
  id: string,
  kind: R['kind'],
  owner: string,
  fingerprint: string,
): Promise<R | null> {
  // The read model knows most replays (and is the only memory once Temporal's retention of a
  // closed workflow has passed).
  const prior = await store.fingerprintOf(id).catch(() => null);
  if (!prior?.fingerprint || prior.record?.kind !== kind || prior.record.owner !== owner) return null;
  if (prior.fingerprint !== fingerprint) throw keyReused();
  return prior.record as R;
}

/** The task a keyed submit found already started for the same request, as it is now. */
export async function replayedRecord<R extends AnyTaskRecord>(
  store: TaskStore,
  fallback: FallbackKind<R>,
  kind: R['kind'],
  ids: { id: string; owner: string; model: string },
  wf: ExistingTask,
): Promise<R> {
  const stored = await store.fingerprintOf(ids.id).catch(() => null);
  if (stored?.record?.kind === kind) return stored.record as R;
  if (wf.temporalStatus === 'COMPLETED') {
    const result = (await wf.result().catch(() => null)) as R | null;
    if (result) return result;
  }
  return fallback.record(
    {
      id: ids.id,
      owner: ids.owner,
      model: wf.model ?? ids.model,
      created_at: wf.createdAt,
      status: statusOf(wf.running, wf.statusAttr),
      closed_at: wf.closedAt,
      error: wf.running ? null : endedWithoutResult(wf.temporalStatus),
    },
    wf.memo,
  );
}

/** What the image and video task services share: their dependencies and how a task id is made. */
export abstract class TaskServiceBase<K extends 'image' | 'video'> {
  protected abstract readonly kind: K;
  private readonly idSecret: Buffer;
  constructor(
    protected readonly config: Config,
    protected readonly store: TaskStore,
    protected readonly temporal: Client,
    /** Long-polls (`wait`); without it a wait answers at once. */
    protected readonly waits?: WaitRegistry,
  ) {
    this.idSecret = idempotencySecret(config.ownerKey);
  }

  /** This kind's model of that id; model_not_found otherwise. */
  model(id: string): Extract<Model, { kind: K }> {
    return findModel(this.config.models, this.kind, id);
  }

  /** The workflow input every task kind starts with: the task, its attempt policy and the model's queue. */
  protected workflowInput<Q>(
    caller: Caller,
    model: ImageModel | VideoModel,
    id: string,
    created_at: number,
    request: Q,
    webhook?: WebhookTarget,
  ) {
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
        timeoutMs: model.timeoutMs,
        heartbeatTimeoutMs: model.heartbeatTimeoutMs,
        maxAttempts: model.maxAttempts,
        // Only when set, so other tasks' input (and history) stays as it was.
        ...(model.kind === 'image' && model.inline ? { inline: true } : {}),
      },
      activityQueue: modelTaskQueue(this.config.temporal.taskQueue, model.id),
    };
  }

  /** The submit's webhook parameters, checked (invalid_webhook_url); undefined when none was given. */
  webhookTarget(url: unknown, events: unknown): WebhookTarget | undefined {
    return webhookTarget(url, events, this.config.webhooks.allow);
  }

  protected start(t: StartTask) {
    return startTask({ config: this.config, store: this.store, temporal: this.temporal }, t);
  }

  /** A random id, or with an Idempotency-Key the one id that key names for this owner. */
  protected taskId(prefix: 'task' | 'video', owner: string, key: string | undefined): string {
    return key ? idempotentTaskId(this.idSecret, prefix, owner, key) : `${prefix}_${randomBytes(16).toString('hex')}`;
  }
}
