// Worker-side task telemetry, as an activity interceptor: a log line with task id and owner hash
// for every task activity, and the `kiln_tasks_finished` counter. The counter is fed by the
// activities that write records (the record activities, and image activities answering
// `{record, written}`: generateImage records `succeeded` itself): the read model accepts a task's
// first terminal write only, so each task counts once, whichever worker records it. It goes through the Temporal
// runtime's metric meter, so it appears
// on the worker's Prometheus endpoint (WORKER_METRICS_ADDRESS) beside the SDK's own metrics.
import type { Context as ActivityContext } from '@temporalio/activity';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { Logger } from 'pino';
import { TERMINAL_STATUSES, type TaskStatus } from '../shared/task.js';

interface TaskLike {
  id: string;
  owner?: string;
  model?: string;
  status?: TaskStatus;
}

const isTask = (v: unknown): v is TaskLike =>
  !!v && typeof v === 'object' && typeof (v as TaskLike).id === 'string' && typeof (v as TaskLike).owner === 'string';

/** Activities whose boolean result says a task record was written (first terminal write counts). */
const RECORD_ACTIVITIES = new Set(['recordTransition', 'recordVideoTransition']);

/** A result that wrote a record: which one, and whether this write is what the read model took. */
const settledOf = (v: unknown): { record: TaskLike; written: boolean } | null =>
  !!v &&
  typeof v === 'object' &&
  isTask((v as { record?: unknown }).record) &&
  typeof (v as { written?: unknown }).written === 'boolean'
    ? (v as { record: TaskLike; written: boolean })
    : null;

export function taskTelemetry(log: Logger): ActivityInterceptorsFactory {
  let finished: ReturnType<ActivityContext['metricMeter']['createCounter']> | undefined;
  return (ctx) => ({
    inbound: {
      async execute(input, next) {
        const task = input.args.find(isTask);
        if (!task) return next(input);
        const type = ctx.info.activityType;
        // Keys and payloads stay out: ids, owner hash, model and status only.
        const fields = {
          taskId: task.id,
          owner: task.owner,
          model: task.model,
          activity: type,
          attempt: ctx.info.attempt,
        };
        try {
          const result = await next(input);
          const settled = settledOf(result);
          const recorded = settled
            ? { status: settled.record.status, applied: settled.written }
            : RECORD_ACTIVITIES.has(type) && task.status
              ? { status: task.status, applied: result !== false }
              : null;
          if (recorded?.status) {
            log.info({ ...fields, ...recorded }, 'task transition');
            if (recorded.applied && TERMINAL_STATUSES.includes(recorded.status)) {
              finished ??= ctx.metricMeter.createCounter(
                'kiln_tasks_finished',
                'tasks',
                'Tasks that reached a terminal status, by model and outcome',
              );
              finished.add(1, { model: task.model ?? 'unknown', outcome: recorded.status });
            }
          } else {
            log.info(fields, 'task activity completed');
          }
          return result;
        } catch (err) {
          log.warn(
            { ...fields, err: { type: (err as { type?: string }).type, message: (err as Error).message } },
            'task activity failed',
          );
          throw err;
        }
      },
    },
  });
}
