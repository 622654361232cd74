// The Kiln Console's video pages in headless Chromium against a real Kiln in keys mode (real
// Temporal and Redis, local video models): an invalid key is said plainly; the video form offers
// only what the model allows (the pro model: 10/15/25 s and its two sizes) and the video plays;
// a workflow-node task goes out with its nodeInfoList rows; the full view links to the Temporal Web
// UI when TEMPORAL_UI_URL is set; the CSP names the S3 origin only when S3 holds the blobs, and with
// results in a real S3 server (moto) the page shows the image and plays the video from there.
// Screenshots (desktop and 375 px phone) go to test-artifacts/.
import { existsSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyStore } from '../../../src/keys/store.js';
import { CHROMIUM, consoleHooks, expectAccessible as pageAccessible, openConsolePage } from '../../support/browser.js';
import { KEY_A, startKiln, type Kiln } from '../../support/kiln.js';
import { startMoto } from '../../support/moto.js';

const ROOT = resolve(import.meta.dirname, '../../..');
const ARTIFACTS = join(ROOT, 'test-artifacts');
const UI = 'http://temporal-ui.example:8080';
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium)
  console.warn(`SKIPPED console video test: ${CHROMIUM} is missing (scripts/bootstrap.sh as root installs it).`);

let kiln: Kiln;
let browser: Awaited<ReturnType<typeof openConsolePage>>;
let page: Page;
let key: string;
const BAD_KEY = 'kiln_this-key-was-never-issued-0000';

consoleHooks({
  artifacts: ARTIFACTS,
  withBrowser: hasChromium,
  start: async () => {
    // The local renderer (frames, then ffmpeg) takes seconds on a loaded machine: not what this is about.
    const local = { kind: 'video', provider: 'local', idempotent: true, pollIntervalMs: 200, timeoutMs: 60_000 };
    kiln = await startKiln({
      models: [
        { id: 'kiln-image-1', provider: 'local', latencyMs: 0, idempotent: true },
        { ...local, id: 'kiln-video-1', latencyMs: 300, seconds: ['2', '4'], sizes: ['320x180', '180x320'] },
        { ...local, id: 'kiln-video-pro', latencyMs: 300, strict: true },
        { ...local, id: 'kiln-video-node', latencyMs: 100, form: 'workflow-node', seconds: ['2'] },
      ],
      env: { POLL_AFTER_SECONDS: '1', AUTH_MODE: 'keys', TEMPORAL_UI_URL: `${UI}/` },
    });
    key = (await new KeyStore(kiln.api.redis, kiln.config.redisPrefix).create('console-video')).key;
    return kiln;
  },
  opened: (b) => {
    browser = b;
    page = b.page;
  },
});

const expectAccessible = (what: string) => pageAccessible(page, what);

/** The page at desktop width, then at a 375 px phone's (which must not scroll sideways). */
async function shoot(name: string, fullPage = true) {
  writeFileSync(join(ARTIFACTS, `console-${name}-desktop.png`), await page.screenshot({ fullPage }));
  await page.setViewportSize({ width: 375, height: 812 });
  expect(await page.evaluate(() => document.documentElement.scrollWidth), name).toBeLessThanOrEqual(375);
  writeFileSync(join(ARTIFACTS, `console-${name}-phone.png`), await page.screenshot({ fullPage }));
  await page.setViewportSize({ width: 1280, height: 900 });
}

const optionsOf = (select: string) =>
  page.$$eval(`${select} option`, (os) => os.map((o) => (o as HTMLOptionElement).value));

const focused = () => page.evaluate(() => document.activeElement?.id ?? '');

