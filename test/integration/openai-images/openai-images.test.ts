// OpenAI Images on Kiln's image models, end to end with the unmodified official openai SDK (only its
// base URL and key set): generations (url, b64_json, n up to 4: one task and one workflow each),
// Prefer: respond-async, the SDK's error classes, quota refusals (a partial one cancels what it
// started), Idempotency-Key and owner scope. Edits and the form's limits:
// openai-images-edits.test.ts.
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { dayOf } from '../../../src/usage/store.js';
import { fail, TINY_PNG } from '../providers/gemini/fake-gemini.js';
import { KEY_A, KEY_B, TERMINAL, waitForStatus } from '../../support/kiln.js';
import { apiOf, ownerOf, sdkError, sdkOf, taskIds, useImagesKiln, type ImagesEnv } from './openai-images-kiln.js';

let env: ImagesEnv;
useImagesKiln((e) => (env = e));

const sdk = (key = KEY_A) => sdkOf(env.kiln, key);
const api = (key = KEY_A) => apiOf(env.kiln, key);

describe('images.generate', () => {
  it('url: one task, its workflow, and the URL its content redirects to', async () => {
    const { data, response } = await sdk()
      .images.generate({ model: 'img', prompt: 'a lighthouse at dusk', size: '1024x1024' })
      .withResponse();
    expect(response.status).toBe(200);
    expect(data.data).toHaveLength(1);
    const [id] = taskIds(response);
    const content = await api()(`/v1/tasks/${id}/content`);
    expect(data.data![0]!.url).toBe(content.headers.get('location'));
    const file = await fetch(data.data![0]!.url!);
    expect(file.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await file.arrayBuffer()).subarray(0, 8)).toEqual(TINY_PNG.subarray(0, 8));
    expect(data.created).toBe((await api()(`/v1/tasks/${id}`)).json.created_at);
    const d = await env.kiln.api.client.workflow.getHandle(id!).describe();
    expect([d.type, d.status.name]).toEqual(['imageTaskWorkflow', 'COMPLETED']);
  });

  it('b64_json: the image bytes', async () => {
    const { data, response } = await sdk()
      .images.generate({ model: 'img', prompt: 'a fox', response_format: 'b64_json' })
      .withResponse();
    const bytes = Buffer.from(data.data![0]!.b64_json!, 'base64');
    const stored = await fetch((await api()(`/v1/tasks/${taskIds(response)[0]}/content`)).headers.get('location')!);
    expect(bytes.equals(Buffer.from(await stored.arrayBuffer()))).toBe(true);
    expect(data.data![0]!.url).toBeUndefined();
  });

  it('n=4: four tasks, four workflows, all in /v1/tasks; the size reaches the upstream', async () => {
    const { data, response } = await sdk()
      .images.generate({ model: 'gem', prompt: 'four foxes', n: 4, size: '1536x1024', quality: 'low' })
      .withResponse();
    expect(data.data).toHaveLength(4);
    const ids = taskIds(response);
    expect(new Set(ids).size).toBe(4);
    for (const id of ids) {
      const d = await env.kiln.api.client.workflow.getHandle(id).describe();
      expect([d.type, d.status.name]).toEqual(['imageTaskWorkflow', 'COMPLETED']);
    }
    const listed = (await api()('/v1/tasks?limit=100')).json.items;
    for (const id of ids) expect(listed.find((t: any) => t.id === id)?.status).toBe('succeeded');
    expect(env.fake.requests).toHaveLength(4);
    // quality names the tier; size gives the ratio.
    expect((env.fake.requests[0]!.body as any).generationConfig).toEqual({
      imageConfig: { aspectRatio: '3:2', imageSize: '1K' },
    });
  });

  it('a task that fails answers with its code, through the SDK error classes', async () => {
    env.fake.enqueue(fail(400, 'the prompt was refused'));
    const err = await sdkError(sdk().images.generate({ model: 'gem', prompt: 'x' }));
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.code).toBe('invalid_request');
    expect(err.message).toContain('the prompt was refused');
  });
});

