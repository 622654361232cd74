// Live progress of a wait: a spinner line on a terminal (status, elapsed, next check), a plain
// line per status change otherwise (logs), nothing with --quiet / --json.
import ora, { type Ora } from 'ora';
import type { PollProgress } from '../client/index.js';

export interface Progress {
  submitted(id: string): void;
  update(p: PollProgress): void;
  stop(): void;
}

const secs = (ms: number) => `${Math.max(0, Math.round(ms / 1000))} s`;

export function progressDisplay(label: string, enabled: boolean): Progress {
  const started = Date.now();
  let id = '';
  let status = 'submitting';
  let nextAt: number | undefined;
  let retrying = '';
  let lastLogged = '';
  if (!enabled) return { submitted: () => undefined, update: () => undefined, stop: () => undefined };

  // A pseudo-terminal without a size (columns 0) makes spinners redraw without end: plain lines there.
  const tty = !!process.stderr.isTTY && (process.stderr.columns ?? 0) > 0;
  const line = () => {
    const next = nextAt === undefined ? '' : ` · next check in ${secs(nextAt - Date.now())}`;
    return `${label}${id ? ` ${id}` : ''} · ${status} · ${secs(Date.now() - started)} elapsed${next}${retrying}`;
  };
  let spinner: Ora | undefined;
  let ticker: NodeJS.Timeout | undefined;
  if (tty) {
    spinner = ora({ text: line(), stream: process.stderr }).start();
    ticker = setInterval(() => {
      spinner!.text = line();
    }, 1000);
    ticker.unref();
  }
  const log = () => {
    if (tty) {
      spinner!.text = line();
      return;
    }
    const key = `${id} ${status}${retrying}`;
    if (key !== lastLogged) {
      process.stderr.write(`[${secs(Date.now() - started)}] ${label} ${id} ${status}${retrying}\n`);
      lastLogged = key;
    }
  };
  return {
    submitted(taskId) {
      id = taskId;
      status = 'accepted';
      log();
    },
    update(p) {
      const statuses = p.pending.map((x) => p.statuses[x]).filter(Boolean);
      if (p.pending.length > 1) status = `${p.pending.length} unfinished`;
      else if (statuses.length) status = statuses[0];
      nextAt = Date.now() + p.nextCheckInMs;
      retrying = p.lastError ? ` · retrying (${p.lastError.message})` : '';
      log();
    },
    stop() {
      if (ticker) clearInterval(ticker);
      spinner?.stop();
    },
  };
}
