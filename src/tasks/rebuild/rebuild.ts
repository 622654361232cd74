// Rebuilding the Redis read model from Temporal (operator call: POST /admin/v1/read-model/rebuild,
// `kiln admin rebuild-read-model`), for when Redis lost its data. It runs online, beside the API
// and the workers: every record is written with the store's strict transition (only over no record
// or an earlier state), so whatever the workers wrote meanwhile stands, and running it again
// changes nothing. One process at a time runs it (a lock with a TTL, renewed); its place is kept in
// Redis page by page, so another process, or a second call, resumes where it stopped.
import type { Logger } from 'pino';
import { recordWebhookState, webhookStateKept } from '../store/webhook-state.js';
import type { AnyTaskRecord } from '../../shared/records.js';
import { UNFINISHED_STATUSES } from '../../shared/task.js';
import { RebuildState, type RebuildProgress } from './progress.js';
import {
  deliveryState,
  describeTask,
  listPage,
  rebuildQuery,
  taskRecord,
  type TaskSource,
  type WorkflowRef,
} from './source.js';

export interface RebuildDeps extends TaskSource {
  prefix: string;
  retentionSeconds: number;
  log: Logger;
  /** Default 15 s; renewed every third of it. */
  lockTtlMs?: number;
}

/**
 * What the operator sees: the progress without its page token, whether a process runs it, the
 * rate; `state: none` before any rebuild (or once its progress expired).
 */
export type RebuildView =
  | (Omit<RebuildProgress, 'token' | 'busy_ms'> & {
      /** A process holds the lock. `state: running` without one: interrupted, a call resumes it. */
      active: boolean;
      /** Task workflows per second of work. */
      rate_per_second: number | null;
    })
  | { state: 'none'; active: boolean };

export const DEFAULT_PAGE_SIZE = 100;
/** Workflows of a page handled at once: each is one or two Temporal calls and one Redis script. */
const PARALLEL = 8;
const SETTLE_BATCH = 100;
const RETRY_MS = 2000;

type Outcome = 'written' | 'unchanged' | 'unfinished' | 'skipped';

const now = () => Math.floor(Date.now() / 1000);
const unfinished = (r: AnyTaskRecord) => UNFINISHED_STATUSES.includes(r.status);

export class ReadModelRebuild {
  private readonly state: RebuildState;
  /** The run in this process, while there is one. */
  private run: Promise<void> | null = null;
  private stopping = false;
  /**
   * Off (null) unless a test sets it: called after each step's progress is saved and before the
   * next step, which waits for it. Lets a test stop a run at a known page instead of racing it.
   */
  afterStep: ((p: Readonly<RebuildProgress>) => void | Promise<void>) | null = null;

  constructor(private readonly deps: RebuildDeps) {
    this.state = new RebuildState(deps.store.redis, deps.prefix, deps.retentionSeconds, deps.lockTtlMs ?? 15_000);
  }

  /**
   * Starts a rebuild, resumes an interrupted one, or (another process runs it) just answers its
   * progress. `restart` starts over even when the last one did not finish.
   */
  async start(opts: { pageSize?: number; restart?: boolean } = {}): Promise<RebuildView> {
    if (this.run || !(await this.state.acquire())) return this.progress();
    try {
      const last = await this.state.read();
      const t = now();
      let p: RebuildProgress;
      if (last && last.state === 'running' && !opts.restart) {
        p = { ...last, runs: last.runs + 1, page_size: opts.pageSize ?? last.page_size, updated_at: t };
      } else {
        await this.state.clearSettle();
        p = fresh(t, t - this.deps.retentionSeconds, opts.pageSize ?? DEFAULT_PAGE_SIZE);
      }
      if (!(await this.state.save(p))) return this.progress();
      this.stopping = false;
      this.run = this.loop(p).finally(() => (this.run = null));
    } catch (err) {
      await this.state.release().catch(() => undefined);
      throw err;
    }
    return this.progress();
  }

  async progress(): Promise<RebuildView> {
    const [p, active] = await Promise.all([this.state.read(), this.state.held()]);
    if (!p) return { state: 'none', active };
    const { token: _token, busy_ms, ...rest } = p;
    return { ...rest, active, rate_per_second: busy_ms > 0 ? Math.round((p.workflows / busy_ms) * 10_000) / 10 : null };
  }

