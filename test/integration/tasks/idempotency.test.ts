// Idempotency-Key on submit (task and direct form) and video create, against a real Kiln on real
// Temporal and Redis with fake upstreams that count their calls: one key, one workflow, one
// upstream call, however many submits (concurrent, or after the task finished); another request
// under the key is refused; keys are per owner; the client's retries carry one key.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ownerOfKey } from '../../../src/infra/callers.js';
import { Kiln as KilnClient } from '../../../src/client/index.js';
import { SEARCH_ATTRIBUTES } from '../../../src/shared/task.js';
import { ok, startFakeGemini, TINY_PNG, type FakeGemini } from '../providers/gemini/fake-gemini.js';
import { startFakeOpenAIVideos, type FakeOpenAIVideos } from '../providers/openai-videos/fake-openai-videos.js';
import { eventually, http, listIds, startKiln, submitBody, waitForStatus, type Kiln } from '../../support/kiln.js';

let gemini: FakeGemini;
let videos: FakeOpenAIVideos;
let kiln: Kiln;

beforeAll(async () => {
  gemini = await startFakeGemini();
  videos = await startFakeOpenAIVideos();
  const quick = { timeoutMs: 5000, heartbeatTimeoutMs: 1000, maxAttempts: 1 };
  kiln = await startKiln({
    models: [
      { ...quick, id: 'g-img', provider: 'gemini', baseUrl: gemini.baseUrl },
      { ...quick, id: 'g-img-2', provider: 'gemini', baseUrl: gemini.baseUrl },
      { ...quick, id: 'd-img', provider: 'gemini', form: 'direct', baseUrl: gemini.baseUrl },
      {
        ...quick,
        id: 'v-oa',
        kind: 'video',
        provider: 'openai-videos',
        baseUrl: videos.baseUrl,
        upstreamModel: 'sora-2',
        pollIntervalMs: 100,
      },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await gemini?.close();
  await videos?.close();
});
beforeEach(() => {
  gemini.reset();
  videos.reset();
});

/** A caller of its own per test (passthrough mode: any well-formed key is an owner). */
const newCaller = () => {
  const key = `idem-test-${randomBytes(8).toString('hex')}`;
  return { key, owner: ownerOfKey(kiln.config.ownerKey, key), api: http(kiln.baseUrl, key) };
};
const newKey = () => `k-${randomBytes(12).toString('hex')}`;
const FINAL = (s: string) => ['succeeded', 'failed', 'uncertain', 'completed'].includes(s);

const submit = (c: ReturnType<typeof newCaller>, key: string | null, body: unknown = submitBody(), model = 'g-img') =>
  c.api(`/v1beta/models/${model}:generateContent`, {
    method: 'POST',
    json: body,
    headers: key === null ? {} : { 'Idempotency-Key': key },
  });

/** The owner's workflows as Temporal's visibility lists them, once it shows at least `atLeast`. */
async function workflowsOf(owner: string, atLeast = 1): Promise<string[]> {
  const list = () => listIds(kiln.api.client, `${SEARCH_ATTRIBUTES.owner} = '${owner}'`);
  await eventually(list, (l) => l.length >= atLeast);
  // A moment more: a second workflow would have shown up by now.
  await new Promise((r) => setTimeout(r, 500));
  return list();
}

describe('image task form', () => {
  it('concurrent submits with one key start one workflow and call the upstream once', async () => {
    const c = newCaller();
    const key = newKey();
    let release!: () => void;
    gemini.enqueue(ok(undefined, { hold: new Promise<void>((r) => (release = r)) }));
    const answers = await Promise.all(Array.from({ length: 5 }, () => submit(c, key)));
    for (const a of answers) expect(a.status, a.text).toBe(202);
    const ids = new Set(answers.map((a) => a.json.id));
    expect(ids.size).toBe(1);
    const [id] = ids;
    expect(id).toMatch(/^task_[a-f0-9]{32}$/);
    // Exactly one submit started the workflow; the others are replays of it.
    expect(answers.filter((a) => a.headers.get('idempotent-replayed') === 'true')).toHaveLength(4);
    expect(new Set(answers.map((a) => a.json.created_at)).size).toBe(1);
    // While it runs, the task holds exactly one place: replays neither add one nor give it back.
    expect(await kiln.api.store.unfinishedCount()).toBe(1);
    release();
    const done = await waitForStatus(() => c.api(`/v1/tasks/${id}`), FINAL);
    expect(done.status).toBe('succeeded');
    expect(gemini.requests.filter((r) => r.model !== null)).toHaveLength(1);
    expect(await workflowsOf(c.owner)).toEqual([id]);
    // No place in the unfinished gauge leaked or was given back twice.
    expect(
      await eventually(
        () => kiln.api.store.unfinishedCount(),
        (n) => n === 0,
      ),
    ).toBe(0);

    // After the task finished: the same id, its finished state, still no second call.
    const again = await submit(c, key);
    expect(again.status).toBe(202);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.json).toMatchObject({ id, object: 'image.task', status: 'succeeded', model: 'g-img' });
    expect(again.json.created_at).toBe(answers[0].json.created_at);
    // Key order and the way output=url is asked for are not part of the request's identity.
    const reordered = {
      generationConfig: { imageConfig: { output: 'url', aspectRatio: '1:1' }, responseModalities: ['IMAGE'] },
      contents: [{ parts: [{ text: 'a red fox in the snow' }], role: 'user' }],
    };
    const third = await c.api('/v1beta/models/g-img:generateContent?output=url', {
      method: 'POST',
      json: reordered,
      headers: { 'Idempotency-Key': key },
    });
    expect(third.status, third.text).toBe(202);
    expect(third.json.id).toBe(id);
    expect(gemini.requests.filter((r) => r.model !== null)).toHaveLength(1);

    // Without the read model's record (lost, or Redis flushed), Temporal still knows the closed
    // workflow: the start is rejected (REJECT_DUPLICATE), its memo's fingerprint decides.
    await kiln.api.redis.del(kiln.api.store.taskKey(id));
    const fromTemporal = await submit(c, key);
    expect(fromTemporal.status, fromTemporal.text).toBe(202);
    expect(fromTemporal.headers.get('idempotent-replayed')).toBe('true');
    expect(fromTemporal.json).toMatchObject({ id, status: 'succeeded', created_at: answers[0].json.created_at });
    await kiln.api.redis.del(kiln.api.store.taskKey(id));
    const otherBody = await submit(c, key, submitBody('another fox'));
    expect(otherBody.status).toBe(422);
    expect(gemini.requests.filter((r) => r.model !== null)).toHaveLength(1);
    expect(await workflowsOf(c.owner)).toEqual([id]);
    // The replays took no place in the unfinished gauge, and gave back none they did not take.
    expect(await kiln.api.store.unfinishedCount()).toBe(0);
  });

  it('refuses the key for another request with 422 idempotency_key_reused', async () => {
    const c = newCaller();
    const key = newKey();
    const first = await submit(c, key);
    expect(first.status).toBe(202);
    const refused = [
      await submit(c, key, submitBody('a blue fox in the snow')),
      await submit(c, key, submitBody(), 'g-img-2'),
      // The direct form shares the task form's ids: the same key there is another request.
      await submit(c, key, { contents: [{ role: 'user', parts: [{ text: 'a red fox in the snow' }] }] }, 'd-img'),
    ];
    for (const res of refused) {
      expect(res.status, res.text).toBe(422);
      expect(res.json.error).toMatchObject({ code: 'idempotency_key_reused' });
      expect(res.json.error.message).toContain('Idempotency-Key');
    }
    // Video creates are an endpoint family of their own: the key there names a video task.
    const video = await c.api('/v1/videos', {
      method: 'POST',
      json: { model: 'v-oa', prompt: 'a red fox in the snow' },
      headers: { 'Idempotency-Key': key },
    });
    expect(video.status, video.text).toBe(200);
    await waitForStatus(() => c.api(`/v1/videos/${video.json.id}`), FINAL);
    await waitForStatus(() => c.api(`/v1/tasks/${first.json.id}`), FINAL);
    // Refused before any upstream call: only the first submit reached it.
    expect(gemini.requests.filter((r) => r.model !== null)).toHaveLength(1);
  });

  it('scopes keys to the owner: another caller with the same key gets a task of its own', async () => {
    const a = newCaller();
    const b = newCaller();
    const key = newKey();
    const [ra, rb] = await Promise.all([submit(a, key), submit(b, key)]);
    expect(ra.status).toBe(202);
    expect(rb.status).toBe(202);
    expect(ra.json.id).not.toBe(rb.json.id);
    expect(ra.headers.get('idempotent-replayed')).toBeNull();
    expect(rb.headers.get('idempotent-replayed')).toBeNull();
    await waitForStatus(() => a.api(`/v1/tasks/${ra.json.id}`), FINAL);
    await waitForStatus(() => b.api(`/v1/tasks/${rb.json.id}`), FINAL);
    expect(gemini.requests.filter((r) => r.model !== null)).toHaveLength(2);
    // Neither sees the other's task.
    expect((await a.api(`/v1/tasks/${rb.json.id}`)).status).toBe(404);
  });

  it('takes keys of 1 to 255 characters 0x21-0x7E and refuses the rest with 400 naming the header', async () => {
    const c = newCaller();
    const printable = Array.from({ length: 94 }, (_, i) => String.fromCharCode(0x21 + i)).join('');
    const k255 = (printable + printable + printable).slice(0, 255);
    const accepted = await submit(c, k255);
    expect(accepted.status, accepted.text).toBe(202);
    expect((await submit(c, k255)).json.id).toBe(accepted.json.id);
    expect((await submit(c, 'x')).status).toBe(202);
    for (const bad of ['y'.repeat(256), 'tab\there', 'two words', 'caf\u00e9', '']) {
      const res = await submit(c, bad);
      expect(res.status, `${JSON.stringify(bad)}: ${res.text}`).toBe(400);
      expect(res.json.error.code).toBe('invalid_request');
      expect(res.json.error.message).toContain('Idempotency-Key');
    }
    // The same rules on video create, before the body is read.
    const video = await c.api('/v1/videos', {
      method: 'POST',
      json: { model: 'v-oa', prompt: 'x' },
      headers: { 'Idempotency-Key': 'y'.repeat(256) },
    });
    expect(video.status).toBe(400);
    expect(video.json.error.message).toContain('Idempotency-Key');
    // Two submits and two keys accepted, nothing for the refused ones.
    expect(await workflowsOf(c.owner, 2)).toHaveLength(2);
  });
});

describe('direct form', () => {
  it('a repeated key returns the same images from the same workflow, with one upstream call', async () => {
    const c = newCaller();
    const key = newKey();
    let release!: () => void;
    gemini.enqueue(
      ok([{ text: 'here' }, { inlineData: { mimeType: 'image/png', data: TINY_PNG.toString('base64') } }], {
        responseId: 'resp-idem',
        hold: new Promise<void>((r) => (release = r)),
      }),
    );
    const body = { contents: [{ role: 'user', parts: [{ text: 'a direct fox' }] }] };
    const pending = Promise.all([submit(c, key, body, 'd-img'), submit(c, key, body, 'd-img')]);
    await gemini.waitForRequests(1);
    release();
    const answers = await pending;
    for (const a of answers) expect(a.status, a.text).toBe(200);
    const later = await submit(c, key, body, 'd-img');
    expect(later.status).toBe(200);
    expect(later.headers.get('idempotent-replayed')).toBe('true');
    const all = [...answers, later];
    expect(new Set(all.map((a) => a.headers.get('x-kiln-task-id'))).size).toBe(1);
    expect(all.filter((a) => a.headers.get('idempotent-replayed') === 'true')).toHaveLength(2);
    for (const a of all) expect(a.json).toEqual(answers[0].json);
    expect(answers[0].json.responseId).toBe('resp-idem');
    expect(answers[0].json.candidates[0].content.parts[1].inlineData.data).toBe(TINY_PNG.toString('base64'));
    expect(gemini.requests.filter((r) => r.model !== null)).toHaveLength(1);
    expect(await workflowsOf(c.owner)).toEqual([all[0].headers.get('x-kiln-task-id')]);
    // Another output is another request.
    const asUrl = await c.api('/v1beta/models/d-img:generateContent?output=url', {
      method: 'POST',
      json: body,
      headers: { 'Idempotency-Key': key },
    });
    expect(asUrl.status).toBe(422);
  });
});

describe('video create', () => {
  it(
    'concurrent creates with one key start one workflow and ' + 'one upstream job; a later replay shows it finished',
    async () => {
      const c = newCaller();
      const key = newKey();
      const create = () =>
        c.api('/v1/videos', {
          method: 'POST',
          json: { model: 'v-oa', prompt: 'waves at night', seconds: '4' },
          headers: { 'Idempotency-Key': key },
        });
      const answers = await Promise.all([create(), create(), create()]);
      for (const a of answers) expect(a.status, a.text).toBe(200);
      const ids = new Set(answers.map((a) => a.json.id));
      expect(ids.size).toBe(1);
      const [id] = ids;
      expect(id).toMatch(/^video_[a-f0-9]{32}$/);
      expect(answers.filter((a) => a.headers.get('idempotent-replayed') === 'true')).toHaveLength(2);
      const done = await waitForStatus(() => c.api(`/v1/videos/${id}`), FINAL);
      expect(done.status).toBe('completed');
      const again = await create();
      expect(again.status).toBe(200);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.json).toMatchObject({ id, object: 'video', status: 'completed', progress: 100 });
      expect(videos.requests.filter((r) => r.method === 'POST' && r.path === '/v1/videos')).toHaveLength(1);
      expect(await workflowsOf(c.owner)).toEqual([id]);
      const other = await c.api('/v1/videos', {
        method: 'POST',
        json: { model: 'v-oa', prompt: 'waves at noon', seconds: '4' },
        headers: { 'Idempotency-Key': key },
      });
      expect(other.status).toBe(422);
      expect(other.json.error.code).toBe('idempotency_key_reused');
    },
  );
});

describe('client', () => {
  it('a retry after a dropped response returns the task the first attempt created', async () => {
    const c = newCaller();
    const seen: string[] = [];
    let dropped = false;
    const client = new KilnClient({
      baseURL: kiln.baseUrl,
      apiKey: c.key,
      polling: { retryInitialMs: 50 },
      fetch: async (input, init) => {
        const res = await fetch(input, init);
        if (init?.method === 'POST') {
          seen.push(new Headers(init.headers).get('idempotency-key') ?? '');
          // The first answer is lost on the way back: Kiln did create the task.
          if (!dropped) {
            dropped = true;
            await res.text();
            throw Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNRESET' } });
          }
        }
        return res;
      },
    });
    const sub = await client.tasks.create({ model: 'g-img', prompt: 'a fox that retries' });
    expect(seen).toHaveLength(2);
    expect(seen[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(seen[1]).toBe(seen[0]);
    await waitForStatus(() => c.api(`/v1/tasks/${sub.id}`), FINAL);
    expect(await workflowsOf(c.owner)).toEqual([sub.id]);
    expect(gemini.requests.filter((r) => r.model !== null)).toHaveLength(1);
    // A new logical submit gets a new key, hence a task of its own.
    const next = await client.tasks.create({ model: 'g-img', prompt: 'a fox that retries' });
    expect(next.id).not.toBe(sub.id);
    expect(seen[2]).not.toBe(seen[0]);
    // An explicit key is the caller's: resubmitting with it later finds the same task.
    const mine = newKey();
    const m1 = await client.tasks.create({ model: 'g-img', prompt: 'mine' }, { idempotencyKey: mine });
    const m2 = await client.tasks.create({ model: 'g-img', prompt: 'mine' }, { idempotencyKey: mine });
    expect(m2.id).toBe(m1.id);
  });
});
