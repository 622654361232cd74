// What an operator sees in the Temporal Web UI: a readable summary per task, working search
// attribute filters, and the codec endpoints that decrypt payloads for an authorised operator.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_SUMMARY_BYTES, taskSummary } from '../../../src/tasks/summary.js';
import {
  startKiln,
  http,
  submitBody,
  waitForStatus,
  eventually,
  listIds,
  KEY_A,
  type Kiln,
} from '../../support/kiln.js';

const TOKEN = randomBytes(24).toString('hex');
const UI = 'http://127.0.0.1:8233';
let kiln: Kiln;
let taskId: string;
let owner: string;

beforeAll(async () => {
  kiln = await startKiln({
    models: [{ id: 'kiln-image-1', provider: 'local', latencyMs: 100, idempotent: true }],
    env: { KILN_OPERATOR_TOKEN: TOKEN, CODEC_CORS_ORIGINS: `${UI},http://localhost:8233`, SUMMARY_PROMPT_CHARS: '80' },
  });
  const api = http(kiln.baseUrl);
  const sub = await api('/v1beta/models/kiln-image-1:generateContent', {
    method: 'POST',
    json: submitBody('a lighthouse at dusk, "quoted" ✨'),
  });
  taskId = sub.json.id;
  await waitForStatus(() => api(`/v1/tasks/${taskId}`), 'succeeded');
  owner = (await kiln.api.store.get(taskId))!.owner;
});
afterAll(async () => {
  await kiln?.stop();
});

const b64 = (b: Uint8Array | null | undefined) => Buffer.from(b ?? new Uint8Array()).toString('base64');

async function startInput() {
  const history = await kiln.api.client.workflow.getHandle(taskId).fetchHistory();
  const input = history.events![0].workflowExecutionStartedEventAttributes!.input!.payloads![0];
  return {
    metadata: Object.fromEntries(Object.entries(input.metadata ?? {}).map(([k, v]) => [k, b64(v)])),
    data: b64(input.data),
  };
}