  /** Stops this process's run after the page in hand, keeping its place; the lock is given up. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.run;
  }

  /** The loop, holding the lock: pages, then the settle pass; each step saved before the next. */
  private async loop(p: RebuildProgress): Promise<void> {
    const { log } = this.deps;
    let lost = false;
    const renew = setInterval(() => {
      this.state.renew().then(
        (held) => (lost ||= !held),
        () => undefined,
      );
    }, this.state.lockTtlMs / 3);
    const query = rebuildQuery(this.deps, p.since);
    let failures = 0;
    try {
      while (p.state === 'running' && !this.stopping && !lost) {
        const began = Date.now();
        try {
          if (p.phase === 'listing') await this.page(p, query);
          else await this.settle(p);
          failures = 0;
        } catch (err) {
          // Temporal or Redis away: the same step again shortly, from the same place.
          p.errors++;
          p.last_error = (err as Error).message;
          log.warn({ err: p.last_error }, 'read model rebuild: step failed, retrying');
          if (++failures > 30) break;
          await new Promise((r) => setTimeout(r, RETRY_MS));
        }
        p.busy_ms += Date.now() - began;
        p.updated_at = now();
        if (!(await this.state.save(p).catch(() => true))) lost = true;
        if (this.afterStep) await this.afterStep(p);
      }
      if (p.state === 'done') log.info({ ...p, token: undefined }, 'read model rebuilt');
    } finally {
      clearInterval(renew);
      if (!lost) await this.state.release().catch(() => undefined);
    }
  }

  private async page(p: RebuildProgress, query: string): Promise<void> {
    const token = p.token ? Buffer.from(p.token, 'base64') : null;
    const { workflows, next } = await listPage(this.deps, query, token, p.page_size);
    const outcomes = await inParallel(workflows, (wf) => this.restoreOne(p, wf));
    count(p, outcomes);
    await this.state.addSettle(workflows.filter((_, i) => outcomes[i] === 'unfinished').map((wf) => wf.workflowId));
    p.pages++;
    p.workflows += workflows.length;
    p.token = next ? next.toString('base64') : null;
    if (!next) p.phase = 'settling';
  }

  /**
   * Tasks written as running are asked again once the listing is done: one that closed meanwhile
   * without writing Redis again (its final write came before the data loss) gets its final record.
   */
  private async settle(p: RebuildProgress): Promise<void> {
    const ids = await this.state.toSettle(SETTLE_BATCH);
    if (ids.length === 0) {
      p.phase = 'done';
      p.state = 'done';
      p.finished_at = now();
      return;
    }
    const outcomes = await inParallel(ids, async (id) => {
      const wf = await describeTask(this.deps, id);
      return wf && wf.status.name !== 'RUNNING' ? this.restoreOne(p, wf) : 'skipped';
    });
    count(p, outcomes);
    await this.state.settled(ids);
  }

  /** One workflow's record, webhook state and gauge place; a failure is counted, not thrown. */
  private async restoreOne(p: RebuildProgress, wf: WorkflowRef): Promise<Outcome> {
    const { store } = this.deps;
    try {
      const record = await taskRecord(this.deps, wf);
      if (!record) return 'skipped';
      // The gauge place goes first: a task that ends between the two writes gives it back itself.
      if (unfinished(record)) await store.reserveOnce(record.id, Number.MAX_SAFE_INTEGER);
      const written = await store.restore(record);
      const stored = (await store.get(record.id)) as AnyTaskRecord | null;
      if (unfinished(record) && stored && !unfinished(stored)) await store.release(record.id);
      if (stored?.webhook && (await this.restoreWebhook(stored))) p.webhooks++;
      if (!written) return 'unchanged';
      return stored && unfinished(stored) ? 'unfinished' : 'written';
    } catch (err) {
      p.errors++;
      p.last_error = `${wf.workflowId}: ${(err as Error).message}`;
      return 'skipped';
    }
  }

  /** The delivery state of the stored status's event, unless Redis holds a later one. */
  private async restoreWebhook(stored: AnyTaskRecord): Promise<boolean> {
    const state = await deliveryState(this.deps, stored.id, stored.status);
    if (!state) return false;
    return recordWebhookState(this.deps.store, stored.id, stored.status, state, webhookStateKept(state));
  }
}

function fresh(t: number, since: number, pageSize: number): RebuildProgress {
  return {
    state: 'running',
    phase: 'listing',
    started_at: t,
    updated_at: t,
    finished_at: null,
    since,
    page_size: pageSize,
    runs: 1,
    pages: 0,
    workflows: 0,
    written: 0,
    unchanged: 0,
    unfinished: 0,
    webhooks: 0,
    errors: 0,
    last_error: null,
    busy_ms: 0,
    token: null,
  };
}

function count(p: RebuildProgress, outcomes: Outcome[]): void {
  for (const o of outcomes) {
    if (o === 'written') p.written++;
    else if (o === 'unfinished') {
      p.written++;
      p.unfinished++;
    } else if (o === 'unchanged') p.unchanged++;
  }
}

/** `f` over `items`, at most PARALLEL at a time; results in order. */
async function inParallel<T, R>(items: readonly T[], f: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await f(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL, items.length) }, worker));
  return out;
}
