// Child process of test/unit/ops/log-buffer.test.ts: writes LINES request-like lines through the API's
// logger (buffered as the API runs it), then exits, or with IDLE_MS set stays up that long. With
// REQUEST_LINES=1 (test/unit/ops/request-line.test.ts), each line goes out twice, through pino and
// through the request line writer, to the logger's own stdout stream.
import { createLogger, exitAfterLogs, requestLineWriter } from '../../src/ops/log.js';

const log = createLogger('info', 'kiln-api', 'json', Number(process.env.BUFFER_BYTES ?? 2048));
const lines = Number(process.env.LINES ?? 1);
const requestLog = log.child({}, { redact: { paths: [] } });
const write = requestLineWriter(log);
for (let i = 0; i < lines; i++) {
  if (process.env.REQUEST_LINES === '1') {
    const line = { reqId: `r-${i}`, method: 'GET', route: '/v1/tasks/:id', status: 200, ms: i, taskId: 'task_x' };
    requestLog.info(line, 'request');
    write!(line);
    continue;
  }
  log.info({ writer: process.env.WRITER, i, route: '/v1/tasks/:id', pad: 'x'.repeat(200) }, 'request');
}
if (process.env.IDLE_MS) setTimeout(() => undefined, Number(process.env.IDLE_MS));
else exitAfterLogs(log, 0); // as the API and the worker exit
