// The base of the fake upstreams and hosts in test/support: a real HTTP server on a loopback address
// that records every request it receives and lets a test wait for them, plus the answer and fault
// helpers the fakes share (the request record, programmed faults, job scripts, video bytes).
import { randomBytes } from 'node:crypto';
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { connect, type AddressInfo } from 'node:net';

export abstract class FakeServer<R> {
  readonly requests: R[] = [];
  /** Requests being answered now, and the most there ever were at once (since the last reset). */
  inFlight = 0;
  maxInFlight = 0;
  baseUrl = '';
  port = 0;
  private server: Server | null = null;
  private waiters: { count: number; resolve: () => void }[] = [];

  /** `name` appears in the error of a wait that timed out. */
  constructor(private readonly name: string) {}

  protected abstract handle(req: IncomingMessage, res: ServerResponse): void;

  /** Starts listening on `host` (a free port unless one is given). */
  async start(host = '127.0.0.1', port = 0): Promise<this> {
    const server = createServer((req, res) => {
      this.inFlight++;
      this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
      res.once('close', () => this.inFlight--);
      this.handle(req, res);
    });
    // Keep-alive sockets must not keep close() waiting.
    server.keepAliveTimeout = 1000;
    await new Promise<void>((r) => server.listen(port, host, r));
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
    this.baseUrl = `http://${host}:${this.port}`;
    return this;
  }

  async close(): Promise<void> {
    const s = this.server;
    if (!s) return;
    this.server = null;
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }

  /** Resolves once `count` requests in total have arrived (since the last reset). */
  waitForRequests(count: number, timeoutMs = 20_000): Promise<R[]> {
    if (this.requests.length >= count) return Promise.resolve([...this.requests]);
    return new Promise((resolve, reject) => {
      const t = setTimeout(
        () => reject(new Error(`${this.name}: ${this.requests.length} of ${count} requests after ${timeoutMs} ms`)),
        timeoutMs,
      );
      this.waiters.push({
        count,
        resolve: () => {
          clearTimeout(t);
          resolve([...this.requests]);
        },
      });
    });
  }

  /** Records a request and wakes the waits it completes. */
  protected record(call: R): void {
    this.requests.push(call);
    const ready = this.waiters.filter((w) => this.requests.length >= w.count);
    this.waiters = this.waiters.filter((w) => this.requests.length < w.count);
    for (const w of ready) w.resolve();
  }

  /** Forgets recorded requests and pending waits. */
  protected forget(): void {
    this.requests.length = 0;
    this.waiters = [];
    this.maxInFlight = this.inFlight;
  }
}

/** The whole request body: its text, and the parsed JSON (null when it is not JSON). */
export function readBody(req: IncomingMessage, then: (raw: string, body: any) => void): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks).toString('utf8');
    let body: any = null;
    try {
      body = JSON.parse(raw);
    } catch {
      /* not JSON */
    }
    then(raw, body);
  });
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
  contentType = 'application/json',
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/**
 * Fault injection: runs `answer` after `delayMs`, unless the client has gone by then (e.g. its
 * timeout); `drop` destroys the socket instead of answering.
 */
export function answerLater(
  res: ServerResponse,
  fault: { delayMs?: number; drop?: boolean },
  answer: () => void,
): void {
  const act = () => {
    if (res.destroyed || res.socket?.destroyed) return;
    if (fault.drop) return void res.socket?.destroy();
    answer();
  };
  if (fault.delayMs) setTimeout(act, fault.delayMs);
  else act();
}

/** A URL on 127.0.0.1 where nothing listens (a port that was free a moment ago). */
export async function closedPortUrl(): Promise<string> {
  // Port 1023 lies below the ephemeral range listen(0) draws from (and off fetch's bad-port list),
  // so no server of a test running beside this one can take it before it is used, as it could
  // take a freed ephemeral port (a CI run once saw such a port answer).
  if (await refuses(1023)) return 'http://127.0.0.1:1023';
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return `http://127.0.0.1:${port}`;
}

/** Whether a connection to this loopback port is refused (nothing listens there). */
function refuses(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
  });
}

/** A request as the fake upstreams record it. */
export interface RecordedRequest {
  /** 1-based arrival order (since the last reset). */
  n: number;
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  /** The parsed JSON body, null when there is none or it is not JSON. */
  body: any;
  at: number;
}

/** Reads a request's body and hands it on as a RecordedRequest numbered `n`. */
export function readRequest(req: IncomingMessage, n: number, then: (call: RecordedRequest) => void): void {
  readBody(req, (_raw, body) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    then({
      n,
      method: req.method ?? '',
      path: url.pathname,
      query: url.searchParams,
      headers: req.headers,
      body,
      at: Date.now(),
    });
  });
}

/** How a fake answers one call: as programmed, with the protocol's error body, or not at all (`drop`). */
export type Fault =
  | { kind: 'ok'; delayMs?: number }
  | { kind: 'error'; status: number; message: string; delayMs?: number }
  /** Destroys the socket once the request has arrived, without answering. */
  | { kind: 'drop'; delayMs?: number };

export const ok = (delayMs?: number): Fault => ({ kind: 'ok', ...(delayMs ? { delayMs } : {}) });
export const fail = (status: number, message: string, delayMs?: number): Fault => ({
  kind: 'error',
  status,
  message,
  ...(delayMs ? { delayMs } : {}),
});
export const drop = (delayMs = 0): Fault => ({ kind: 'drop', delayMs });

/**
 * Answers a call by its fault: `answer` for `ok`, `error(status, message)` for an error (each
 * protocol writes its own error body), nothing for `drop`.
 */
export function answerFault(
  res: ServerResponse,
  f: Fault,
  error: (status: number, message: string) => void,
  answer: () => void,
): void {
  answerLater(res, { delayMs: f.delayMs, drop: f.kind === 'drop' }, () => {
    if (f.kind === 'error') return error(f.status, f.message);
    answer();
  });
}

/** What the `reads`th check of a job reports: its script's entry, the last one repeating. */
export function scriptStep(script: readonly string[], reads: number): string {
  return script[Math.min(reads, script.length - 1)]!;
}

/** Bytes a fake serves as a finished video: an mp4 header, then random bytes (no still can be made of it). */
export function fakeVideoBytes(): Buffer {
  return Buffer.concat([Buffer.from('\x00\x00\x00\x18ftypmp42'), randomBytes(4096)]);
}