describe('SDK error classes', () => {
  it('a task canceled by its owner while the request waits: 409 canceled, which the SDK does not retry', async () => {
    const key = 'test-key-openai-images-cancel-1';
    const pending = sdkError(sdk(key).images.generate({ model: 'slow', prompt: 'never mind' }));
    const listed = async () => (await api(key)('/v1/tasks')).json.items as { id: string }[];
    await expect.poll(async () => (await listed()).length).toBe(1);
    const [task] = await listed();
    expect((await api(key)(`/v1/tasks/${task!.id}/cancel`, { method: 'POST' })).status).toBe(202);
    const err = await pending;
    expect(err).toBeInstanceOf(OpenAI.ConflictError);
    expect([err.status, err.code]).toEqual([409, 'canceled']);
    expect(err.headers?.get('x-should-retry')).toBe('false');
    expect(err.headers?.get('x-kiln-task-id')).toBe(task!.id);
    expect(await listed()).toHaveLength(1);
  });

  const refused = (body: Record<string, unknown>) =>
    sdkError(sdk().images.generate({ model: 'img', prompt: 'x', ...body } as any));

  it('n: 1 and 4 are the edges; 0 and 5 are 400 invalid_request, param n, and start nothing', async () => {
    const before = (await api()('/v1/tasks?limit=100')).json.items.length;
    for (const n of [0, 5]) {
      const err = await refused({ n });
      expect(err, String(n)).toBeInstanceOf(OpenAI.BadRequestError);
      expect([err.status, err.code, err.param]).toEqual([400, 'invalid_request', 'n']);
    }
    expect((await api()('/v1/tasks?limit=100')).json.items.length).toBe(before);
  });

  it('size and quality: 400 naming the allowed values', async () => {
    const size = await refused({ size: '1792x1024' });
    expect(size).toBeInstanceOf(OpenAI.BadRequestError);
    expect([size.code, size.param]).toEqual(['invalid_request', 'size']);
    expect(size.message).toContain('1:1, 2:3, 3:2, 3:4, 4:3, 4:5, 5:4, 9:16, 16:9, 21:9');
    const quality = await refused({ quality: 'max' });
    expect([quality.status, quality.param]).toEqual([400, 'quality']);
    expect(quality.message).toContain('auto, low (1K), standard (1K), medium (2K), hd (2K), high (4K)');
    const format = await refused({ response_format: 'png' });
    expect([format.status, format.param]).toEqual([400, 'response_format']);
  });

  it('prompt: 4000 characters pass, 4001 are 400 prompt_too_long', async () => {
    const ok = await sdk().images.generate({ model: 'img', prompt: 'p'.repeat(4000) });
    expect(ok.data).toHaveLength(1);
    const err = await refused({ prompt: 'p'.repeat(4001) });
    expect([err.status, err.code, err.param]).toEqual([400, 'prompt_too_long', 'prompt']);
  });

  it('model: unknown is 404 model_not_found; a chat or video model is 400', async () => {
    const unknown = await sdkError(sdk().images.generate({ model: 'nope', prompt: 'x' }));
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
    expect([unknown.status, unknown.code, unknown.param]).toEqual([404, 'model_not_found', 'model']);
    for (const model of ['talk', 'vid']) {
      const err = await sdkError(sdk().images.generate({ model, prompt: 'x' }));
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      expect(err.message).toContain(`is a ${model === 'talk' ? 'chat' : 'video'} model`);
      expect(err.message).toContain('img, slow, gem, gem-inline');
    }
  });
});

describe('quotas', () => {
  it('a refused submit is 429 quota_exceeded through the SDK, without its retries', async () => {
    const key = 'test-key-openai-images-quota-0';
    await env.quota.setOwnerLimits(ownerOf(env.kiln, key), { daily_units: 0 });
    const err = await sdkError(sdk(key).images.generate({ model: 'img', prompt: 'x' }));
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect([err.status, err.code]).toEqual([429, 'quota_exceeded']);
    expect(err.headers?.get('x-should-retry')).toBe('false');
    expect(Number(err.headers?.get('retry-after'))).toBeGreaterThan(60);
  });

  it('the 3rd of 3 refused: the 2 started are canceled and released; a keyed retry starts anew', async () => {
    const key = 'test-key-openai-images-quota-2';
    const owner = ownerOf(env.kiln, key);
    await env.quota.setOwnerLimits(owner, { daily_units: 2 });
    const err = await sdkError(sdk(key).images.generate({ model: 'slow', prompt: 'x', n: 3 }));
    expect([err.status, err.code]).toEqual([429, 'quota_exceeded']);
    expect(err.message).toContain('Image 3 of 3 was not started');
    expect(err.message).toContain('The 2 already started were canceled.');
    const items = (await api(key)('/v1/tasks')).json.items;
    expect(items).toHaveLength(2);
    for (const t of items) {
      const done = await waitForStatus(() => api(key)(`/v1/tasks/${t.id}`), TERMINAL);
      expect([done.status, done.error?.code]).toEqual(['failed', 'canceled']);
    }
    await expect.poll(() => env.quota.standing(owner).then((s) => s.daily_units)).toBe(0);
    const day = (await env.quota.usage(owner, [dayOf(Date.now())])).get(dayOf(Date.now()))!.get('slow');
    expect(day).toMatchObject({ submitted: 2, canceled: 2, units: 0 });

    // With an Idempotency-Key: refused part way, then (quota raised) the same key starts new tasks.
    const headers = { 'Idempotency-Key': 'partial-1' };
    const again = await sdkError(sdk(key).images.generate({ model: 'slow', prompt: 'x', n: 3 }, { headers }));
    expect(again.code).toBe('quota_exceeded');
    const canceled = (await api(key)('/v1/tasks')).json.items.map((t: any) => t.id);
    expect(canceled).toHaveLength(4);
    await env.quota.setOwnerLimits(owner, { daily_units: 5 });
    const { data, response } = await sdk(key)
      .images.generate({ model: 'slow', prompt: 'x', n: 3 }, { headers })
      .withResponse();
    expect(data.data).toHaveLength(3);
    const ids = taskIds(response);
    for (const id of ids) expect(canceled).not.toContain(id);
    const replay = await sdk(key).images.generate({ model: 'slow', prompt: 'x', n: 3 }, { headers }).withResponse();
    expect(taskIds(replay.response)).toEqual(ids);
    expect(replay.response.headers.get('idempotent-replayed')).toBe('true');
  });
});

