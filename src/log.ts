import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { currentRequest } from './ops/request-context.js';

/** What the mixin adds to a line outside a request, or to one that names its request itself. */
const NOTHING = Object.freeze({});

/** Pipes write up to this many bytes at once without interleaving with other writers (PIPE_BUF). */
const PIPE_ATOMIC_BYTES = 4096;

/**
 * `bufferBytes` > 0: lines are gathered and written once that many bytes are held, or every
 * 250 ms, asynchronously, and flushed on exit. A request line written at once was about a sixth
 * of a poll's CPU (BENCHMARKS.md); the price is that a `kill -9` loses the last 250 ms of lines.
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
  const destination =
    format === 'json' && to
      ? to
      : format === 'json' && bufferBytes > 0
        ? pino.destination({
            dest: 1,
            sync: false,
            minLength: bufferBytes,
            maxWrite: PIPE_ATOMIC_BYTES,
            periodicFlush: 250,
          })
        : undefined;
  const options: LoggerOptions = {
    name,
    level,
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
      ],
      censor: '[redacted]',
    },
  };
  const logger = destination ? pino(options, destination) : pino(options);
  if (format === 'json') plainJson.add(logger);
  return logger;
}

/** Loggers whose lines are pino's default JSON: level, time, bindings, fields, msg (createLogger). */
const plainJson = new WeakSet<Logger>();

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

const str = JSON.stringify;

/**
 * Writes a request's info line as `log.info(fields, 'request')` would, byte for byte, without
 * pino's per-line work (its key walk, mixin and serializer checks: about 3 µs of a poll).
 * Undefined for a logger whose lines are not plain JSON (pretty, or not made by createLogger):
 * then pino writes them. The caller checks that info is enabled.
 */
export function requestLineWriter(log: Logger): ((line: RequestLine) => void) | undefined {
  if (!plainJson.has(log)) return undefined;
  const { chindingsSym, streamSym } = pino.symbols;
  const holder = log as unknown as Record<symbol, unknown>;
  const bindings = holder[chindingsSym] as string;
  const stream = holder[streamSym] as DestinationStream;
  const head = `{"level":${log.levels.values.info},"time":`;
  return (l) =>
    stream.write(
      `${head}${Date.now()}${bindings},"reqId":${str(l.reqId)},"method":${str(l.method)},"route":${str(l.route)},"status":${l.status},"ms":${l.ms}${l.taskId ? `,"taskId":${str(l.taskId)}` : ''}${l.owner ? `,"owner":${str(l.owner)}` : ''},"msg":"request"}\n`,
    );
}
