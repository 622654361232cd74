import { hostname } from 'node:os';
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { currentRequest } from './request-context.js';

/** What the mixin adds to a line outside a request, or to one that names its request itself. */
const NOTHING = Object.freeze({});

/** Pipes write up to this many bytes at once without interleaving with other writers (PIPE_BUF). */
const PIPE_ATOMIC_BYTES = 4096;

/**
 * `bufferBytes` > 0: lines are gathered and written once that many bytes are held, or every
 * 250 ms, asynchronously, and flushed on exit: a write per request line would be a large share of
 * a poll's CPU. The price is that a `kill -9` loses the last 250 ms of lines.
 * Each write is whole lines and at most 4 KB (sonic-boom packs lines into chunks of `maxWrite`),
 * so API processes sharing one stdout pipe never interleave within a line.
 */
export function createLogger(
  level: string,
  name: string,
  format: 'json' | 'pretty' = 'json',
  bufferBytes = 0,
  /** Where JSON lines go instead of stdout (tests read them back). */
  to?: DestinationStream,
): Logger {
  // JSON lines go to a stream made here (pino's own default is the same: fd 1, asynchronous), so
  // the request line writer below can write to it too.
  const destination =
    format !== 'json'
      ? undefined
      : (to ??
        pino.destination({
          dest: 1,
          sync: false,
          ...(bufferBytes > 0
            ? { minLength: bufferBytes, maxWrite: PIPE_ATOMIC_BYTES, periodicFlush: 250 }
            : { minLength: 0 }),
        }));
  // pino's default base, stated here: the request line writer writes the same.
  const base = { pid: process.pid, hostname: hostname() };
  const options: LoggerOptions = {
    name,
    level,
    base,
    // Pretty output is for `npm run dev` (LOG_FORMAT=pretty); production logs stay one JSON object a line.
    ...(format === 'pretty'
      ? {
          transport: {
            target: 'pino-pretty',
            options: { colorize: true, translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname' },
          },
        }
      : {}),
    // Lines written while serving a request name it (and its task and owner, once known). A line
    // that names its request itself (the request line) needs nothing added: no object, no merge.
    mixin(line: object) {
      const r = (line as { reqId?: unknown }).reqId === undefined ? currentRequest() : undefined;
      return r
        ? { reqId: r.requestId, ...(r.taskId ? { taskId: r.taskId } : {}), ...(r.owner ? { owner: r.owner } : {}) }
        : NOTHING;
    },
    mixinMergeStrategy: (line: object, added: object) => (added === NOTHING ? line : Object.assign(added, line)),
    // Keys never reach logs, whatever object a caller hands in.
    redact: {
      paths: [
        'authorization',
        '*.authorization',
        'headers.authorization',
        'credential',
        '*.credential',
        'apiKey',
        '*.apiKey',
        // An issued key, as the admin API answers its creation.
        'key',
        '*.key',
      ],
      censor: '[redacted]',
    },
  };
  const logger = destination ? pino(options, destination) : pino(options);
  if (destination) {
    const bindings = `,"pid":${base.pid},"hostname":${str(base.hostname)},"name":${str(name)}`;
    requestLines.set(logger, lineWriter(destination, `{"level":${logger.levels.values.info},"time":`, bindings));
  }
  return logger;
}

/** The fields of a request's line, in the order they are written. */
export interface RequestLine {
  reqId: string;
  method: string;
  route: string;
  status: number;
  ms: number;
  taskId?: string;
  owner?: string;
}

type LineWriter = (line: RequestLine) => void;

/** The request line writer of each JSON logger createLogger made (not of its children). */
const requestLines = new WeakMap<Logger, LineWriter>();

const str = JSON.stringify;

/**
 * Exits once the logger has written what it holds (at most `withinMs` later). process.exit right
 * after a line can drop a write still in flight on libuv's pool: pino's exit flush writes only what
 * is not yet handed to one (a loaded machine lost a first 2 KB chunk this way).
 */
export function exitAfterLogs(log: Logger, code: number, withinMs = 2000): void {
  const exit = () => process.exit(code);
  setTimeout(exit, withinMs).unref();
  try {
    log.flush(exit);
  } catch {
    exit();
  }
}

/**
 * Writes a request's info line as `log.info(fields, 'request')` would, byte for byte
 * (test/unit/ops/request-line.test.ts), to the logger's destination, without pino's per-line work
 * (its key walk, mixin and serializer checks, a visible share of a poll). Undefined for a logger whose
 * lines are not plain JSON (pretty, or not made by createLogger): then pino writes them. The
 * caller checks that info is enabled.
 */
export function requestLineWriter(log: Logger): LineWriter | undefined {
  return requestLines.get(log);
}

/** `head`: the level and the time's key; `bindings`: the logger's base and name, as pino writes them. */
function lineWriter(stream: DestinationStream, head: string, bindings: string): LineWriter {
  return (l) =>
    stream.write(
      `${head}${Date.now()}${bindings},"reqId":${str(l.reqId)},"method":${str(l.method)},"route":${str(l.route)},"status":${l.status},"ms":${l.ms}${l.taskId ? `,"taskId":${str(l.taskId)}` : ''}${l.owner ? `,"owner":${str(l.owner)}` : ''},"msg":"request"}\n`,
    );
}
