// The Kiln Console in headless Chromium against a real Kiln (local image model): paste a key, make an
// image, watch it succeed, see it in the gallery; refusals show the API's own error; another owner's
// key sees none of it; the key never travels in a URL and no request leaves Kiln's origin.
// Screenshots (desktop and 375 px phone) go to test-artifacts/ for a person to look at.
import { existsSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { CHROMIUM, consoleHooks, expectAccessible as pageAccessible, openConsolePage } from '../../support/browser.js';
import { KEY_A, KEY_B, startKiln, type Kiln } from '../../support/kiln.js';

const ROOT = resolve(import.meta.dirname, '../../..');
const ARTIFACTS = join(ROOT, 'test-artifacts');
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium)
  console.warn(`SKIPPED console browser test: ${CHROMIUM} is missing (scripts/bootstrap.sh as root installs it).`);

let kiln: Kiln;
let browser: Awaited<ReturnType<typeof openConsolePage>>;
let page: Page;

consoleHooks({
  artifacts: ARTIFACTS,
  withBrowser: hasChromium,
  start: async () => {
    kiln = await startKiln({
      models: [
        { id: 'kiln-image-1', provider: 'local', latencyMs: 300, idempotent: true },
        { id: 'kiln-chat-1', kind: 'chat', provider: 'local' },
      ],
      // The console polls by the server's guidance (next_poll_after_ms): 1 s keeps this test short.
      env: { POLL_AFTER_SECONDS: '1' },
    });
    return kiln;
  },
  opened: (b) => {
    browser = b;
    page = b.page;
  },
});

const expectAccessible = (what: string) => pageAccessible(page, what);

async function signIn(key: string, remember = false) {
  await page.fill('#api-key', key);
  if (remember) await page.check('input[type=checkbox]');
  await page.click('button[type=submit]');
  await page.waitForSelector('#prompt');
}

