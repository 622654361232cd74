// `kiln cancel`, `kiln webhooks secret`, the webhook options of the create commands, and the lines
// that show where a task's time went and how its webhook fared.
import { InvalidArgumentError, type Command } from 'commander';
import type { ImageTask, SubmitOptions, TaskTiming, Video, WebhookEvents } from '../client/index.js';
import { idempotencyKey, type Ctx } from './context.js';

type Make = (cmd: Command) => Ctx;

/** Video ids start with `video_`; everything else is an image task id (`task_…`). */
export const isVideoId = (id: string): boolean => id.startsWith('video_');

/** `--webhook-events`: terminal or all. */
export function webhookEvents(v: string): WebhookEvents {
  if (v !== 'terminal' && v !== 'all')
    throw new InvalidArgumentError(`--webhook-events must be terminal or all, got "${v}".`);
  return v;
}

/**
 * The options every create command shares: `--no-wait`, `--idempotency-key` (same key and request,
 * same task back: `what` names the request and the task) and the webhook flags.
 */
export function createOptions(cmd: Command, what: { request: string; task: string; id: string }): Command {
  return cmd
    .option('--no-wait', `print the ${what.id} id and return at once`)
    .option(
      '--idempotency-key <key>',
      `run again with the same key and ${what.request} to get the same ${what.task} ` +
        'back, never a second one (default: a fresh key per run)',
      idempotencyKey,
    )
    .option(
      '--webhook <url>',
      'https URL that receives the task, signed (Standard Webhooks; kiln webhooks secret), when it ends',
    )
    .option('--webhook-events <which>', 'terminal (default): the final state only; all: every status', webhookEvents);
}

/** The submit options those flags stand for. */
export function createSubmit(
  ctx: Ctx,
  o: { idempotencyKey?: string; webhook?: string; webhookEvents?: WebhookEvents },
): SubmitOptions & { signal: AbortSignal } {
  return {
    signal: ctx.abort.signal,
    ...(o.idempotencyKey !== undefined ? { idempotencyKey: o.idempotencyKey } : {}),
    ...(o.webhook !== undefined ? { webhook: o.webhook } : {}),
    ...(o.webhookEvents !== undefined ? { webhookEvents: o.webhookEvents } : {}),
  };
}

/** `--no-wait`: the new task as JSON (`--json`) or its id. */
export function printSubmitted(ctx: Ctx, created: { id: string }): void {
  ctx.out(created);
  ctx.say(created.id);
}

const secs = (s: number) => `${s.toFixed(1)} s`;
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/**
 * Where the time went: `queued 0.4 s, upstream 2.1 s (1 attempt)`, and the webhook's state; empty
 * lines are left out. `now` (epoch s) measures a task still running.
 */
export function timingLines(t: TaskTiming & { created_at?: number }, end?: number | null, now = Date.now() / 1000) {
  const lines: string[] = [];
  if (t.created_at !== undefined && t.started_at != null) {
    const upstream = (end ?? now) - t.started_at;
    const on = t.channel ? ` on ${t.channel}` : '';
    const attempts = t.attempts ? ` (${plural(t.attempts, 'attempt')}${on})` : '';
    lines.push(
      `queued ${secs(Math.max(0, t.started_at - t.created_at))}, upstream ${secs(Math.max(0, upstream))}` +
        `${end == null ? ' so far' : ''}${attempts}`,
    );
  } else if (t.created_at !== undefined && end == null) {
    lines.push(`queued ${secs(Math.max(0, now - t.created_at))} so far`);
  }
  if (t.webhook) {
    const w = t.webhook;
    const error = w.last_error ? `, last error: ${w.last_error}` : '';
    lines.push(`webhook ${w.status} (${plural(w.attempts, 'attempt')}${error})`);
  }
  return lines;
}

/** timingLines of an image task or a video. */
export function taskTimingLines(t: ImageTask | Video): string[] {
  const end = 'completed_at' in t ? (t as Video).completed_at : (t as ImageTask).finished_at;
  return timingLines(t as TaskTiming & { created_at?: number }, end);
}

export function registerFeatureCommands(program: Command, make: Make): void {
  program
    .command('cancel')
    .description(
      'cancel unfinished tasks (image task_… or video video_… ids): each ends failed with error code ' +
        'canceled; a finished task is left as it is',
    )
    .argument('<ids...>', 'task or video ids')
    .action(async (ids: string[], _o, cmd: Command) => {
      const ctx = make(cmd);
      const results: (ImageTask | Video)[] = [];
      for (const id of ids) {
        const signal = ctx.abort.signal;
        const t = isVideoId(id)
          ? await ctx.kiln.videos.cancel(id, { signal })
          : await ctx.kiln.tasks.cancel(id, { signal });
        results.push(t);
        const canceled = t.status === 'failed' && t.error?.code === 'canceled';
        if (canceled) ctx.say(`${t.id} canceled: ${t.error?.message ?? ''}`);
        else if (t.status === 'failed' || ['succeeded', 'completed', 'uncertain'].includes(t.status))
          ctx.say(`${t.id} had already finished: ${t.status}${t.error ? ` (${t.error.code})` : ''}`);
        else ctx.say(`${t.id} cancel requested; still ${t.status} (it ends canceled shortly)`);
      }
      ctx.out(ids.length === 1 ? results[0] : results);
    });

  program
    .command('webhooks')
    .description('webhook signing')
    .command('secret')
    .description(
      'print the secret that signs your webhook deliveries (whsec_…; verify with a Standard Webhooks ' +
        'library, or verifyWebhook of the client)',
    )
    .option('--rotate', 'replace it: from now on every delivery, retries too, is signed with the new one')
    .action(async (o: { rotate?: boolean }, cmd: Command) => {
      const ctx = make(cmd);
      const signal = ctx.abort.signal;
      const s = o.rotate
        ? await ctx.kiln.webhooks.rotateSecret({ signal })
        : await ctx.kiln.webhooks.secret({ signal });
      ctx.out(s);
      ctx.say(s.secret);
      ctx.note(`generation ${s.generation}${o.rotate ? ' (rotated: the previous secret no longer verifies)' : ''}`);
    });
}
