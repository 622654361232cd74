// The real-ComfyUI tier (`npm run test:comfyui`): a real ComfyUI, started from COMFYUI_DIR on the
// CPU, driven through the HTTP API of its server.py with our workflows of core nodes that need no
// model weights (test/fixtures/comfyui/). No Kiln yet: this pins the behaviour of ComfyUI that the
// comfyui provider relies on. Skips, saying why, when COMFYUI_DIR is unset or the venv is missing.
import { randomUUID } from 'node:crypto';
import { imageSize } from 'image-size';
import { Jimp } from 'jimp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  comfyClient,
  comfyuiAvailable,
  loadWorkflow,
  startComfyUI,
  withInputs,
  type ComfyClient,
  type ComfyUI,
  type HistoryEntry,
} from '../support/comfyui.js';

const available = comfyuiAvailable();
if (!available.ok) console.warn(`[test:comfyui] skipped: ${available.reason}`);
const title = available.ok ? 'real ComfyUI' : `real ComfyUI (skipped: ${available.reason})`;

const CLIENT_ID = 'kiln-test';
const messages = (h: HistoryEntry) => h.status.messages.map(([name]) => name);

describe.skipIf(!available.ok)(title, () => {
  let comfy: ComfyUI;
  let api: ComfyClient;

  beforeAll(async () => {
    comfy = await startComfyUI();
    api = comfyClient(comfy.baseUrl);
    console.log(`[test:comfyui] ComfyUI answered /system_stats ${comfy.startupMs} ms after spawn (${comfy.baseUrl})`);
  });
  afterAll(async () => {
    if (comfy) await comfy.dispose();
  });

  it('GET /system_stats: a CPU device and the version', async () => {
    const { status, body } = await api.systemStats();
    expect(status).toBe(200);
    expect(body.system.comfyui_version).toMatch(/^\d+\.\d+\.\d+/);
    expect(body.devices).toEqual([expect.objectContaining({ type: 'cpu' })]);
  });

  it('image: EmptyImage -> SaveImage, under our prompt_id and client_id, a PNG from /view', async () => {
    const promptId = randomUUID();
    const sub = await api.submit(loadWorkflow('image'), { promptId, clientId: CLIENT_ID });
    expect(sub.status).toBe(200);
    expect(sub.body).toMatchObject({ prompt_id: promptId, node_errors: {} });

    const h = await api.waitForHistory(promptId);
    expect(h.status).toMatchObject({ status_str: 'success', completed: true });
    expect(h.prompt[1]).toBe(promptId);
    expect(h.prompt[3]).toMatchObject({ client_id: CLIENT_ID });
    const files = h.outputs['2'].images ?? [];
    expect(files).toEqual([{ filename: expect.stringMatching(/^kiln_\d+_\.png$/), subfolder: '', type: 'output' }]);

    const got = await api.view(files[0]);
    expect(got.status).toBe(200);
    expect(got.contentType).toBe('image/png');
    expect(imageSize(got.bytes)).toMatchObject({ type: 'png', width: 64, height: 48 });
  });

  it('video: EmptyImage (8 frames) -> CreateVideo -> SaveVideo, an H.264 MP4 in a subfolder', async () => {
    const promptId = randomUUID();
    const sub = await api.submit(loadWorkflow('video'), { promptId, clientId: CLIENT_ID });
    expect(sub.body).toMatchObject({ prompt_id: promptId, node_errors: {} });

    const h = await api.waitForHistory(promptId);
    expect(h.status.status_str).toBe('success');
    const out = h.outputs['3'];
    expect(out.animated).toEqual([true]);
    expect(out.images).toEqual([
      { filename: expect.stringMatching(/^kiln_\d+_\.mp4$/), subfolder: 'video', type: 'output' },
    ]);

    const got = await api.view(out.images![0]);
    expect(got.status).toBe(200);
    expect(got.contentType).toBe('video/mp4');
    expect(got.bytes.subarray(4, 8).toString('latin1')).toBe('ftyp');
    expect(got.bytes.includes(Buffer.from('avc1'))).toBe(true);
  });

  it('animated image: two EmptyImages (4 frames each) -> ImageBatch -> SaveAnimatedWEBP, an animated WebP', async () => {
    const promptId = randomUUID();
    await api.submit(loadWorkflow('animated'), { promptId, clientId: CLIENT_ID });
    const h = await api.waitForHistory(promptId);
    expect(h.status.status_str).toBe('success');
    const out = h.outputs['4'];
    expect(out.animated).toEqual([true]);
    expect(out.images).toEqual([
      { filename: expect.stringMatching(/^kiln-anim_\d+_\.webp$/), subfolder: '', type: 'output' },
    ]);
    const got = await api.view(out.images![0]);
    expect(got.contentType).toBe('image/webp');
    expect(got.bytes.subarray(0, 4).toString('latin1')).toBe('RIFF');
    expect(got.bytes.subarray(8, 12).toString('latin1')).toBe('WEBP');
    expect(got.bytes.includes(Buffer.from('ANIM'))).toBe(true);
    expect(imageSize(got.bytes)).toMatchObject({ width: 64, height: 48 });
  });

  it('POST /upload/image, then LoadImage -> SaveImage reads it back', async () => {
    const png = await new Jimp({ width: 32, height: 24, color: 0xcc3333ff }).getBuffer('image/png');
    const name = `kiln-ref-${randomUUID()}.png`;
    const up = await api.uploadImage(name, png, { overwrite: true });
    expect(up.status).toBe(200);
    expect(up.body).toEqual({ name, subfolder: '', type: 'input' });

    const promptId = randomUUID();
    const wf = {
      '1': { class_type: 'LoadImage', inputs: { image: up.body.name } },
      '2': { class_type: 'SaveImage', inputs: { images: ['1', 0], filename_prefix: 'kiln-ref' } },
    };
    expect((await api.submit(wf, { promptId })).body.node_errors).toEqual({});
    const h = await api.waitForHistory(promptId);
    expect(h.status.status_str).toBe('success');
    const got = await api.view(h.outputs['2'].images![0]);
    expect(imageSize(got.bytes)).toMatchObject({ width: 32, height: 24 });
  });

  it('GET /queue, POST /queue {delete}, POST /interrupt {prompt_id}', async () => {
    const slow = loadWorkflow('slow');
    const running = randomUUID();
    const pending = randomUUID();
    // Distinct colors, so ComfyUI's cache does not answer the second from the first.
    await api.submit(withInputs(slow, '1', { color: 0x101010 }), { promptId: running, clientId: CLIENT_ID });
    await api.submit(withInputs(slow, '1', { color: 0x202020 }), { promptId: pending, clientId: CLIENT_ID });
    // The worker thread takes the first from the queue a moment after the POST returns.
    await expect.poll(() => api.queue(), { timeout: 10_000 }).toEqual({ running: [running], pending: [pending] });

    expect((await api.deleteFromQueue([pending])).status).toBe(200);
    expect(await api.queue()).toEqual({ running: [running], pending: [] });

    expect((await api.interrupt(running)).status).toBe(200);
    const h = await api.waitForHistory(running);
    expect(h.status).toMatchObject({ status_str: 'error', completed: false });
    expect(messages(h)).toContain('execution_interrupted');
    expect(h.outputs).toEqual({});

    expect(await api.queue()).toEqual({ running: [], pending: [] });
    expect(await api.history(pending)).toBeUndefined(); // deleted before it ran: never executed
  });

  it('errors: node_errors on submit (400, naming the node), an execution error in the history', async () => {
    const bad = await api.submit(withInputs(loadWorkflow('image'), '1', { width: 'wide' }), { promptId: randomUUID() });
    expect(bad.status).toBe(400);
    expect(bad.body.node_errors).toMatchObject({
      '1': { class_type: 'EmptyImage', errors: [expect.objectContaining({ type: 'invalid_input_type' })] },
    });
    const unknown = await api.submit({ '1': { class_type: 'NoSuchNode', inputs: {} } }, { promptId: randomUUID() });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toMatchObject({ type: 'invalid_prompt' });

    // H.264 wants even sizes: libx264 refuses 63x47 while SaveVideo runs.
    const promptId = randomUUID();
    const odd = withInputs(loadWorkflow('video'), '1', { width: 63, height: 47 });
    expect((await api.submit(odd, { promptId })).body.node_errors).toEqual({});
    const h = await api.waitForHistory(promptId);
    expect(h.status.status_str).toBe('error');
    const err = h.status.messages.find(([name]) => name === 'execution_error')?.[1];
    expect(err).toMatchObject({ prompt_id: promptId, node_id: '3', node_type: 'SaveVideo' });
    expect(String(err?.exception_message)).toMatch(/not divisible by 2/);
  });

  it('a prompt_id it already has is accepted again: ComfyUI does not deduplicate, so Kiln must look before it resubmits', async () => {
    const promptId = randomUUID();
    const wf = withInputs(loadWorkflow('image'), '1', { color: 0x123456 });
    const first = await api.submit(wf, { promptId });
    await api.waitForHistory(promptId);
    const again = await api.submit(wf, { promptId });
    expect(again.status).toBe(200);
    expect(again.body.prompt_id).toBe(promptId);
    expect(again.body.number).toBeGreaterThan(first.body.number);
    // The history keeps one entry per prompt_id: the later run's (queue number).
    for (let i = 0; i < 600; i++) {
      const h = await api.history(promptId);
      if (h?.prompt[0] === again.body.number) return;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error('the second run of the same prompt_id never reached the history');
  });
});