describe.skipIf(!hasChromium)('Kiln Console', () => {
  it('is served at /console (GET / redirects) under a strict CSP, with no CDN', async () => {
    const res = await page.goto(`${kiln.baseUrl}/`, { waitUntil: 'networkidle' });
    expect(page.url()).toBe(`${kiln.baseUrl}/console/`);
    expect(res?.status()).toBe(200);
    const csp = res!.headers()['content-security-policy'];
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).not.toContain('unsafe-eval');
    // Filesystem blobs: results are same-origin, so no other origin may serve media.
    expect(csp).toContain("img-src 'self' data: blob:;");
    expect(csp).toContain("media-src 'self' blob:;");
    await page.waitForSelector('#api-key');
    await expectAccessible('sign-in page');
    writeFileSync(join(ARTIFACTS, 'console-signin-desktop.png'), await page.screenshot());
  });

  it('signs in with a pasted key, makes an image, sees it succeed and in the gallery', async () => {
    await signIn(KEY_A);
    // This tab only, unless "remember" is ticked.
    expect(await page.evaluate(() => sessionStorage.getItem('kiln.console.apiKey'))).toBe(KEY_A);
    expect(await page.evaluate(() => localStorage.getItem('kiln.console.apiKey'))).toBeNull();
    await page.waitForSelector('#model option[value="kiln-image-1"]', { state: 'attached' });
    await page.fill('#prompt', 'a lighthouse at dusk, oil painting');
    expect(await page.textContent('#prompt-note')).toContain('34 / 4,000');
    await page.selectOption('#aspect', '16:9');
    await page.selectOption('#size', '1K');
    await page.click('#create-submit');
    const row = page.locator('.task').first();
    await expect.poll(() => row.getAttribute('data-status'), { timeout: 30_000 }).toBe('succeeded');
    await expect(row.locator('.chip').innerText()).resolves.toMatch(/succeeded/i);
    const img = page.locator('.gallery img').first();
    await img.scrollIntoViewIfNeeded();
    await expect
      .poll(() => img.evaluate((el: HTMLImageElement) => el.complete && el.naturalWidth), { timeout: 15_000 })
      .toBeGreaterThan(0);
    expect(await img.getAttribute('loading')).toBe('lazy');
    expect(await row.locator('.task-elapsed').innerText()).toMatch(/^\d+ s$/);
    await page.evaluate(() => window.scrollTo(0, 0));
    await expectAccessible('workspace');
    writeFileSync(join(ARTIFACTS, 'console-desktop.png'), await page.screenshot({ fullPage: true }));

    // The full view: prompt, model, timings, task id, download and copy.
    const id = await row.getAttribute('data-task-id');
    await page.locator('.gallery button.thumb').first().focus();
    await page.keyboard.press('Enter');
    const dialog = page.locator('dialog.detail[open]');
    await dialog.waitFor();
    const text = await dialog.innerText();
    expect(text).toContain('a lighthouse at dusk, oil painting');
    expect(text).toContain('kiln-image-1');
    expect(text).toContain(id!);
    expect(await dialog.locator('a', { hasText: 'Download' }).getAttribute('href')).toBe(await img.getAttribute('src'));
    // TEMPORAL_UI_URL is not set here: no link to a Web UI that is not there.
    expect(await dialog.locator('a.temporal').count()).toBe(0);
    await expectAccessible('image view');
    writeFileSync(join(ARTIFACTS, 'console-image-desktop.png'), await page.screenshot());
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
  });

  it(
    "shows the API's refusal: a 4,001-character prompt " + "forced past the form's check, a bad reference URL",
    async () => {
      await page.fill('#prompt', 'x'.repeat(4001));
      expect(await page.textContent('#prompt-note')).toContain('4,001 / 4,000');
      expect(await page.isDisabled('#create-submit')).toBe(true);
      // Past the client-side check: the server must refuse it, and the page shows its words.
      await page.$eval('#create-submit', (b: HTMLButtonElement) => (b.disabled = false));
      const refused = page.waitForResponse((r) => r.url().includes(':generateContent') && r.status() === 400);
      await page.click('#create-submit');
      await refused;
      // Next to the field it belongs to, in the API's words.
      const promptError = page.locator('#prompt-error');
      await promptError.waitFor();
      expect(await promptError.locator('.error-code').innerText()).toBe('prompt_too_long');
      expect(await promptError.locator('.error-message').innerText()).toBe(
        'The prompt has 4001 characters; at most 4000 are allowed.',
      );

      // A reference URL is checked as the API checks it, before any request...
      await page.fill('#prompt', 'a fox');
      await page.click('#add-reference');
      await page.fill('#ref-0', 'ftp://example.com/fox.png');
      const refError = page.locator('#ref-0-error');
      expect(await refError.locator('.error-code').innerText()).toBe('invalid_reference_image_scheme');
      expect(await page.isDisabled('#create-submit')).toBe(true);
      // ...and when forced past that, the API's refusal lands on the same field.
      await page.$eval('#create-submit', (b: HTMLButtonElement) => (b.disabled = false));
      const refusedRef = page.waitForResponse((r) => r.url().includes(':generateContent') && r.status() === 400);
      await page.click('#create-submit');
      expect((await (await refusedRef).json()).error.code).toBe('invalid_reference_image_scheme');
      expect(await refError.locator('.error-message').innerText()).toBe(
        'reference image 1: the URL scheme must be http or https, not ftp.',
      );
      await expectAccessible('form with errors');
      await page.click('button[aria-label="Remove reference image 1"]');
    },
  );

  it('fits a 375 px phone screen', async () => {
    await page.setViewportSize({ width: 375, height: 812 });
    await page.evaluate(() => window.scrollTo(0, 0));
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
    writeFileSync(join(ARTIFACTS, 'console-phone.png'), await page.screenshot({ fullPage: true }));
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it("another owner's key sees none of the first owner's tasks; sign-out forgets the key", async () => {
    await page.click('text=Sign out');
    await page.waitForSelector('#api-key');
    expect(await page.evaluate(() => sessionStorage.getItem('kiln.console.apiKey'))).toBeNull();
    const listed = page.waitForResponse((r) => r.url().startsWith(`${kiln.baseUrl}/v1/tasks?`) && r.ok());
    await signIn(KEY_B, true);
    await listed;
    expect(await page.evaluate(() => localStorage.getItem('kiln.console.apiKey'))).toBe(KEY_B);
    await page.locator('.tasks .empty').waitFor();
    expect(await page.locator('.task').count()).toBe(0);
    expect(await page.locator('.gallery img').count()).toBe(0);
    // A reload keeps a remembered key; sign-out clears both stores.
    await page.reload({ waitUntil: 'networkidle' });
    await page.waitForSelector('#prompt');
    await page.click('text=Sign out');
    await page.waitForSelector('#api-key');
    expect(await page.evaluate(() => [sessionStorage.length, localStorage.length])).toEqual([0, 0]);
    await page.setViewportSize({ width: 375, height: 812 });
    writeFileSync(join(ARTIFACTS, 'console-signin-phone.png'), await page.screenshot());
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('shows a chip for each of the six states, failed tasks with their error, uncertain in words', async () => {
    // The local model only succeeds: these answers are the API's shapes, served to the page directly.
    const statuses = ['accepted', 'queued', 'running', 'succeeded', 'failed', 'uncertain'] as const;
    const items = statuses.map((status, i) => ({
      id: `task_${status}`,
      object: 'image.task',
      model: 'kiln-image-1',
      status,
      created_at: 1_700_000_000 + i,
      finished_at: null,
      ...(status === 'failed'
        ? { error: { code: 'upstream_error', message: 'The generator answered 500 three times.' } }
        : {}),
      ...(status === 'uncertain' ? { error: null, uncertain_reason: 'The generator did not answer in 120 s.' } : {}),
    }));
    await page.route(`${kiln.baseUrl}/v1/tasks?*`, (r) =>
      r.fulfill({
        json: {
          object: 'list',
          days: 7,
          items: items.map((i) => ({ ...i, content_url: `/v1/tasks/${i.id}/content` })),
        },
      }),
    );
    // Answers without Preference-Applied, as from a server that cannot wait: the page asks for a
    // long-poll, then falls back to next_poll_after_ms (60 s) instead of asking again at once.
    const batches: unknown[] = [];
    await page.route(`${kiln.baseUrl}/v1/tasks/batch-get`, (r) => {
      batches.push(r.request().postDataJSON());
      return r.fulfill({ json: { object: 'batch.task.list', items, next_poll_after_ms: 60_000 } });
    });
    try {
      await signIn('test-key-owner-c-states');
      await page.locator('.task[data-status=failed] .error').waitFor();
      for (const s of statuses)
        expect(await page.locator(`.task[data-status=${s}] .chip.chip-${s}`).innerText()).toMatch(new RegExp(s, 'i'));
      const failed = page.locator('.task[data-status=failed] .error');
      expect(await failed.locator('.error-code').innerText()).toBe('upstream_error');
      expect(await failed.locator('.error-message').innerText()).toBe('The generator answered 500 three times.');
      const uncertain = await page.locator('.task[data-status=uncertain] .uncertain').innerText();
      expect(uncertain).toContain('Check before submitting the same prompt again');
      expect(uncertain).toContain('The generator did not answer in 120 s.');
      await page.waitForTimeout(1_500);
      expect(batches).toEqual([{ ids: items.map((i) => i.id).reverse(), wait: 25 }]);
    } finally {
      await page.unrouteAll();
      await page.click('text=Sign out');
    }
  });

  it('chat: an answer to text and an attached image streams in', async () => {
    const png1x1 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
    await signIn(KEY_A);
    await page.click('nav.tabs >> text=Chat');
    await page.waitForSelector('#chat-model option[value="kiln-chat-1"]', { state: 'attached' });
    await page.fill('#chat-text', 'what is in this picture?');
    await page.setInputFiles('#chat-files', {
      name: 'dot.png',
      mimeType: 'image/png',
      buffer: Buffer.from(png1x1, 'base64'),
    });
    const streamed = page.waitForResponse((r) => r.url() === `${kiln.baseUrl}/v1/chat/completions`);
    await page.click('#chat-send');
    const res = await streamed;
    expect(res.status()).toBe(200);
    expect(res.headers()['content-type']).toMatch(/^text\/event-stream/);
    expect(JSON.parse(res.request().postData()!)).toMatchObject({ model: 'kiln-chat-1', stream: true });
    const answer = page.locator('.turn-assistant .turn-text');
    await expect.poll(() => answer.innerText(), { timeout: 10_000 }).toContain('Image 1: PNG, 1×1 pixels');
    expect(await answer.innerText()).toContain('Your last message begins: "what is in this picture?"');
    expect(await page.locator('.turn-user img').count()).toBe(1);
    await expectAccessible('chat');
    writeFileSync(join(ARTIFACTS, 'console-chat-desktop.png'), await page.screenshot({ fullPage: true }));
    await page.setViewportSize({ width: 375, height: 812 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
    writeFileSync(join(ARTIFACTS, 'console-chat-phone.png'), await page.screenshot({ fullPage: true }));
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.click('text=Sign out');
  });

  it('never puts the key in a URL, and no request leaves Kiln', () => {
    const { requests } = browser;
    expect(requests.length).toBeGreaterThan(5);
    for (const { url } of requests) {
      expect(url).not.toContain(KEY_A);
      expect(url).not.toContain(KEY_B);
      expect(url).not.toContain('test-key-owner-c');
      // Kiln's origin, or local previews of chat attachments (blob: URLs of that origin).
      expect(url.startsWith(`${kiln.baseUrl}/`) || url.startsWith(`blob:${kiln.baseUrl}/`), url).toBe(true);
    }
    // The key goes in the Authorization header, to the API only.
    const api = requests.filter((r) => new URL(r.url).pathname.startsWith('/v1/tasks'));
    expect(api.length).toBeGreaterThan(0);
    for (const r of api) expect(r.headers.authorization).toMatch(/^Bearer test-key-owner-[abc]-/);
    expect(requests.some((r) => r.url.includes('/v1/tasks/batch-get'))).toBe(true);
    expect(browser.problems).toEqual([]);
  });
});
