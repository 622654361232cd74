// Child process of test/unit/log-buffer.test.ts: writes LINES request-like lines through the API's
// logger (buffered as the API runs it), then exits, or with IDLE_MS set stays up that long.
import { createLogger } from '../../src/log.js';

const log = createLogger('info', 'kiln-api', 'json', Number(process.env.BUFFER_BYTES ?? 2048));
const lines = Number(process.env.LINES ?? 1);
for (let i = 0; i < lines; i++) {
  log.info({ writer: process.env.WRITER, i, route: '/v1/tasks/:id', pad: 'x'.repeat(200) }, 'request');
}
if (process.env.IDLE_MS) setTimeout(() => undefined, Number(process.env.IDLE_MS));
else process.exit(0);