describe.skipIf(!hasChromium)('Kiln Console: videos, workflow nodes, keys mode', () => {
  it('says plainly that a key is not valid (keys mode), and keeps nothing', async () => {
    await page.goto(`${kiln.baseUrl}/console/`, { waitUntil: 'networkidle' });
    await page.fill('#api-key', BAD_KEY);
    const refused = page.waitForResponse((r) => r.url() === `${kiln.baseUrl}/v1/models`);
    await page.keyboard.press('Enter');
    expect((await refused).status()).toBe(401);
    const error = page.locator('#api-key-error');
    await error.waitFor();
    expect(await error.locator('.error-code').innerText()).toBe('invalid_api_key');
    expect(await error.locator('.error-message').innerText()).toBe(
      'This key is not valid on this Kiln: it is unknown or has been revoked. ' +
        'Check that you pasted the whole key, or ask the operator for a new one.',
    );
    expect(await page.getAttribute('#api-key', 'aria-describedby')).toBe('api-key-error');
    expect(await page.evaluate(() => [sessionStorage.length, localStorage.length])).toEqual([0, 0]);
    await expectAccessible('refused key');
    writeFileSync(join(ARTIFACTS, 'console-invalid-key-desktop.png'), await page.screenshot());

    await page.fill('#api-key', key);
    await page.keyboard.press('Enter');
    await page.waitForSelector('#prompt');
  });

  it('creates a video with the pro model from only its seconds and sizes, and plays it', async () => {
    // Keyboard: the tab, then the form's controls in order.
    await page.focus('#tab-video');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#video-model option[value="kiln-video-pro"]', { state: 'attached' });
    await page.selectOption('#video-model', 'kiln-video-1');
    expect(await optionsOf('#video-seconds')).toEqual(['2', '4']);
    await page.selectOption('#video-model', 'kiln-video-pro');
    expect(await optionsOf('#video-seconds')).toEqual(['10', '15', '25']);
    expect(await optionsOf('#video-size')).toEqual(['1792x1024', '1024x1792']);
    expect(await optionsOf('#video-model')).not.toContain('kiln-video-node');
    await page.focus('#video-prompt');
    await page.keyboard.type('a paper boat on a pond');
    const order = [];
    for (let i = 0; i < 5; i++) {
      await page.keyboard.press('Tab');
      order.push(await focused());
    }
    expect(order).toEqual(['video-model', 'video-seconds', 'video-size', 'video-image', 'video-submit']);
    // A start image URL is checked as the API checks it, before any request; forced past that check,
    // the API's own refusal lands on the same field.
    await page.fill('#video-image', 'ftp://example.com/first.png');
    const imageError = page.locator('#video-image-error');
    expect(await imageError.locator('.error-code').innerText()).toBe('invalid_reference_image_scheme');
    expect(await page.isDisabled('#video-submit')).toBe(true);
    await page.$eval('#video-submit', (b: HTMLButtonElement) => (b.disabled = false));
    const refused = page.waitForResponse((r) => r.url() === `${kiln.baseUrl}/v1/videos`);
    await page.click('#video-submit');
    const refusal = await refused;
    expect(refusal.status()).toBe(400);
    expect(await imageError.locator('.error-message').innerText()).toBe((await refusal.json()).error.message);
    expect(await page.getAttribute('#video-image', 'aria-describedby')).toBe('video-image-error');
    await page.fill('#video-image', '');
    await imageError.waitFor({ state: 'detached' });
    await page.selectOption('#video-size', '1024x1792');
    await page.focus('#video-submit');
    const created = page.waitForResponse((r) => r.url() === `${kiln.baseUrl}/v1/videos`);
    await page.keyboard.press('Enter');
    const res = await created;
    expect(res.status()).toBe(200);
    expect(JSON.parse(res.request().postData()!)).toEqual({
      model: 'kiln-video-pro',
      prompt: 'a paper boat on a pond',
      seconds: '10',
      size: '1024x1792',
    });
    const id = (await res.json()).id as string;
    const row = page.locator(`.task[data-task-id="${id}"]`);
    expect(await row.getAttribute('data-kind')).toBe('video');
    expect(await row.locator('.task-video').innerText()).toContain('10 s · 1024x1792');
    await expect.poll(() => row.getAttribute('data-status'), { timeout: 60_000 }).toBe('succeeded');

    // In the gallery, it plays where it is: a Kiln-served MP4 under the page's CSP.
    const video = page.locator(`figure[data-task-id="${id}"] video`);
    expect(new URL(await video.evaluate((v: HTMLVideoElement) => v.src)).origin).toBe(kiln.baseUrl);
    await video.scrollIntoViewIfNeeded();
    await video.evaluate((v: HTMLVideoElement) => v.play());
    await expect
      .poll(() => video.evaluate((v: HTMLVideoElement) => v.currentTime), { timeout: 15_000 })
      .toBeGreaterThan(0.2);
    expect(await video.evaluate((v: HTMLVideoElement) => v.error)).toBeNull();
    await video.evaluate((v: HTMLVideoElement) => v.pause());
    await page.evaluate(() => window.scrollTo(0, 0));
    await expectAccessible('video form and list');
    await shoot('video');
  });

  it("links a task's full view to its workflow in the Temporal Web UI", async () => {
    const figure = page.locator('figure[data-type=video]').first();
    const id = await figure.getAttribute('data-task-id');
    await figure.locator('button.open').focus();
    await page.keyboard.press('Enter');
    const dialog = page.locator('dialog.detail[open]');
    await dialog.waitFor();
    const text = await dialog.innerText();
    expect(text).toContain('a paper boat on a pond');
    expect(text).toContain('kiln-video-pro');
    expect(text).toContain('10 s, 1024x1792');
    expect(text).toContain(id!);
    const link = dialog.locator('a.temporal');
    expect(await link.innerText()).toBe('Open in Temporal Web UI');
    expect(await link.getAttribute('href')).toBe(`${UI}/namespaces/default/workflows/${id}`);
    expect(await link.getAttribute('rel')).toContain('noopener');
    const player = dialog.locator('video');
    await expect
      .poll(() => player.evaluate((v: HTMLVideoElement) => v.readyState), { timeout: 10_000 })
      .toBeGreaterThan(0);
    await expectAccessible('video full view');
    await shoot('detail', false);
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
  });

  it('runs a workflow-node task with two nodeInfoList rows', async () => {
    await page.click('#tab-node');
    await page.waitForSelector('#node-model option[value="kiln-video-node"]', { state: 'attached' });
    expect(await optionsOf('#node-model')).toEqual(['kiln-video-node']);
    // Rows are added and removed with the keyboard as well.
    await page.focus('#add-node');
    for (let i = 0; i < 3; i++) await page.keyboard.press('Enter');
    expect(await page.locator('.node-row').count()).toBe(3);
    expect(await page.isDisabled('#node-submit')).toBe(true); // empty rows are not sent
    await page.focus('#node-0-nodeId');
    await page.keyboard.type('6');
    await page.keyboard.press('Tab');
    expect(await focused()).toBe('node-0-fieldName');
    await page.keyboard.type('text');
    await page.keyboard.press('Tab');
    await page.keyboard.type('a heron at dawn');
    await page.fill('#node-1-nodeId', '12');
    await page.fill('#node-1-fieldName', 'steps');
    await page.fill('#node-1-fieldValue', '30');
    await page.fill('#node-2-nodeId', 'spare');
    await page.focus('button[aria-label="Remove node field row 3"]');
    await page.keyboard.press('Enter');
    expect(await page.locator('.node-row').count()).toBe(2);
    await expectAccessible('workflow-node form');
    const created = page.waitForResponse((r) => r.url() === `${kiln.baseUrl}/v1/videos`);
    await page.click('#node-submit');
    const res = await created;
    expect(res.status()).toBe(200);
    expect(JSON.parse(res.request().postData()!)).toEqual({
      model: 'kiln-video-node',
      prompt: '',
      seconds: '2',
      size: '720x1280',
      nodeInfoList: [
        { nodeId: '6', fieldName: 'text', fieldValue: 'a heron at dawn' },
        { nodeId: '12', fieldName: 'steps', fieldValue: 30 },
      ],
    });
    const id = (await res.json()).id as string;
    const row = page.locator(`.task[data-task-id="${id}"]`);
    await expect.poll(() => row.getAttribute('data-status'), { timeout: 60_000 }).toBe('succeeded');
    await page.locator(`figure[data-task-id="${id}"]`).first().waitFor();
    await shoot('node');
  });

  it('shows the list and the gallery at desktop and phone width', async () => {
    await page.click('#tab-image');
    await page.fill('#prompt', 'a kiln at night');
    await page.click('#create-submit');
    const image = page.locator('figure[data-type=image] img').first();
    await expect
      .poll(() => image.evaluate((el: HTMLImageElement) => el.complete && el.naturalWidth), { timeout: 30_000 })
      .toBeGreaterThan(0);
    expect(await page.locator('.task[data-kind=video]').count()).toBe(2);
    expect(await page.locator('.task[data-kind=image]').count()).toBe(1);
    await expectAccessible('list and gallery');
    // The README's picture (docs/console.png is copied from it): the video form, the list and the gallery.
    await page.click('#tab-video');
    await page.evaluate(() => window.scrollTo(0, 0));
    writeFileSync(join(ARTIFACTS, 'console-workspace-desktop.png'), await page.screenshot());
    for (const [name, section] of [
      ['list', 'section.tasks'],
      ['gallery', 'section.gallery'],
    ] as const) {
      writeFileSync(join(ARTIFACTS, `console-${name}-desktop.png`), await page.locator(section).screenshot());
      await page.setViewportSize({ width: 375, height: 812 });
      writeFileSync(join(ARTIFACTS, `console-${name}-phone.png`), await page.locator(section).screenshot());
      await page.setViewportSize({ width: 1280, height: 900 });
    }
  });

  it('still lists the videos after a reload (GET /v1/videos), merged with the images by created_at', async () => {
    const ids = await page.$$eval('.task', (ts) => ts.map((t) => t.getAttribute('data-task-id')));
    const listed = page.waitForResponse((r) => r.url() === `${kiln.baseUrl}/v1/videos?limit=20` && r.ok());
    await page.reload({ waitUntil: 'networkidle' });
    const videos = (await (await listed).json()).data as { id: string; created_at: number }[];
    expect(videos).toHaveLength(2);
    await page.locator('.task[data-kind=video][data-status=succeeded]').nth(1).waitFor();
    // The same rows in the same order as before the reload: newest first, images and videos together.
    expect(await page.$$eval('.task', (ts) => ts.map((t) => t.getAttribute('data-task-id')))).toEqual(ids);
    for (const { id } of videos) await page.locator(`figure[data-task-id="${id}"]`).first().waitFor();
    const pro = page.locator('.task[data-kind=video]', { hasText: 'a paper boat on a pond' });
    expect(await pro.locator('.task-video').innerText()).toContain('10 s · 1024x1792');
    const video = page.locator(`figure[data-task-id="${await pro.getAttribute('data-task-id')}"] video`);
    expect(new URL(await video.evaluate((v: HTMLVideoElement) => v.src)).origin).toBe(kiln.baseUrl);
  });

  it('follows unfinished tasks with long-polls and shows a finished one soon after it ends', async () => {
    const sent: { url: string; prefer?: string; body: string | null }[] = [];
    const record = (r: import('playwright-core').Request) =>
      sent.push({ url: r.url(), prefer: r.headers().prefer, body: r.postData() });
    page.on('request', record);
    try {
      await page.click('#tab-video');
      await page.selectOption('#video-model', 'kiln-video-1');
      await page.fill('#video-prompt', 'a slow tide');
      const created = page.waitForResponse((r) => r.url() === `${kiln.baseUrl}/v1/videos` && r.ok());
      await page.click('#video-submit');
      const id = (await (await created).json()).id as string;
      // The test watches the API itself, to time how soon after the end the page shows it.
      let doneAt = 0;
      for (const t0 = Date.now(); Date.now() - t0 < 60_000 && !doneAt;) {
        const v = await (
          await fetch(`${kiln.baseUrl}/v1/videos/${id}`, { headers: { authorization: `Bearer ${key}` } })
        ).json();
        if (v.status === 'completed') doneAt = Date.now();
        else await new Promise((r) => setTimeout(r, 50));
      }
      expect(doneAt).toBeGreaterThan(0);
      const row = page.locator(`.task[data-task-id="${id}"]`);
      await expect.poll(() => row.getAttribute('data-status'), { timeout: 30_000, interval: 50 }).toBe('succeeded');
      // The page's long-poll is woken by the change (about a second); a wait nothing wakes ends after
      // 25 s. 5 s tells the two apart on a loaded machine.
      expect(Date.now() - doneAt).toBeLessThan(5_000);
      const polls = sent.filter((r) => r.url === `${kiln.baseUrl}/v1/videos/${id}`);
      expect(polls.length).toBeGreaterThan(0);
      for (const p of polls) expect(p.prefer).toBe('wait=25');

      // An image task is followed by batch-get long-polls: "wait" in the body.
      await page.click('#tab-image');
      await page.fill('#prompt', 'a tide pool');
      const submitted = page.waitForResponse((r) => r.url().includes(':generateContent') && r.ok());
      await page.click('#create-submit');
      const imageId = (await (await submitted).json()).id as string;
      const image = page.locator(`.task[data-task-id="${imageId}"]`);
      await expect.poll(() => image.getAttribute('data-status'), { timeout: 30_000 }).toBe('succeeded');
      const batches = sent.filter((r) => r.url === `${kiln.baseUrl}/v1/tasks/batch-get`);
      expect(batches.length).toBeGreaterThan(0);
      for (const b of batches) expect(JSON.parse(b.body!)).toEqual({ ids: [imageId], wait: 25 });
    } finally {
      page.off('request', record);
    }
  });

  it('pages back through older videos with "Load older tasks"', async () => {
    // The key's owner, as the records of its videos name it.
    const mine = await page.locator('.task[data-kind=video]').first().getAttribute('data-task-id');
    const owner = (await kiln.api.store.get(mine!))!.owner;
    const t = Math.floor(Date.now() / 1000) - 3600;
    const old = Array.from({ length: 21 }, (_, i) => ({
      id: `video_${i.toString(16).padStart(2, '0')}${'ab'.repeat(15)}`,
      kind: 'video' as const,
      owner,
      model: 'kiln-video-1',
      status: 'failed' as const,
      progress: 0,
      prompt: `old ${i}`,
      seconds: '2',
      size: '320x180',
      created_at: t - i,
      completed_at: t - i,
      error: { code: 'upstream_error', message: 'The generator refused.' },
    }));
    for (const r of old) await kiln.api.store.transition(r);
    const shown = () => page.locator('.task[data-kind=video]').count();
    const before = await page.locator('.task[data-kind=video]').count();
    await page.reload({ waitUntil: 'networkidle' });
    await expect.poll(shown).toBe(20);
    const older = page.waitForResponse((r) => r.url().startsWith(`${kiln.baseUrl}/v1/videos?limit=20&after=`));
    await page.click('button.more');
    expect((await older).status()).toBe(200);
    await expect.poll(shown).toBe(before + old.length);
    expect(await page.locator('.task[data-kind=video][data-status=failed] .error-code').count()).toBe(old.length);
    await expect.poll(() => page.locator('button.more').count()).toBe(0);
  });

  it('never puts the key in a URL, and no request leaves Kiln', () => {
    expect(browser.requests.length).toBeGreaterThan(5);
    for (const { url } of browser.requests) {
      expect(url).not.toContain(key);
      expect(url).not.toContain(BAD_KEY);
      expect(url.startsWith(`${kiln.baseUrl}/`), url).toBe(true);
    }
    const api = browser.requests.filter((r) => new URL(r.url).pathname.startsWith('/v1/videos'));
    expect(api.length).toBeGreaterThan(2);
    for (const r of api) expect(r.headers.authorization).toBe(`Bearer ${key}`);
    expect(browser.problems).toEqual([]);
  });
});

