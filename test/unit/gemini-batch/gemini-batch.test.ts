// Gemini batch mode, the pure parts: the body's checks (batch-level 400s, per-request refusals at
// each limit's edge), the state a batch derives from its tasks, the Operation's shape, and the
// mapping of Kiln's errors to Google's.
import { describe, expect, it } from 'vitest';
import type { ImageModel } from '../../../src/config/models.js';
import { DEFAULT_MODELS } from '../../../src/config/default-models.js';
import { KilnError } from '../../../src/shared/errors.js';
import { googleErrorBody, rpcName, rpcStatus } from '../../../src/http/google-errors.js';
import { BATCH_LIMITS, checkBatch } from '../../../src/gemini-batch/request.js';
import type { BatchRecord } from '../../../src/gemini-batch/store.js';
import { operation, summarize, type TaskNow } from '../../../src/gemini-batch/view.js';

const model = DEFAULT_MODELS.find((m) => m.id === 'kiln-image-1') as ImageModel;
const req = (text = 'a red fox') => ({ request: { contents: [{ role: 'user', parts: [{ text }] }] } });
const body = (requests: unknown[], extra: Record<string, unknown> = {}) => ({
  batch: { displayName: 'b', inputConfig: { requests: { requests } }, ...extra },
});
const refusal = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    return err as KilnError;
  }
  throw new Error('not refused');
};

describe('checkBatch: the batch as a whole', () => {
  it('takes 1 and 100 requests, refuses 0 and 101 with invalid_request', () => {
    expect(checkBatch(body([req()]), model).items).toHaveLength(1);
    expect(checkBatch(body(Array.from({ length: 100 }, () => req())), model).items).toHaveLength(100);
    expect(refusal(() => checkBatch(body([]), model)).message).toContain('at least one request');
    const e = refusal(() => checkBatch(body(Array.from({ length: 101 }, () => req())), model));
    expect(e.code).toBe('invalid_request');
    expect(e.message).toContain('at most 100 requests');
  });

  it('refuses file input, webhookConfig, a missing inputConfig and another model clearly', () => {
    const file = refusal(() => checkBatch({ batch: { inputConfig: { fileName: 'files/x' } } }, model));
    expect(file.message).toContain('File input');
    expect(refusal(() => checkBatch(body([req()], { webhookConfig: {} }), model)).message).toContain('webhookConfig');
    expect(refusal(() => checkBatch({ batch: {} }, model)).message).toContain('inputConfig');
    expect(refusal(() => checkBatch({}, model)).code).toBe('invalid_request');
    expect(refusal(() => checkBatch(body([req()], { model: 'models/other' }), model)).message).toContain(
      'models/other',
    );
    expect(checkBatch(body([req()], { model: 'models/kiln-image-1' }), model).items).toHaveLength(1);
  });

  it('takes a displayName of 512 characters, refuses 513', () => {
    expect(checkBatch(body([req()], { displayName: 'x'.repeat(512) }), model).displayName).toHaveLength(512);
    expect(refusal(() => checkBatch(body([req()], { displayName: 'x'.repeat(513) }), model)).code).toBe(
      'invalid_request',
    );
  });
});

describe('checkBatch: each request on its own', () => {
  it('turns a bad request into its own refusal, not a 400 of the batch', () => {
    const { items } = checkBatch(body([req(), 'nope', { request: { contents: [] } }, req('  ')]), model);
    expect('request' in items[0]!).toBe(true);
    for (const i of [1, 2, 3]) {
      const item = items[i]!;
      expect('refused' in item && item.refused.code, `item ${i}`).toBe(3);
    }
  });

  it("applies generateContent's prompt limit at its edge: 4000 characters pass, 4001 are refused", () => {
    const { items } = checkBatch(body([req('p'.repeat(4000)), req('p'.repeat(4001))]), model);
    expect('request' in items[0]!).toBe(true);
    const refused = items[1]!;
    expect('refused' in refused && refused.refused).toMatchObject({
      code: 3,
      details: [{ reason: 'PROMPT_TOO_LONG', domain: 'kiln' }],
    });
  });

  it('keeps metadata of up to 2048 bytes and echoes it; refuses 2049', () => {
    const pad = (bytes: number) => ({ key: 'k'.repeat(bytes - JSON.stringify({ key: '' }).length) });
    const ok = pad(BATCH_LIMITS.metadataBytes);
    expect(JSON.stringify(ok)).toHaveLength(2048);
    const { items } = checkBatch(
      body([
        { ...req(), metadata: ok },
        { ...req(), metadata: pad(2049) },
      ]),
      model,
    );
    expect(items[0]).toMatchObject({ metadata: ok });
    expect('refused' in items[1]! && items[1].refused.message).toContain('2049 bytes');
  });

  it("refuses a request naming another model, takes one naming the batch's", () => {
    const { items } = checkBatch(
      body([
        { request: { ...req().request, model: 'models/kiln-image-1' } },
        { request: { ...req().request, model: 'models/x' } },
      ]),
      model,
    );
    expect('request' in items[0]!).toBe(true);
    expect('refused' in items[1]!).toBe(true);
  });
});