describe('Idempotency-Key', () => {
  it('a resent request answers the same tasks; another request with the key is 422; keys are per owner', async () => {
    const headers = { 'Idempotency-Key': `oi-${Date.now()}` };
    const body = { model: 'img', prompt: 'twins', n: 2 };
    const first = await sdk().images.generate(body, { headers }).withResponse();
    const second = await sdk().images.generate(body, { headers }).withResponse();
    expect(taskIds(second.response)).toEqual(taskIds(first.response));
    expect(second.data).toEqual(first.data);
    expect(second.response.headers.get('idempotent-replayed')).toBe('true');
    // Asynchronous, the same key: the same tasks, finished.
    const later = await sdk()
      .images.generate(body, { headers: { ...headers, Prefer: 'respond-async' } })
      .withResponse();
    expect((later.data as any).data.map((t: any) => [t.id, t.status])).toEqual(
      taskIds(first.response).map((id) => [id, 'succeeded']),
    );
    const reused = await sdkError(sdk().images.generate({ ...body, n: 3 }, { headers }));
    expect(reused).toBeInstanceOf(OpenAI.UnprocessableEntityError);
    expect(reused.code).toBe('idempotency_key_reused');
    const other = await sdk(KEY_B).images.generate(body, { headers }).withResponse();
    for (const id of taskIds(other.response)) expect(taskIds(first.response)).not.toContain(id);
  });
});

describe('Prefer: respond-async', () => {
  it('202 with the tasks to poll; another owner finds none of them', async () => {
    const { data, response } = await sdk()
      .images.generate({ model: 'img', prompt: 'later', n: 2 }, { headers: { Prefer: 'respond-async' } })
      .withResponse();
    expect(response.status).toBe(202);
    expect(response.headers.get('preference-applied')).toBe('respond-async');
    const list = data as any;
    expect(list.object).toBe('list');
    expect(list.data.map((t: any) => [t.object, t.model, t.status])).toEqual([
      ['image.task', 'img', 'accepted'],
      ['image.task', 'img', 'accepted'],
    ]);
    expect(list.data.map((t: any) => t.id)).toEqual(taskIds(response));
    for (const t of list.data) {
      expect(t.polling_url).toBe(`/v1/tasks/${t.id}`);
      const done = await waitForStatus(() => api()(t.polling_url), TERMINAL);
      expect(done.status).toBe('succeeded');
      for (const path of [t.polling_url, t.content_url]) {
        const other = await api(KEY_B)(path);
        expect([other.status, other.json.error.code]).toEqual([404, 'not_found']);
      }
      const cancel = await api(KEY_B)(`/v1/tasks/${t.id}/cancel`, { method: 'POST' });
      expect(cancel.status).toBe(404);
    }
    const batch = await api(KEY_B)('/v1/tasks/batch-get', { method: 'POST', json: { ids: taskIds(response) } });
    expect(batch.json.items.map((i: any) => i.status)).toEqual(['not_found', 'not_found']);
  });
});

it('both operations are in /openapi.json', async () => {
  const doc = await (await fetch(`${env.kiln.baseUrl}/openapi.json`)).json();
  const gen = doc.paths['/v1/images/generations'].post;
  const edit = doc.paths['/v1/images/edits'].post;
  expect([gen.operationId, edit.operationId]).toEqual(['createImage', 'createImageEdit']);
  for (const op of [gen, edit])
    expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['200', '202', '400', '404', '413', '429']));
  expect(Object.keys(edit.requestBody.content)).toEqual(['multipart/form-data']);
  expect(gen.parameters.map((p: any) => p.name)).toEqual(
    expect.arrayContaining(['Idempotency-Key', 'Prefer', 'webhook']),
  );
});
