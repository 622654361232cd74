// Regressions found by `npm run fuzz` (schemathesis against /openapi.json): each case is what the
// fuzzer sent or checked, pinned as a plain test so it stays fixed without the fuzzer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsBlobStore } from '../../../src/blobs/local.js';
import { KEY_A, http, startKiln, submitBody, type Kiln } from '../../support/kiln.js';

const OPERATOR_TOKEN = 'fuzz-regressions-operator-token-0123456789';
let kiln: Kiln;
let doc: any;
let api: ReturnType<typeof http>;

beforeAll(async () => {
  kiln = await startKiln({ workers: false, env: { KILN_OPERATOR_TOKEN: OPERATOR_TOKEN } });
  api = http(kiln.baseUrl, KEY_A);
  doc = (await api('/openapi.json')).json;
});
afterAll(async () => {
  await kiln?.stop();
});

const operation = (id: string): any => {
  for (const item of Object.values<any>(doc.paths))
    for (const op of Object.values<any>(item)) if (op.operationId === id) return op;
  throw new Error(`no operation ${id}`);
};

function expectError(r: { status: number; json: any; text: string }, status: number, code: string) {
  expect({ status: r.status, code: r.json?.error?.code }, r.text.slice(0, 300)).toEqual({ status, code });
  expect(Object.keys(r.json)).toEqual(['error']);
}

describe('fuzz regressions', () => {
  // ST105 (content_type_conformance): every type a file is served as (video/mp4 among them) must be
  // one the document lists, not only application/octet-stream.
  it('serves generated files with a content type the document lists', async () => {
    const documented = Object.keys(operation('getFile').responses['200'].content);
    const store = new FsBlobStore(kiln.config.blobDir, kiln.baseUrl);
    for (const type of ['image/png', 'image/jpeg', 'image/webp', 'image/gif', 'video/mp4', 'application/x-unknown']) {
      const url = await store.put(Buffer.from('bytes'), type);
      const res = await fetch(url);
      expect(res.status).toBe(200);
      expect(documented, type).toContain(res.headers.get('content-type'));
    }
  });

  // ST105: {"stream": true} answers text/event-stream, so the document lists it beside application/json.
  it('documents both answers of chat completions: JSON and, with stream: true, server-sent events', async () => {
    const documented = Object.keys(operation('createChatCompletion').responses['200'].content);
    for (const stream of [false, true]) {
      const r = await api('/v1/chat/completions', {
        method: 'POST',
        json: { model: 'kiln-chat-1', stream, messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }] },
      });
      expect(r.status, r.text.slice(0, 200)).toBe(200);
      const type = r.headers.get('content-type')!.split(';')[0].trim();
      expect(type).toBe(stream ? 'text/event-stream' : 'application/json');
      expect(documented).toContain(type);
    }
  });

  // positive_data_acceptance: every query the document allows must be accepted, so the list query is
  // documented as the whole numbers (with their bounds) the handler takes, not "a string of digits".
  it('documents the list query as the whole numbers the handler accepts, edges included', async () => {
    const params = Object.fromEntries(operation('listTasks').parameters.map((p: any) => [p.name, p.schema]));
    expect(params.days).toMatchObject({ type: 'integer', minimum: 1, maximum: 3, default: 3 });
    expect(params.limit).toMatchObject({ type: 'integer', minimum: 1, maximum: 100, default: 20 });
    expect(params.before_created_at).toMatchObject({ type: 'integer', minimum: 0 });
    for (const [query, status] of [
      ['days=1', 200],
      ['days=3', 200],
      ['days=0', 400],
      ['days=4', 400],
      ['limit=1', 200],
      ['limit=100', 200],
      ['limit=0', 400],
      ['limit=101', 400],
      ['before_created_at=0', 200],
      ['days=1.5', 400],
    ] as const) {
      const r = await api(`/v1/tasks?${query}`);
      expect(r.status, `${query}: ${r.text.slice(0, 200)}`).toBe(status);
      if (status === 400) expectError(r, 400, 'invalid_request');
    }
  });

  // positive_data_acceptance: {"model": ""} matched the documented chat request but is refused.
  it('documents the chat model id as non-empty, and refuses an empty one with 400', async () => {
    const body = operation('createChatCompletion').requestBody.content['application/json'].schema;
    const schema = body.$ref ? doc.components.schemas[body.$ref.split('/').pop()] : body;
    expect(schema.properties.model).toMatchObject({ type: 'string', minLength: 1 });
    const r = await api('/v1/chat/completions', {
      method: 'POST',
      json: { model: '', messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }] },
    });
    expectError(r, 400, 'invalid_request');
  });

  // A body with a "__proto__" key is valid JSON that the parser's prototype-poisoning guard refuses:
  // the answer said "not valid JSON", which sent the caller looking for a syntax error.
  it('refuses a "__proto__" key with a 400 that names it, on every JSON endpoint', async () => {
    const poisoned = (json: object) => JSON.stringify(json).replace(/^\{/, '{"__proto__":{"x":1},');
    const cases: [string, string, Record<string, string>][] = [
      ['/v1beta/models/kiln-image-1:generateContent', poisoned(submitBody()), {}],
      ['/v1/tasks/batch-get', poisoned({ ids: ['task_0123456789abcdef0123456789abcdef'] }), {}],
      ['/v1/chat/completions', poisoned({ model: 'kiln-chat-1', messages: [] }), {}],
      ['/v1/videos', poisoned({ model: 'kiln-video-1', prompt: 'waves' }), {}],
      ['/codec/decode', poisoned({ payloads: [] }), { authorization: `Bearer ${OPERATOR_TOKEN}` }],
    ];
    for (const [path, body, headers] of cases) {
      const r = await api(path, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
      expectError(r, 400, 'invalid_request');
      expect(r.json.error.message, path).toContain('__proto__');
    }
    // The same body without the key is taken: the refusal is about the key, not the rest.
    const ok = await api('/v1/tasks/batch-get', {
      method: 'POST',
      json: { ids: ['task_0123456789abcdef0123456789abcdef'] },
    });
    expect(ok.status).toBe(200);
  });

  // Stateful fuzzing reached GET /v1/tasks/{id} only through guessed links, and never with a
  // usable id: the document now links what a create answers to the operations that read it.
  it('links submit and video create to the operations that read what they create', () => {
    const links = (id: string, status: string) => operation(id).responses[status].links;
    const expected: [string, string, string[]][] = [
      ['submitImageTask', '202', ['getTask', 'getTaskContent', 'batchGetTasks', 'cancelTask']],
      ['createVideo', '200', ['getVideo', 'getVideoContent', 'cancelVideo']],
    ];
    for (const [source, status, targets] of expected) {
      const l = Object.values<any>(links(source, status));
      expect(l.map((x) => x.operationId).sort()).toEqual([...targets].sort());
      for (const link of l) {
        const target = operation(link.operationId);
        for (const name of Object.keys(link.parameters ?? {})) {
          expect(
            target.parameters.map((p: any) => p.name),
            `${link.operationId} has no parameter ${name}`,
          ).toContain(name);
        }
        if (link.requestBody) expect(target.requestBody, `${link.operationId} takes no body`).toBeDefined();
      }
    }
    expect(links('submitImageTask', '202').BatchGetTasks.requestBody).toEqual({ ids: ['$response.body#/id'] });
  });
});
