// What every `kiln` command shares: the client built from options and environment, output in
// text or JSON, and the mapping of outcomes and errors to documented exit codes.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { InvalidArgumentError } from 'commander';
import {
  APIConnectionError,
  AuthenticationError,
  Kiln,
  KilnAPIError,
  KilnClientError,
  PollTimeoutError,
  extensionFor,
  type PollingOptions,
} from '../client/index.js';

/** Exit codes (documented in `kiln --help` and the README). */
export const EXIT = {
  ok: 0,
  /** The API refused or failed a request, or another error. */
  error: 1,
  /** Bad arguments, options or missing configuration. */
  usage: 2,
  /** A task ended failed (in a batch wait: also an id that was not_found). */
  failed: 3,
  /** A task ended uncertain: it may have reached the generator; do not resubmit blindly. */
  uncertain: 4,
  /** Gave up waiting after the total timeout; the task goes on: `kiln tasks wait <id>`. */
  timeout: 5,
  /** Kiln could not be reached (no HTTP status). */
  connection: 6,
  interrupted: 130,
} as const;

export const EXIT_HELP = `Exit codes:
  0  success
  1  the API refused or failed a request (the message names the error code)
  2  usage error: bad arguments, options or missing KILN_API_KEY
  3  a task ended failed (in a wait for several ids: also an id that was not_found)
  4  a task ended uncertain: it may have reached the generator; check before resubmitting
  5  gave up waiting (--timeout); the task goes on: kiln tasks wait <id>
  6  Kiln could not be reached (connection or TLS failure)
  130 interrupted (Ctrl-C); the task goes on server-side`;

export class UsageError extends Error {}

/** Carries an exit code out of a command that printed its own outcome. */
export class ExitCode extends Error {
  constructor(readonly code: number) {
    super(`exit ${code}`);
  }
}

export interface GlobalOptions {
  baseUrl?: string;
  apiKey?: string;
  json?: boolean;
  quiet?: boolean;
  firstCheck?: number;
  interval?: number;
  timeout?: number;
  longPoll?: number;
}

/** Seconds a check asks the server to hold it (long-poll): a whole number, 0 (off) to 60. */
export function waitSeconds(name: string) {
  return (v: string): number => {
    if (!/^\d{1,2}$/.test(v.trim()) || Number(v) > 60)
      throw new InvalidArgumentError(`${name} must be a whole number of seconds from 0 to 60, got "${v}".`);
    return Number(v);
  };
}

export function seconds(name: string) {
  return (v: string): number => {
    const n = Number(v);
    if (!/^\d+(\.\d+)?$/.test(v.trim()) || !Number.isFinite(n))
      throw new InvalidArgumentError(`${name} must be a number of seconds, got "${v}".`);
    return n;
  };
}

export function integer(name: string) {
  return (v: string): number => {
    if (!/^\d{1,10}$/.test(v.trim())) throw new InvalidArgumentError(`${name} must be a whole number, got "${v}".`);
    return Number(v);
  };
}

/** `--idempotency-key`: checked here with the server's rules (1–255 characters 0x21–0x7E). */
export function idempotencyKey(v: string): string {
  if (!/^[\x21-\x7e]{1,255}$/.test(v))
    throw new InvalidArgumentError('--idempotency-key must be 1 to 255 visible ASCII characters (no spaces).');
  return v;
}

export class Ctx {
  readonly json: boolean;
  readonly quiet: boolean;
  private client?: Kiln;
  /** Aborted on Ctrl-C: waits stop, the task goes on server-side. */
  readonly abort = new AbortController();
  /** The task being waited for, named when the wait is interrupted. */
  waiting?: string;

  constructor(readonly opts: GlobalOptions) {
    this.json = !!opts.json;
    this.quiet = !!opts.quiet || this.json;
  }

