import { pino, type Logger, type LoggerOptions } from 'pino';
import { currentRequest } from './ops/request-context.js';

/** How long a log line may wait in the buffer before it is written. */
const LOG_FLUSH_MS = 100;

/**
 * JSON lines go through a buffered asynchronous destination: a synchronous write per request line
 * was a visible part of a poll's cost (BENCHMARKS.md). Lines reach stdout within LOG_FLUSH_MS, and
 * pino flushes the buffer on exit; a SIGKILL can lose the last LOG_FLUSH_MS of lines.
 */
function bufferedStdout() {
  const dest = pino.destination({ dest: 1, sync: false, minLength: 4096 });
  setInterval(() => dest.flush(), LOG_FLUSH_MS).unref();
  return dest;
}

export function createLogger(level: string, name: string, format: 'json' | 'pretty' = 'json'): Logger {
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
    // Lines written while serving a request name it (and its task and owner, once known).
    mixin() {
      const r = currentRequest();
      return r
        ? { reqId: r.requestId, ...(r.taskId ? { taskId: r.taskId } : {}), ...(r.owner ? { owner: r.owner } : {}) }
        : {};
    },
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
  return format === 'pretty' ? pino(options) : pino(options, bufferedStdout());
}
