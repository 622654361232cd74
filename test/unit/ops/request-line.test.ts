// The request line is written without pino's per-line work; it must be the line pino writes.
import { execFileSync } from 'node:child_process';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ROOT } from '../../../scripts/services.js';
import { createLogger, requestLineWriter, type RequestLine } from '../../../src/ops/log.js';

function capture() {
  const lines: string[] = [];
  return { lines, stream: { write: (s: string) => void lines.push(s) } };
}

const LINES: RequestLine[] = [
  { reqId: 'r-1', method: 'GET', route: '/v1/tasks/:id', status: 200, ms: 0 },
  {
    reqId: '7b3f2bdd-301d-4a1a-b44d-9bd903457453',
    method: 'POST',
    route: '/v1/tasks',
    status: 202,
    ms: 15,
    taskId: 'task_7fefb3c51c66e5207c2684ac4099c478',
    owner: '90d77ae77c5c132be0a5a1f926967e429133d3fef99db07fbf95ed176ff8c7a1',
  },
  // A task id from a decoded path and an issued key's owner may hold anything JSON must escape.
  { reqId: 'a:b@c', method: 'GET', route: '(unmatched)', status: 404, ms: 1234, taskId: 'task_"\\\n\u0001é€😀' },
  { reqId: 'x', method: 'DELETE', route: '/v1/x', status: 500, ms: 3, owner: 'key:o"w\\ner' },
];

afterEach(() => vi.restoreAllMocks());

describe('request line', () => {
  it("is pino's line for the same fields, byte for byte", () => {
    vi.spyOn(Date, 'now').mockReturnValue(1795658591384);
    const ours = capture();
    const theirs = capture();
    const write = requestLineWriter(createLogger('info', 'kiln-api', 'json', 0, ours.stream));
    const log = createLogger('info', 'kiln-api', 'json', 0, theirs.stream).child({}, { redact: { paths: [] } });
    expect(write).toBeTypeOf('function');
    for (const line of LINES) {
      write!(line);
      log.info(line, 'request');
    }
    expect(theirs.lines).toHaveLength(LINES.length);
    expect(ours.lines).toEqual(theirs.lines);
    // And it is JSON a log pipeline reads back as the fields.
    expect(JSON.parse(ours.lines[2])).toMatchObject({ ...LINES[2], level: 30, name: 'kiln-api', msg: 'request' });
  });

  it('is left to pino for lines that are not plain JSON', () => {
    expect(requestLineWriter(pino({ level: 'info' }, capture().stream))).toBeUndefined();
    const root = createLogger('info', 'kiln-api', 'json', 0, capture().stream);
    expect(requestLineWriter(root.child({ extra: 1 }))).toBeUndefined();
  });

  it('goes to stdout with the lines pino writes there, with the same fields', () => {
    for (const bufferBytes of ['0', '2048']) {
      const out = execFileSync(process.execPath, ['--import', 'tsx', join(ROOT, 'test/support/log-writer.ts')], {
        cwd: ROOT,
        env: { ...process.env, LINES: '3', REQUEST_LINES: '1', BUFFER_BYTES: bufferBytes },
      }).toString();
      const parsed = out
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(parsed).toHaveLength(6);
      // Paired by request rather than by position: on a loaded machine the two lines of one request
      // were seen apart (the asynchronous destination's writes), and which one is pino's is then
      // not known; they must be the same line but for the time.
      for (let i = 0; i < 3; i++) {
        const pair = parsed.filter((l) => l.reqId === `r-${i}`);
        expect(pair).toHaveLength(2);
        const [one, other] = pair as [Record<string, unknown>, Record<string, unknown>];
        expect(Object.keys(one)).toEqual(Object.keys(other));
        expect({ ...one, time: 0 }).toEqual({ ...other, time: 0 });
        expect(one).toMatchObject({ level: 30, hostname: hostname(), name: 'kiln-api', reqId: `r-${i}`, ms: i });
        expect(one.pid).toBeTypeOf('number');
        expect(Math.abs((one.time as number) - (other.time as number))).toBeLessThan(5000);
      }
    }
  });
});
