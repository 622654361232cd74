// The Kiln Console opened at an address other than PUBLIC_BASE_URL's (localhost against 127.0.0.1,
// as when reached by IP or through a reverse proxy): the gallery still shows the finished images and
// plays the video, loaded through the page's own origin, and the page reports no CSP violation.
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { CHROMIUM, consoleHooks, openConsolePage } from '../../support/browser.js';
import { KEY_A, http, imageSteps, startKiln, waitForStatus, type Kiln } from '../../support/kiln.js';

const ARTIFACTS = join(resolve(import.meta.dirname, '../../..'), 'test-artifacts');
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium)
  console.warn(`SKIPPED console origin test: ${CHROMIUM} is missing (scripts/bootstrap.sh as root installs it).`);

let kiln: Kiln;
let browser: Awaited<ReturnType<typeof openConsolePage>>;
let page: Page;

consoleHooks({
  artifacts: ARTIFACTS,
  withBrowser: hasChromium,
  start: async () => {
    kiln = await startKiln({
      models: [
        { id: 'kiln-image-1', provider: 'local', latencyMs: 0, idempotent: true },
        {
          id: 'kiln-video-1',
          kind: 'video',
          provider: 'local',
          idempotent: true,
          latencyMs: 100,
          pollIntervalMs: 200,
          timeoutMs: 60_000,
          seconds: ['2'],
          sizes: ['320x180'],
        },
      ],
      env: { POLL_AFTER_SECONDS: '1' },
    });
    return kiln;
  },
  opened: (b) => {
    browser = b;
    page = b.page;
  },
});

/** The same Kiln by its other loopback name: the page's origin is then not PUBLIC_BASE_URL's. */
function otherOrigin(base: string): string {
  const u = new URL(base);
  u.hostname = u.hostname === 'localhost' ? '127.0.0.1' : 'localhost';
  return u.origin;
}

describe.skipIf(!hasChromium)('Kiln Console at an address other than PUBLIC_BASE_URL', () => {
  it('shows every finished image and plays the video, with no CSP violation', async () => {
    const images = imageSteps(() => kiln.baseUrl);
    const ids = [await images.submit('kiln-image-1'), await images.submit('kiln-image-1')];
    for (const id of ids) await images.until(id, 'succeeded');
    const api = http(kiln.baseUrl);
    const created = await api('/v1/videos', {
      method: 'POST',
      json: { model: 'kiln-video-1', prompt: 'a slow tide', seconds: '2', size: '320x180' },
    });
    expect(created.status, created.text).toBe(200);
    const video = await waitForStatus(() => api(`/v1/videos/${created.json.id}`), 'completed', 60_000);
    // The API still hands out absolute URLs on PUBLIC_BASE_URL (its contract with API clients).
    expect(new URL(video.video_url ?? video.results[0].url).origin).toBe(new URL(kiln.baseUrl).origin);

    const origin = otherOrigin(kiln.baseUrl);
    expect(origin).not.toBe(new URL(kiln.baseUrl).origin);
    // Recorded from the page itself: a blocked load fires securitypolicyviolation even when nothing is logged.
    await page.addInitScript(() => {
      const w = window as unknown as { cspViolations: string[] };
      w.cspViolations = [];
      document.addEventListener('securitypolicyviolation', (e) =>
        w.cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`),
      );
    });
    await page.goto(`${origin}/console/`, { waitUntil: 'networkidle' });
    await page.fill('#api-key', KEY_A);
    await page.keyboard.press('Enter');
    await page.waitForSelector('#prompt');

    const gallery = page.locator('.gallery img');
    await expect.poll(() => gallery.count(), { timeout: 30_000 }).toBe(ids.length);
    for (const img of await gallery.all()) {
      await img.scrollIntoViewIfNeeded();
      await expect
        .poll(() => img.evaluate((el: HTMLImageElement) => el.complete && el.naturalWidth), { timeout: 15_000 })
        .toBeGreaterThan(0);
      expect(new URL(await img.evaluate((el: HTMLImageElement) => el.currentSrc)).origin).toBe(origin);
    }
    const player = page.locator('.gallery video');
    await expect.poll(() => player.count(), { timeout: 30_000 }).toBe(1);
    await player.scrollIntoViewIfNeeded();
    await player.evaluate((v: HTMLVideoElement) => v.play());
    await expect
      .poll(() => player.evaluate((v: HTMLVideoElement) => v.currentTime), { timeout: 15_000 })
      .toBeGreaterThan(0.2);
    expect(await player.evaluate((v: HTMLVideoElement) => v.error)).toBeNull();
    expect(new URL(await player.evaluate((v: HTMLVideoElement) => v.currentSrc)).origin).toBe(origin);
    await player.evaluate((v: HTMLVideoElement) => v.pause());

    // The full view loads the same way, and its Download link stays on the page's origin.
    await page.locator('.gallery button.thumb').first().click();
    const dialog = page.locator('dialog.detail[open]');
    const full = dialog.locator('img');
    await expect
      .poll(() => full.evaluate((el: HTMLImageElement) => el.complete && el.naturalWidth), { timeout: 15_000 })
      .toBeGreaterThan(0);
    const download = await dialog.locator('a', { hasText: 'Download' }).evaluate((a: HTMLAnchorElement) => a.href);
    expect(new URL(download).origin).toBe(origin);
    await page.keyboard.press('Escape');

    expect(await page.evaluate(() => (window as unknown as { cspViolations: string[] }).cspViolations)).toEqual([]);
    expect(browser.problems).toEqual([]);
    for (const { url } of browser.requests) expect(url.startsWith(`${origin}/`), url).toBe(true);
  });
});