const rec = (n: number, refused: number[] = []): BatchRecord => ({
  id: 'batch_0123456789abcdef0123456789abcdef',
  model: 'kiln-image-1',
  createdMs: 1_700_000_000_000,
  items: Array.from({ length: n }, (_, i) =>
    refused.includes(i) ? { refused: rpcStatus('quota_exceeded', 'over') } : { task: `task_${i}` },
  ),
});
const task = (status: string, extra: Record<string, unknown> = {}) =>
  ({ id: 't', status, created_at: 1_700_000_001, started_at: null, finished_at: null, ...extra }) as unknown as TaskNow;

describe('summarize', () => {
  it('is PENDING until a task starts, RUNNING while any is unfinished', () => {
    expect(summarize(rec(2), [task('accepted'), task('queued')]).state).toBe('BATCH_STATE_PENDING');
    expect(summarize(rec(2), [task('running'), task('queued')]).state).toBe('BATCH_STATE_RUNNING');
    expect(summarize(rec(2), [task('succeeded'), task('queued')]).state).toBe('BATCH_STATE_RUNNING');
    // A request refused at submit does not make the batch start.
    expect(summarize(rec(2, [0]), [null, task('accepted')]).state).toBe('BATCH_STATE_PENDING');
  });

  it('is SUCCEEDED when done with any success, FAILED with none, CANCELLED once canceled', () => {
    const done = [task('succeeded', { finished_at: 1_700_000_009 }), task('failed', { finished_at: 1_700_000_005 })];
    const s = summarize(rec(3, [2]), [...done, null]);
    expect(s).toMatchObject({
      state: 'BATCH_STATE_SUCCEEDED',
      done: true,
      stats: { requestCount: 3, successfulRequestCount: 1, failedRequestCount: 2, pendingRequestCount: 0 },
      endMs: 1_700_000_009_000,
    });
    expect(summarize(rec(1, [0]), [null]).state).toBe('BATCH_STATE_FAILED');
    expect(summarize(rec(2), done, 1_700_000_003_000).state).toBe('BATCH_STATE_CANCELLED');
    // Canceled, while a task still stops: not yet CANCELLED.
    expect(summarize(rec(2), [done[0]!, task('running')], 1_700_000_003_000).state).toBe('BATCH_STATE_RUNNING');
  });
});

describe('operation', () => {
  it('has the shape the SDK parses, with int64 stats as strings and the Operation error when not succeeded', () => {
    const r = rec(1, [0]);
    const op = operation(r, summarize(r, [null]), [{ error: r.items[0]!.refused }]);
    expect(op).toMatchObject({
      name: `batches/${r.id}`,
      done: true,
      error: { code: 2 },
      metadata: {
        model: 'models/kiln-image-1',
        state: 'BATCH_STATE_FAILED',
        createTime: '2023-11-14T22:13:20.000Z',
        batchStats: { requestCount: '1', failedRequestCount: '1' },
        taskIds: [null],
        output: { inlinedResponses: { inlinedResponses: [{ error: { code: 8 } }] } },
      },
    });
  });
});

describe('Google error shape', () => {
  it('keeps the HTTP status, names the rpc status and Kiln code', () => {
    expect(googleErrorBody(new KilnError('not_found', 'gone'))).toEqual({
      error: {
        code: 404,
        message: 'gone',
        status: 'NOT_FOUND',
        details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'NOT_FOUND', domain: 'kiln' }],
      },
    });
    expect(rpcName('request_too_large')).toBe('INVALID_ARGUMENT');
    expect(rpcName('quota_exceeded')).toBe('RESOURCE_EXHAUSTED');
    expect(rpcName('canceled')).toBe('CANCELLED');
    expect(rpcName('something_else')).toBe('UNKNOWN');
    expect(rpcName('constructor')).toBe('UNKNOWN');
    expect(rpcStatus('canceled', 'x').code).toBe(1);
    // An uncertain task: UNKNOWN, its ErrorInfo naming it as every other request's does.
    expect(rpcStatus('uncertain', 'x')).toEqual({
      code: 2,
      message: 'x',
      details: [{ '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'UNCERTAIN', domain: 'kiln' }],
    });
  });
});
