import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKiln, http, submitBody, waitForStatus, KEY_A, type Kiln } from './support/kiln.js';

let kiln: Kiln;
beforeAll(async () => { kiln = await startKiln({ models: [{ id: 'kiln-image-1', provider: 'local', latencyMs: 600, idempotent: true }] }); });
afterAll(async () => { await kiln?.stop(); });

describe('image task lifecycle', () => {
  it('goes submit → unfinished poll → 409 → success → 302 → PNG bytes', async () => {
    const api = http(kiln.baseUrl, KEY_A);
    const sub = await api('/v1beta/models/kiln-image-1:generateContent', { method: 'POST', json: submitBody() });
    expect(sub.status).toBe(202);
    const id = sub.json.id;
    expect(id).toMatch(/^task_[a-f0-9]{32}$/);
    expect(sub.json).toMatchObject({ object: 'image.task', model: 'kiln-image-1', status: 'accepted', polling_url: `/v1/tasks/${id}`, content_url: `/v1/tasks/${id}/content` });

    const first = await api(`/v1/tasks/${id}`);
    expect(first.status).toBe(200);
    expect(['accepted', 'queued', 'running']).toContain(first.json.status);
    expect(first.json).toMatchObject({ id, model: 'kiln-image-1', finished_at: null, candidates: null, error: null });
    expect(first.headers.get('retry-after')).toBe('10');

    const early = await api(`/v1/tasks/${id}/content`);
    expect(early.status).toBe(409);
    expect(early.json.error.code).toBe('task_not_ready');

    const done = await waitForStatus(() => api(`/v1/tasks/${id}`), (s) => s === 'succeeded');
    expect(done).toMatchObject({ id, object: 'image.task', model: 'kiln-image-1', status: 'succeeded', error: null });
    expect(Number.isInteger(done.created_at)).toBe(true);
    expect(Number.isInteger(done.finished_at)).toBe(true);
    expect(done.finished_at).toBeGreaterThanOrEqual(done.created_at);
    expect(done.created_at).toBeLessThan(1e10);
    expect(typeof done.response_id).toBe('string');
    expect(typeof done.model_version).toBe('string');
    expect(done.candidates[0].finishReason).toBe('STOP');
    const url = done.candidates[0].content.parts[0].inlineData.data;
    expect(url).toMatch(new RegExp(`^${kiln.baseUrl}/v1/files/[a-f0-9]{32}\\.png$`));

    const content = await api(`/v1/tasks/${id}/content`);
    expect(content.status).toBe(302);
    expect(content.headers.get('location')).toBe(url);

    const img = await fetch(url);
    expect(img.status).toBe(200);
    expect(img.headers.get('content-type')).toBe('image/png');
    const bytes = Buffer.from(await img.arrayBuffer());
    expect(bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))).toBe(true);
  });
});
