import { pino, type Logger } from 'pino';

export function createLogger(level: string, name: string): Logger {
  return pino({
    name,
    level,
    // Keys never reach logs, whatever object a caller hands in.
    redact: { paths: ['authorization', '*.authorization', 'headers.authorization', 'credential', '*.credential', 'apiKey', '*.apiKey'], censor: '[redacted]' },
  });
}
