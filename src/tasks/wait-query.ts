// The wait (long-poll) parameter as HTTP carries it: `?wait=N` on a poll, `"wait": N` in a batch
// body, or `Prefer: wait=N` (RFC 7240) on either; an honoured wait is answered with
// `Preference-Applied: wait=N`, which is how a client learns that the server waits.
import type { Context } from 'koa';
import { z } from 'zod';
import { KilnError } from '../shared/errors.js';
import type { WaitAsk } from './waits.js';

export const MAX_WAIT_SECONDS = 60;

const WAIT_RULE = `a whole number of seconds from 1 to ${MAX_WAIT_SECONDS}`;

const waitSeconds = (description: string) => z.int().min(1).max(MAX_WAIT_SECONDS).optional().meta({ description });

/** The documented query parameter (the handler checks it, together with Prefer). */
export const WaitQuery = z.object({
  wait: waitSeconds(
    'Long-poll: answer as soon as the task changes status, or after this many seconds with its ' +
      'current state (at once when it is finished). Same as `Prefer: wait=N`.',
  ),
});

/** What a poll's description says about waits. */
export const WAIT_DESCRIPTION =
  'With `?wait=N` or `Prefer: wait=N` (1-60 s) a long-poll: the answer comes as soon as the task ' +
  'changes status, or after N s with its current state (at once when it is finished); ' +
  '`Preference-Applied: wait=N` says the wait was honoured. One read counts against the poll limiter; a wait ' +
  'the limiter refuses is held instead while the task is unfinished.';

/** The batch body's field. */
export const BatchWait = waitSeconds(
  'Long-poll: answer as soon as any listed task changes status, or after this many seconds with ' +
    'the current states; at once when a listed task is finished or not found (send only the ids ' +
    'you still wait for). Same as `Prefer: wait=N`.',
);

/** The documented Prefer request header. */
export const PreferHeader = z.object({
  prefer: z
    .string()
    .optional()
    .meta({
      description:
        'RFC 7240 preferences; `wait=N` (1-60) asks for a long-poll, like `?wait=N`. Answered with ' +
        '`Preference-Applied: wait=N` when honoured.',
      example: 'wait=30',
    }),
});

export const PREFERENCE_APPLIED = {
  'Preference-Applied': {
    description:
      '`wait=N` when the long-poll was honoured. Absent when no wait was asked for, or the server ' +
      'answered at once because it cannot wait at the moment (then poll on the usual schedule).',
    schema: { type: 'string' as const },
  },
};

function checkSeconds(raw: string, where: string): number {
  if (!/^\d{1,3}$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_WAIT_SECONDS) {
    throw new KilnError('invalid_request', `${where} must be ${WAIT_RULE}; got "${raw.slice(0, 40)}".`);
  }
  return Number(raw);
}

/** `wait` of the Prefer header(s), or undefined; other preferences are ignored, as RFC 7240 asks. */
function preferWait(header: string | string[] | undefined): number | undefined {
  if (header === undefined) return undefined;
  let found: number | undefined;
  for (const part of [header].flat().join(',').split(',')) {
    const [pref] = part.split(';');
    const eq = pref.indexOf('=');
    const name = (eq < 0 ? pref : pref.slice(0, eq)).trim().toLowerCase();
    if (name !== 'wait') continue;
    const value =
      eq < 0
        ? ''
        : pref
            .slice(eq + 1)
            .trim()
            .replace(/^"(.*)"$/, '$1');
    const n = checkSeconds(value, 'Prefer: wait');
    if (found !== undefined && found !== n) throw new KilnError('invalid_request', 'Prefer names two different waits.');
    found = n;
  }
  return found;
}

/**
 * The wait a request asks for (query or body value, and the Prefer header; both must agree), with
 * a signal that aborts when the client disconnects. Undefined: no wait.
 */
export function waitAsked(ctx: Context, value: unknown, where: 'query' | 'body'): WaitAsk | undefined {
  let own: number | undefined;
  if (where === 'query') {
    if (Array.isArray(value)) throw new KilnError('invalid_request', 'query.wait must be given once.');
    if (value !== undefined) own = checkSeconds(String(value), 'query.wait');
  } else if (value !== undefined) {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_WAIT_SECONDS)
      throw new KilnError('invalid_request', `body.wait must be ${WAIT_RULE}.`);
    own = value;
  }
  const prefer = preferWait(ctx.req.headers.prefer);
  if (own !== undefined && prefer !== undefined && own !== prefer) {
    throw new KilnError('invalid_request', `${where}.wait (${own}) and Prefer: wait=${prefer} disagree; send one.`);
  }
  const seconds = own ?? prefer;
  if (seconds === undefined) return undefined;
  // The response's close: fired when the answer was sent, or the client went away first.
  const ac = new AbortController();
  ctx.res.once('close', () => ac.abort());
  return { seconds, signal: ac.signal };
}

/** Marks an answer whose wait was honoured. */
export function sendWaitApplied(ctx: Context, ask: WaitAsk | undefined, applied: boolean): void {
  if (ask && applied) ctx.set('Preference-Applied', `wait=${ask.seconds}`);
}