  get kiln(): Kiln {
    if (this.client) return this.client;
    const env = process.env;
    const polling: Partial<PollingOptions> = {};
    const sec = (flag: number | undefined, envName: string) => {
      if (flag !== undefined) return flag * 1000;
      const v = env[envName];
      if (v === undefined || v === '') return undefined;
      try {
        return seconds(envName)(v) * 1000;
      } catch (err) {
        throw new UsageError((err as Error).message);
      }
    };
    const first = sec(this.opts.firstCheck, 'KILN_POLL_FIRST_CHECK');
    const interval = sec(this.opts.interval, 'KILN_POLL_INTERVAL');
    const timeout = sec(this.opts.timeout, 'KILN_POLL_TIMEOUT');
    if (first !== undefined) polling.firstCheckMs = first;
    if (interval !== undefined) polling.intervalMs = interval;
    if (timeout !== undefined) polling.timeoutMs = timeout;
    try {
      const wait =
        this.opts.longPoll ?? (env.KILN_POLL_WAIT ? waitSeconds('KILN_POLL_WAIT')(env.KILN_POLL_WAIT) : undefined);
      if (wait !== undefined) polling.waitSeconds = wait;
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
    const apiKey = this.opts.apiKey ?? env.KILN_API_KEY;
    if (!apiKey) throw new UsageError('No API key: set KILN_API_KEY (or pass --api-key).');
    this.client = new Kiln({ baseURL: this.opts.baseUrl ?? env.KILN_BASE_URL, apiKey, polling });
    return this.client;
  }

  /** Human text to stdout (suppressed in --json mode). */
  say(text: string): void {
    if (!this.json) process.stdout.write(`${text}\n`);
  }

  /** Notes to stderr (suppressed by --quiet and --json). */
  note(text: string): void {
    if (!this.quiet) process.stderr.write(`${text}\n`);
  }

  out(value: unknown): void {
    if (this.json) process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
  }

  /** The first configured model of a kind, when --model was not given. */
  async defaultModel(kind: 'image' | 'chat' | 'video', given?: string): Promise<string> {
    if (given) return given;
    const m = (await this.kiln.models({ signal: this.abort.signal })).find((x) => (x.kind ?? 'image') === kind);
    if (!m) throw new UsageError(`This Kiln has no ${kind} model; pass --model (GET /v1/models lists them).`);
    return m.id;
  }

  /** Writes bytes to DIR/name (DIR created), returns the path. */
  save(
    dir: string,
    base: string,
    bytes: Uint8Array,
    contentType: string | null,
    url: string | undefined,
    fallbackExt: string,
  ): string {
    mkdirSync(dir, { recursive: true });
    const path = join(dir, `${base}.${extensionFor(contentType, url, fallbackExt)}`);
    writeFileSync(path, bytes);
    return path;
  }
}

/** Prints an error helpfully (text or JSON) and returns its exit code. */
export function reportError(err: unknown, ctx: Ctx | null, baseUrl: string): number {
  let code: number = EXIT.error;
  let body: Record<string, unknown>;
  let text: string;
  if (err instanceof UsageError) {
    code = EXIT.usage;
    body = { code: 'usage', message: err.message };
    text = `error: ${err.message}\n(run kiln --help)`;
  } else if (err instanceof PollTimeoutError) {
    code = EXIT.timeout;
    body = {
      code: 'timeout',
      message: err.message,
      task_id: err.taskId,
      task_ids: err.taskIds,
      last_status: err.lastStatus,
    };
    text = `error: ${err.message}`;
  } else if (err instanceof APIConnectionError) {
    code = EXIT.connection;
    body = { code: 'connection_error', message: err.message };
    text = `error: cannot reach Kiln at ${baseUrl}: ${err.message}\n(is it running? set KILN_BASE_URL or --base-url)`;
  } else if (err instanceof KilnAPIError) {
    body = {
      code: err.code,
      message: err.message,
      status: err.status,
      ...(err.retryAfter !== undefined ? { retry_after: err.retryAfter } : {}),
    };
    text = `error: ${err.message}`;
    if (err instanceof AuthenticationError) text += '\n(check KILN_API_KEY)';
    if (err.retryAfter !== undefined) text += `\n(retry after ${err.retryAfter} s)`;
  } else if (err instanceof KilnClientError) {
    body = { code: 'client_error', message: err.message };
    text = `error: ${err.message}`;
  } else {
    body = { code: 'error', message: (err as Error)?.message ?? String(err) };
    text = `error: ${body.message as string}`;
  }
  if (ctx?.json) process.stdout.write(`${JSON.stringify({ error: body }, null, 2)}\n`);
  else process.stderr.write(`${text}\n`);
  return code;
}