describe('the console with results in S3 (moto)', () => {
  let moto: Awaited<ReturnType<typeof startMoto>>;
  let s3: Kiln;
  beforeAll(async () => {
    moto = await startMoto();
    const env = {
      BLOB_STORE: 's3',
      S3_BUCKET: 'kiln-console',
      S3_ENDPOINT: moto.endpoint,
      S3_ACCESS_KEY_ID: 'test-access-key',
      S3_SECRET_ACCESS_KEY: 'test-secret-key-3f9a',
      S3_PREFIX: 'kiln/',
      POLL_AFTER_SECONDS: '1',
    };
    await new S3Client({
      region: 'us-east-1',
      endpoint: moto.endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: env.S3_ACCESS_KEY_ID, secretAccessKey: env.S3_SECRET_ACCESS_KEY },
    }).send(new CreateBucketCommand({ Bucket: env.S3_BUCKET }));
    const local = { kind: 'video', provider: 'local', idempotent: true, pollIntervalMs: 200, timeoutMs: 60_000 };
    s3 = await startKiln({
      models: [
        { id: 'kiln-image-1', provider: 'local', latencyMs: 0, idempotent: true },
        { ...local, id: 'kiln-video-1', latencyMs: 100, seconds: ['2'], sizes: ['320x180'] },
      ],
      env,
    });
  }, 120_000);
  afterAll(async () => {
    await s3?.stop();
    moto?.stop();
  });

  const directives = async (k: Kiln) => {
    const csp = (await fetch(`${k.baseUrl}/console/`)).headers.get('content-security-policy')!;
    expect(csp).not.toMatch(/unsafe-|\*/);
    return Object.fromEntries(csp.split('; ').map((d) => [d.split(' ')[0], d.split(' ').slice(1)]));
  };

  it('names the S3 origin for images and videos only when S3 holds the blobs', async () => {
    const withS3 = await directives(s3);
    expect(withS3['img-src']).toEqual(["'self'", moto.endpoint, 'data:', 'blob:']);
    expect(withS3['media-src']).toEqual(["'self'", moto.endpoint, 'blob:']);
    expect(withS3['connect-src']).toEqual(["'self'"]);
    const withFs = await directives(kiln);
    expect(withFs['img-src']).toEqual(["'self'", 'data:', 'blob:']);
    expect(withFs['media-src']).toEqual(["'self'", 'blob:']);
    // And the Temporal link's base only where TEMPORAL_UI_URL is set.
    expect(await (await fetch(`${s3.baseUrl}/console/config.json`)).json()).toEqual({
      temporal_workflow_url: null,
      public_base_url: s3.baseUrl,
    });
    expect(await (await fetch(`${kiln.baseUrl}/console/config.json`)).json()).toEqual({
      temporal_workflow_url: `${UI}/namespaces/default/workflows/`,
      public_base_url: kiln.baseUrl,
    });
  });

  it('documents what each model accepts in /openapi.json', async () => {
    const doc = await (await fetch(`${s3.baseUrl}/openapi.json`)).json();
    const entry = doc.components.schemas.ModelList.properties.data.items.properties;
    for (const field of ['kind', 'form', 'image_sizes', 'seconds', 'sizes']) expect(entry, field).toHaveProperty(field);
  });

  it.skipIf(!hasChromium)('shows S3-hosted images and plays S3-hosted videos under that CSP', async () => {
    const b = await openConsolePage();
    try {
      const p = b.page;
      await p.goto(`${s3.baseUrl}/console/`, { waitUntil: 'networkidle' });
      await p.fill('#api-key', KEY_A);
      await p.keyboard.press('Enter');
      await p.fill('#prompt', 'a bucket of shells');
      await p.click('#create-submit');
      const img = p.locator('.gallery img').first();
      await expect
        .poll(() => img.evaluate((el: HTMLImageElement) => el.complete && el.naturalWidth), { timeout: 30_000 })
        .toBeGreaterThan(0);
      expect(new URL((await img.getAttribute('src'))!).origin).toBe(moto.endpoint);
      await p.click('#tab-video');
      await p.fill('#video-prompt', 'waves');
      await p.click('#video-submit');
      const video = p.locator('.gallery video').first();
      await video.waitFor({ timeout: 60_000 });
      expect(new URL((await video.getAttribute('src'))!).origin).toBe(moto.endpoint);
      await video.evaluate((v: HTMLVideoElement) => v.play());
      await expect
        .poll(() => video.evaluate((v: HTMLVideoElement) => v.currentTime), { timeout: 15_000 })
        .toBeGreaterThan(0.2);
      // A blocked load would be a CSP violation report in the console.
      expect(b.problems).toEqual([]);
      for (const { url } of b.requests) expect(url).not.toContain(KEY_A);
    } finally {
      await b.close();
    }
  });
});
