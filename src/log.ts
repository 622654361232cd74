import { pino, type Logger } from 'pino';
import { currentRequest } from './ops/request-context.js';

export function createLogger(level: string, name: string, format: 'json' | 'pretty' = 'json'): Logger {
  return pino({
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
  });
}
