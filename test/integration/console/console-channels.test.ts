// The console's Channels page in headless Chromium against a real Kiln whose image model routes over
// a refusing fake Gemini (it cools down) and a local channel: an operator opens the page without an
// API key, a wrong token is refused in words and not kept, the right one shows each channel's state
// and numbers, which refresh by themselves; the token stays in this tab, in a header, never in a URL.
import { existsSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { CHROMIUM, consoleHooks, expectAccessible, openConsolePage } from '../../support/browser.js';
import { dualChannelModel, fail, startFakeGemini, type FakeGemini } from '../providers/gemini/fake-gemini.js';
import { imageSteps, KEY_A, startKiln, type Kiln } from '../../support/kiln.js';

const ARTIFACTS = join(resolve(import.meta.dirname, '../../..'), 'test-artifacts');
const hasChromium = existsSync(CHROMIUM);
const TOKEN = 'console-channels-operator-token-0123456789abcdef';
const MODEL = 'img-dual';

let kiln: Kiln;
let fake: FakeGemini;
let browser: Awaited<ReturnType<typeof openConsolePage>>;
let page: Page;
const steps = imageSteps(() => kiln.baseUrl);

consoleHooks({
  artifacts: ARTIFACTS,
  withBrowser: hasChromium,
  start: async () => {
    fake = await startFakeGemini();
    fake.setDefault(fail(503, 'overloaded right now'));
    kiln = await startKiln({
      env: { KILN_OPERATOR_TOKEN: TOKEN },
      models: [dualChannelModel(fake, MODEL)],
    });
    for (let i = 0; i < 2; i++) expect((await steps.finish(await steps.submit(MODEL))).status).toBe('succeeded');
    return {
      stop: async () => {
        await kiln.stop();
        await fake.close();
      },
    };
  },
  opened: (b) => {
    browser = b;
    page = b.page;
  },
});

const row = (channel: string) => page.locator(`.model-channels[data-model="${MODEL}"] tr[data-channel="${channel}"]`);

describe.skipIf(!hasChromium)('Console: Channels', () => {
  it('opens without an API key and refuses a wrong operator token in words, keeping nothing', async () => {
    await page.goto(`${kiln.baseUrl}/console/`, { waitUntil: 'networkidle' });
    await expectAccessible(page, 'sign-in page with the operators link');
    writeFileSync(join(ARTIFACTS, 'console-channels-signin.png'), await page.screenshot());
    await page.click('#open-channels');
    await page.fill('#operator-token', `${TOKEN}-wrong`);
    await page.click('#operator-submit');
    const alert = page.locator('#operator-token-error');
    await alert.waitFor();
    expect(await alert.innerText()).toMatch(/missing_api_key[\s\S]*not the operator token/);
    expect(await page.getAttribute('#operator-token', 'aria-invalid')).toBe('true');
    expect(await page.evaluate(() => [sessionStorage.length, localStorage.length])).toEqual([0, 0]);
    // A user's API key does not open it either.
    await page.fill('#operator-token', KEY_A);
    const answered = page.waitForResponse((r) => new URL(r.url()).pathname === '/admin/v1/channels');
    await page.click('#operator-submit');
    expect((await answered).status()).toBe(401);
    await alert.waitFor();
    expect(await page.locator('.channel-table').count()).toBe(0);
    await expectAccessible(page, 'channels token form with an error');
  });

  it("shows each channel's state, load, success, latency, cool-down and last error", async () => {
    await page.fill('#operator-token', TOKEN);
    await page.click('#operator-submit');
    await row('primary').waitFor();
    expect(await row('primary').getAttribute('data-state')).toBe('open');
    expect(await row('primary').locator('.chip').innerText()).toBe('Open · cooling down');
    expect(await row('primary').locator('.chip').getAttribute('class')).toBe('chip chip-open');
    expect(await row('primary').locator('.success').innerText()).toMatch(/^0 %\s+2 calls$/);
    expect(await row('primary').locator('.cooling').innerText()).toMatch(/\(in \d+ min \d+ s\)/);
    expect(await row('primary').locator('.last-error').innerText()).toMatch(/upstream_error .*overloaded right now/);
    expect(await row('primary').locator('th').innerText()).toMatch(/primary\s+gemini · priority 10 · weight 1/);
    expect(await row('backup').getAttribute('data-state')).toBe('closed');
    expect(await row('backup').locator('.chip').innerText()).toBe('Closed · healthy');
    expect(await row('backup').locator('.in-flight').innerText()).toBe('0 / 4');
    expect(await row('backup').locator('.success').innerText()).toMatch(/^100 %\s+2 calls$/);
    expect(await row('backup').locator('.latency').innerText()).toMatch(/^\d+ ms \/ \d+ ms$/);
    expect(await row('backup').locator('.last-error').innerText()).toBe('—');
    // Highest priority first, as routing tries them.
    expect(
      await page
        .locator(`.model-channels[data-model="${MODEL}"] tbody tr`)
        .evaluateAll((rs) => rs.map((r) => r.getAttribute('data-channel'))),
    ).toEqual(['primary', 'backup']);
    // Kept in this tab once accepted; never in localStorage.
    expect(await page.evaluate(() => sessionStorage.getItem('kiln.console.operatorToken'))).toBe(TOKEN);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    await expectAccessible(page, 'channels page');
    writeFileSync(join(ARTIFACTS, 'console-channels-desktop.png'), await page.screenshot({ fullPage: true }));
  });

  it('refreshes by itself, and fits a 375 px phone screen', async () => {
    await steps.finish(await steps.submit(MODEL));
    await expect
      .poll(() => row('backup').locator('.success').innerText(), { timeout: 12_000, interval: 250 })
      .toMatch(/3 calls$/);
    await page.setViewportSize({ width: 375, height: 812 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
    writeFileSync(join(ARTIFACTS, 'console-channels-phone.png'), await page.screenshot({ fullPage: true }));
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('is a tab once signed in, and sign-out forgets the token too', async () => {
    // A reload keeps the token of this tab (#channels opens the page directly).
    await page.goto(`${kiln.baseUrl}/console/#channels`, { waitUntil: 'networkidle' });
    await row('backup').waitFor();
    await page.click('header >> text=Sign in');
    await page.fill('#api-key', KEY_A);
    await page.click('button[type=submit]');
    await page.waitForSelector('#prompt');
    await page.click('#tab-channels');
    await row('primary').waitFor();
    writeFileSync(join(ARTIFACTS, 'console-channels-tab.png'), await page.screenshot());
    await page.click('text=Sign out');
    await page.waitForSelector('#api-key');
    expect(await page.evaluate(() => [sessionStorage.length, localStorage.length])).toEqual([0, 0]);
  });

  it('sends the token only in the Authorization header, to Kiln only', () => {
    const admin = browser.requests.filter((r) => new URL(r.url).pathname === '/admin/v1/channels');
    expect(admin.length).toBeGreaterThan(3);
    for (const r of admin) expect(r.headers.authorization).toMatch(/^Bearer /);
    expect(admin.filter((r) => r.headers.authorization === `Bearer ${TOKEN}`).length).toBeGreaterThan(1);
    for (const { url } of browser.requests) {
      expect(url).not.toContain(TOKEN);
      expect(url.startsWith(`${kiln.baseUrl}/`), url).toBe(true);
    }
    expect(browser.problems).toEqual([]);
  });
});