describe('workflow summary', () => {
  it('shows model, prompt excerpt (SUMMARY_PROMPT_CHARS) and owner hash in plain text', async () => {
    const d = await kiln.api.client.workflow.getHandle(taskId).describe();
    const summary = await d.staticSummary();
    expect(summary).toBe(
      `image task · kiln-image-1 · owner ${owner.slice(0, 12)} · "a lighthouse at dusk, "quoted" ✨"`,
    );
  });

  it('stays within the codec’s plain-text limit whatever the prompt', () => {
    const bytes = (s: string) => Buffer.byteLength(JSON.stringify(s));
    const long = taskSummary('image', 'm'.repeat(100), 'f'.repeat(64), '"\\'.repeat(2000) + '✨'.repeat(2000), 200);
    expect(bytes(long)).toBeLessThanOrEqual(MAX_SUMMARY_BYTES);
    expect(long).toContain('owner ffffffffffff');
    const emoji = taskSummary('image', 'kiln-image-1', 'a'.repeat(64), '🦊'.repeat(500), 200);
    expect(bytes(emoji)).toBeLessThanOrEqual(MAX_SUMMARY_BYTES);
    expect(emoji).toMatch(/🦊…"$/);
    // Off (the default): no prompt at all. A character cap: the excerpt stops there.
    expect(taskSummary('image', 'kiln-image-1', 'a'.repeat(64), 'secret plans', 0)).toBe(
      'image task · kiln-image-1 · owner aaaaaaaaaaaa',
    );
    expect(taskSummary('image', 'kiln-image-1', 'a'.repeat(64), 'abcdef', 5)).toBe(
      'image task · kiln-image-1 · owner aaaaaaaaaaaa · "abcde…"',
    );
    expect(taskSummary('image', 'kiln-image-1', 'a'.repeat(64), 'abcde', 5)).toBe(
      'image task · kiln-image-1 · owner aaaaaaaaaaaa · "abcde"',
    );
    // Exactly at the byte budget is kept whole; one character more is cut (a long model id and
    // quotes, which JSON doubles, make the budget bind before the excerpt's character cap).
    const model = 'm'.repeat(100);
    const room = MAX_SUMMARY_BYTES - bytes(`image task · ${model} · owner aaaaaaaaaaaa · ""`);
    const fits = '"'.repeat(Math.floor(room / 2)) + (room % 2 ? 'x' : '');
    expect(bytes(taskSummary('image', model, 'a'.repeat(64), fits, 200))).toBe(MAX_SUMMARY_BYTES);
    expect(taskSummary('image', model, 'a'.repeat(64), fits, 200)).not.toContain('…');
    const over = taskSummary('image', model, 'a'.repeat(64), `${fits}y`, 200);
    expect(bytes(over)).toBeLessThanOrEqual(MAX_SUMMARY_BYTES);
    expect(over).toContain('…');
  });
});

describe('search attributes', () => {
  it('find tasks with the filters docs/operating.md shows', async () => {
    const found = await eventually(
      () =>
        listIds(
          kiln.api.client,
          `KilnOwner = "${owner}" AND ExecutionStatus = "Completed" AND KilnStatus IS NULL AND KilnModel = "kiln-image-1"`,
        ),
      (ids) => ids.includes(taskId),
    );
    expect(found).toContain(taskId);
    const failed: string[] = [];
    for await (const wf of kiln.api.client.workflow.list({ query: `KilnOwner = "${owner}" AND KilnStatus = "failed"` }))
      failed.push(wf.workflowId);
    expect(failed).not.toContain(taskId);
  });
});

describe('codec server', () => {
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    http(kiln.baseUrl, null)(path, { method: 'POST', json: body, headers: { 'x-namespace': 'default', ...headers } });

  it('refuses callers without the operator token', async () => {
    const payloads = [await startInput()];
    expect((await post('/codec/decode', { payloads })).json.error.code).toBe('missing_api_key');
    expect((await post('/codec/decode', { payloads })).status).toBe(401);
    expect((await post('/codec/decode', { payloads }, { authorization: `Bearer ${KEY_A}` })).status).toBe(401);
    expect((await post('/codec/decode', { payloads }, { authorization: `Bearer ${TOKEN}x` })).status).toBe(401);
    expect((await post(`/codec/t/${TOKEN.slice(1)}/decode`, { payloads })).status).toBe(401);
  });

  it('decrypts history payloads for the operator (header or path token)', async () => {
    const input = await startInput();
    expect(Buffer.from(input.metadata.encoding, 'base64').toString()).toBe('binary/encrypted');
    for (const [path, headers] of [
      ['/codec/decode', { authorization: `Bearer ${TOKEN}` }],
      [`/codec/t/${TOKEN}/decode`, {}],
    ] as const) {
      const res = await post(path, { payloads: [input] }, headers);
      expect(res.status).toBe(200);
      const plain = res.json.payloads[0];
      expect(Buffer.from(plain.metadata.encoding, 'base64').toString()).toBe('json/plain');
      const value = JSON.parse(Buffer.from(plain.data, 'base64').toString());
      expect(value.task.id).toBe(taskId);
      expect(value.task.request.contents[0].parts[0].text).toContain('a lighthouse at dusk');
    }
  });

  it('encodes what it decodes back into the same value', async () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    const plain = {
      metadata: { encoding: Buffer.from('json/plain').toString('base64') },
      data: Buffer.from(JSON.stringify({ hello: 'world' })).toString('base64'),
    };
    const enc = await post('/codec/encode', { payloads: [plain] }, auth);
    expect(enc.status).toBe(200);
    expect(Buffer.from(enc.json.payloads[0].metadata.encoding, 'base64').toString()).toBe('binary/encrypted');
    const dec = await post('/codec/decode', enc.json, auth);
    expect(dec.json.payloads[0]).toEqual(plain);
  });

  it('answers bad input with 400, not 500', async () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    expect((await post('/codec/decode', { payloads: 'x' }, auth)).status).toBe(400);
    const forged = {
      metadata: {
        encoding: Buffer.from('binary/encrypted').toString('base64'),
        'encryption-key-id': Buffer.from('0000').toString('base64'),
      },
      data: 'AAAA',
    };
    const res = await post('/codec/decode', { payloads: [forged] }, auth);
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe('invalid_request');
  });

  it('lets the Web UI origin call it from a browser (CORS), and no other origin', async () => {
    const preflight = (origin: string) =>
      fetch(`${kiln.baseUrl}/codec/decode`, {
        method: 'OPTIONS',
        headers: {
          origin,
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'content-type,x-namespace',
        },
      });
    const ok = await preflight(UI);
    expect(ok.status).toBe(204);
    expect(ok.headers.get('access-control-allow-origin')).toBe(UI);
    expect(ok.headers.get('access-control-allow-headers')).toContain('x-namespace');
    const other = await preflight('http://evil.example');
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('is off when no operator token is configured', async () => {
    const k = await startKiln({ workers: false });
    try {
      const res = await http(k.baseUrl, null)('/codec/decode', {
        method: 'POST',
        json: { payloads: [] },
        headers: { authorization: 'Bearer whatever' },
      });
      expect(res.status).toBe(404);
    } finally {
      await k.stop();
    }
  });
});
