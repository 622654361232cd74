// The console's Keys and Usage pages in headless Chromium against a real Kiln in keys mode. Keys (for
// operators, with the operator token): a wrong token is refused and not kept; an issued key's secret
// is shown once (copied to the clipboard, then gone from the page and from every storage); the key is
// listed with its limits, its daily_units limit is changed and cleared from the page, and revoking it
// gets it refused. Usage (with an API key): the rows of the key's owner per day and model, as
// GET /v1/usage counts them, with the total, a chart that is drawn, the 7/30/90-day range picker, and
// the empty state for an owner with no usage. No URL carries a key or the token.
import { existsSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { CHROMIUM, consoleHooks, expectAccessible, openConsolePage } from '../../support/browser.js';
import { admin, OPERATOR_TOKEN } from '../../support/keys.js';
import { http, imageSteps, startKiln, type Kiln } from '../../support/kiln.js';

const ARTIFACTS = join(resolve(import.meta.dirname, '../../..'), 'test-artifacts');
const hasChromium = existsSync(CHROMIUM);
const KEYS = '/admin/v1/keys';
// Two image models of different prices: the chart stacks them.
const MODELS = [
  { id: 'img', provider: 'local', latencyMs: 20, idempotent: true, units: 3 },
  { id: 'img-b', provider: 'local', latencyMs: 20, idempotent: true },
];

let kiln: Kiln;
let browser: Awaited<ReturnType<typeof openConsolePage>>;
let page: Page;
/** A key of owner "studio" that made three images (two of `img`, one of `img-b`) before the page opened. */
let studioKey: string;
/** The key the operator issues on the page. */
let issued: { id: string; key: string };

async function createKey(body: object): Promise<{ id: string; key: string }> {
  const r = await admin(kiln.baseUrl)(KEYS, { method: 'POST', json: body });
  expect(r.status, r.text).toBe(201);
  return r.json;
}

consoleHooks({
  artifacts: ARTIFACTS,
  withBrowser: hasChromium,
  start: async () => {
    kiln = await startKiln({ env: { AUTH_MODE: 'keys', KILN_OPERATOR_TOKEN: OPERATOR_TOKEN }, models: MODELS });
    studioKey = (await createKey({ owner: 'studio', label: 'render farm' })).key;
    const steps = imageSteps(() => kiln.baseUrl, studioKey);
    const ids = [await steps.submit('img'), await steps.submit('img'), await steps.submit('img-b')];
    for (const id of ids) expect((await steps.finish(id)).status).toBe('succeeded');
    return kiln;
  },
  opened: (b) => {
    browser = b;
    page = b.page;
  },
});

const keyRow = (id: string) => page.locator(`.key-table tr[data-key-id="${id}"]`);
const storage = () => page.evaluate(() => JSON.stringify({ ...sessionStorage }) + JSON.stringify({ ...localStorage }));

describe.skipIf(!hasChromium)('Console: Keys', () => {
  it('opens without an API key and refuses a wrong operator token, keeping nothing', async () => {
    await page.goto(`${kiln.baseUrl}/console/`, { waitUntil: 'networkidle' });
    await page.getByRole('button', { name: 'API keys' }).click();
    await page.getByLabel('Operator token').fill(`${OPERATOR_TOKEN}-wrong`);
    await page.getByRole('button', { name: 'Show keys' }).click();
    const alert = page.locator('#operator-token-error');
    await alert.waitFor();
    expect(await alert.innerText()).toMatch(/missing_api_key[\s\S]*not the operator token/);
    expect(await page.evaluate(() => [sessionStorage.length, localStorage.length])).toEqual([0, 0]);

    await page.getByLabel('Operator token').fill(OPERATOR_TOKEN);
    await page.getByRole('button', { name: 'Show keys' }).click();
    await page.locator('.key-table').waitFor();
    // The key made before the page opened, as the admin API lists it.
    const studio = page.locator('.key-table tbody tr', { hasText: 'studio' });
    expect(await studio.locator('.label').innerText()).toBe('render farm');
    expect(await studio.getAttribute('data-state')).toBe('active');
    expect(await studio.locator('.limits').innerText()).toBe('—');
    expect(await page.evaluate(() => sessionStorage.getItem('kiln.console.operatorToken'))).toBe(OPERATOR_TOKEN);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
  });

  it('issues a key: its secret shown once, with a copy button, and the key in the list', async () => {
    await browser.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: kiln.baseUrl });
    await page.getByLabel('Owner').fill('alice');
    await page.getByLabel('Label (optional)').fill('ci runner');
    await page.getByLabel('Allowed models (optional)').fill('img, img-b');
    await page.locator('#new-limit-monthly_units').fill('500');
    const answered = page.waitForResponse(
      (r) => r.url() === `${kiln.baseUrl}${KEYS}` && r.request().method() === 'POST',
    );
    await page.getByRole('button', { name: 'Issue key' }).click();
    const res = await answered;
    expect(res.status()).toBe(201);
    issued = await res.json();
    expect(JSON.parse(res.request().postData()!)).toEqual({
      owner: 'alice',
      label: 'ci runner',
      models: ['img', 'img-b'],
      limits: { monthly_units: 500 },
    });

    const secret = page.getByLabel('API key (shown once)');
    expect(await secret.inputValue()).toBe(issued.key);
    expect(issued.key).toMatch(/^kiln_sk_/);
    // Focus lands on the key, selected.
    // (The focus moves in an effect after the render: polled, as a loaded machine may run it late.)
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe('new-key-secret');
    await page.getByRole('button', { name: 'Copy key' }).click();
    await expect.poll(() => page.locator('#new-key-secret-note').innerText()).toBe('Copied to the clipboard.');
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(issued.key);
    // It works at once.
    expect((await http(kiln.baseUrl, issued.key)('/v1/models')).status).toBe(200);

    const row = keyRow(issued.id);
    expect(await row.locator('.owner').innerText()).toBe('alice');
    expect(await row.locator('.label').innerText()).toBe('ci runner');
    expect(await row.locator('.models').innerText()).toBe('img, img-b');
    expect(await row.locator('.limits').innerText()).toBe('Monthly units: 500');
    expect(await row.locator('.chip').innerText()).toBe('Active');
    expect(await row.locator('.key-hint').innerText()).toBe(`${issued.key.slice(0, 12)}…`);
    await expectAccessible(page, 'keys page with a new key');
    writeFileSync(join(ARTIFACTS, 'console-keys-new.png'), await page.screenshot({ fullPage: true }));

    // Done: the secret leaves the page; it was never stored, and a reload lists the key without it.
    await page.getByRole('button', { name: 'Done' }).click();
    await secret.waitFor({ state: 'detached' });
    expect(await page.content()).not.toContain(issued.key);
    expect(await storage()).not.toContain(issued.key);
    await page.goto(`${kiln.baseUrl}/console/#keys`, { waitUntil: 'networkidle' });
    await keyRow(issued.id).waitFor();
    expect(await page.content()).not.toContain(issued.key);
    expect(await page.locator('#new-key-secret').count()).toBe(0);
  });

  it("changes a key's daily_units limit, refuses a wrong one, and clears one", async () => {
    const row = keyRow(issued.id);
    await page.getByRole('button', { name: `Edit limits of ${issued.id}` }).click();
    // The issue form has the same labels: the editor's fields by id.
    const daily = page.locator('#edit-limit-daily_units');
    // The editor starts from the key's limits.
    expect(await page.locator('#edit-limit-monthly_units').inputValue()).toBe('500');
    await daily.fill('2.5');
    await page.getByRole('button', { name: 'Save limits' }).click();
    const wrong = page.locator('#edit-limit-daily_units-error');
    expect(await wrong.innerText()).toMatch(/must be a whole number/);
    expect(await daily.getAttribute('aria-invalid')).toBe('true');
    await expectAccessible(page, 'limits editor with an error');
    writeFileSync(join(ARTIFACTS, 'console-keys-edit.png'), await page.screenshot({ fullPage: true }));

    await daily.fill('10');
    const patched = page.waitForResponse((r) => r.request().method() === 'PATCH');
    await page.getByRole('button', { name: 'Save limits' }).click();
    const res = await patched;
    expect(res.status()).toBe(200);
    expect(JSON.parse(res.request().postData()!)).toEqual({
      limits: { max_unfinished: null, submits_per_minute: null, daily_units: 10, monthly_units: 500 },
    });
    await expect.poll(() => row.locator('.limits').innerText()).toBe('Daily units: 10\nMonthly units: 500');
    expect(await page.locator('.limits-editor').count()).toBe(0);
    const view = (await admin(kiln.baseUrl)(`${KEYS}/${issued.id}`)).json;
    expect(view.limits).toEqual({
      max_unfinished: null,
      submits_per_minute: null,
      daily_units: 10,
      monthly_units: 500,
    });

    // An emptied field clears that limit (null).
    await page.getByRole('button', { name: `Edit limits of ${issued.id}` }).click();
    await page.locator('#edit-limit-monthly_units').fill('');
    await page.getByRole('button', { name: 'Save limits' }).click();
    await expect.poll(() => row.locator('.limits').innerText()).toBe('Daily units: 10');
    expect((await admin(kiln.baseUrl)(`${KEYS}/${issued.id}`)).json.limits.monthly_units).toBeNull();
  });

  it('revokes the key after asking, and Kiln refuses it', async () => {
    const row = keyRow(issued.id);
    await page.getByRole('button', { name: `Revoke ${issued.id}` }).click();
    await page.getByRole('button', { name: 'Cancel' }).click();
    expect(await row.getAttribute('data-state')).toBe('active');
    await page.getByRole('button', { name: `Revoke ${issued.id}` }).click();
    await page.getByRole('button', { name: 'Confirm revoke' }).click();
    await expect.poll(() => row.getAttribute('data-state')).toBe('revoked');
    expect(await row.locator('.chip').innerText()).toBe('Revoked');
    expect(await row.getByRole('button').count()).toBe(0);
    await expect
      .poll(async () => (await http(kiln.baseUrl, issued.key)('/v1/models')).status, { timeout: 5000 })
      .toBe(401);
    await expectAccessible(page, 'keys page');
    writeFileSync(join(ARTIFACTS, 'console-keys-desktop.png'), await page.screenshot({ fullPage: true }));
    await page.setViewportSize({ width: 375, height: 812 });
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    writeFileSync(join(ARTIFACTS, 'console-keys-phone.png'), await page.screenshot({ fullPage: true }));
    await page.setViewportSize({ width: 1280, height: 900 });
    expect(width).toBeLessThanOrEqual(375);
  });
});

describe.skipIf(!hasChromium)('Console: Usage', () => {
  it("shows the key owner's usage per day and model, the total, and a drawn chart", async () => {
    // The API's own answer is what the page must show.
    const api = (await http(kiln.baseUrl, studioKey)('/v1/usage?group_by=day,model')).json;
    const today: string = api.to;
    expect(api.data).toMatchObject([
      { date: today, model: 'img', submitted: 2, succeeded: 2, units: 6 },
      { date: today, model: 'img-b', submitted: 1, succeeded: 1, units: 1 },
    ]);

    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByLabel('API key', { exact: true }).fill(studioKey);
    await page.locator('button[type=submit]').click();
    await page.waitForSelector('#prompt');
    const asked = page.waitForResponse((r) => new URL(r.url()).pathname === '/v1/usage');
    await page.getByRole('button', { name: 'Usage' }).click();
    const query = new URL((await asked).url()).searchParams;
    expect(Object.fromEntries(query)).toEqual({ from: isoDaysAgo(today, 29), to: today, group_by: 'day,model' });

    const row = (model: string) => page.locator(`.usage-table tbody tr[data-date="${today}"][data-model="${model}"]`);
    await row('img').waitFor();
    const cells = (r: ReturnType<typeof row>) =>
      r.locator('td[data-counter]').evaluateAll((tds) => tds.map((td) => `${td.dataset.counter}=${td.textContent}`));
    expect(await cells(row('img'))).toEqual([
      ...['submitted=2', 'succeeded=2', 'failed=0', 'canceled=0', 'uncertain=0', 'released=0', 'units=6'],
      expect.stringMatching(/^upstream_seconds=\d+(\.\d)? s$/),
    ]);
    expect(await cells(row('img-b'))).toContain('units=1');
    expect(await page.locator('.usage-table tbody tr').count()).toBe(2);
    const total = page.locator('.usage-table tfoot tr');
    expect(await total.locator('th').innerText()).toBe('Total');
    expect(await total.locator('td[data-counter=submitted]').innerText()).toBe('3');
    expect(await total.locator('td[data-counter=units]').innerText()).toBe('7');
    expect(await page.locator('#usage-summary').innerText()).toMatch(/^7 units · 3 tasks submitted · 3 succeeded/);

    // The chart: a labelled image whose bars are drawn (img in the first colour, the console's accent).
    const chart = page.getByRole('img', { name: /^Units per day from .*: 7 units over 2 models/ });
    await chart.waitFor();
    // More than the legend's swatches (12 x 12 px): the bars.
    await expect.poll(() => pixelsOf(page, [180, 71, 31]), { timeout: 10_000 }).toBeGreaterThan(1000);
    expect(await pixelsOf(page, [26, 95, 180])).toBeGreaterThan(300);
    await expectAccessible(page, 'usage page');
    writeFileSync(join(ARTIFACTS, 'console-usage-desktop.png'), await page.screenshot({ fullPage: true }));

    // Another range asks again; today's rows are in it too.
    const again = page.waitForResponse((r) => new URL(r.url()).pathname === '/v1/usage');
    await page.getByLabel('Range').selectOption({ label: 'Last 7 days' });
    expect(new URL((await again).url()).searchParams.get('from')).toBe(isoDaysAgo(today, 6));
    await row('img').waitFor();
    await expect.poll(() => pixelsOf(page, [180, 71, 31]), { timeout: 10_000 }).toBeGreaterThan(1000);
    await page.setViewportSize({ width: 375, height: 812 });
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    // Chart.js redraws for the new width by itself.
    await expect
      .poll(() => page.locator('#usage-chart').evaluate((c) => c.getBoundingClientRect().width))
      .toBeLessThan(375);
    writeFileSync(join(ARTIFACTS, 'console-usage-phone.png'), await page.screenshot({ fullPage: true }));
    await page.setViewportSize({ width: 1280, height: 900 });
    expect(width).toBeLessThanOrEqual(375);
  });

  it('is the Keys tab too once signed in (the token of this tab kept)', async () => {
    await page.getByRole('button', { name: 'Keys', exact: true }).click();
    await keyRow(issued.id).waitFor();
    expect(await keyRow(issued.id).getAttribute('data-state')).toBe('revoked');
  });

  it('says so when the owner has no usage yet', async () => {
    const { key } = await createKey({ owner: 'newcomer' });
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API key', { exact: true }).fill(key);
    await page.locator('button[type=submit]').click();
    await page.waitForSelector('#prompt');
    await page.getByRole('button', { name: 'Usage' }).click();
    await page.locator('#usage-empty').waitFor();
    expect(await page.locator('#usage-empty').innerText()).toMatch(/^No usage from \d{4}-\d{2}-\d{2} to /);
    expect(await page.locator('canvas').count()).toBe(0);
    expect(await page.locator('.usage-table').count()).toBe(0);
    await expectAccessible(page, 'usage page, empty');
  });

  it('sends keys and the token only in the Authorization header, to Kiln only', () => {
    const usage = browser.requests.filter((r) => new URL(r.url).pathname === '/v1/usage');
    expect(usage.length).toBeGreaterThanOrEqual(3);
    expect(usage.filter((r) => r.headers.authorization === `Bearer ${studioKey}`).length).toBeGreaterThanOrEqual(2);
    const adminCalls = browser.requests.filter((r) => new URL(r.url).pathname.startsWith(KEYS));
    expect(adminCalls.length).toBeGreaterThan(5);
    for (const r of adminCalls) expect(r.headers.authorization).toMatch(/^Bearer /);
    for (const { url } of browser.requests) {
      for (const secret of [OPERATOR_TOKEN, studioKey, issued.key]) expect(url).not.toContain(secret);
      expect(url.startsWith(`${kiln.baseUrl}/`), url).toBe(true);
    }
    expect(browser.problems).toEqual([]);
  });
});

/** YYYY-MM-DD `n` days before `day`. */
function isoDaysAgo(day: string, n: number): string {
  return new Date(Date.parse(`${day}T00:00:00Z`) - n * 86_400_000).toISOString().slice(0, 10);
}

/** Pixels of the usage chart's canvas in exactly this colour. */
function pixelsOf(page: Page, [r, g, b]: number[]): Promise<number> {
  return page.evaluate(
    ([r, g, b]) => {
      const canvas = document.querySelector<HTMLCanvasElement>('#usage-chart');
      const ctx = canvas?.getContext('2d');
      if (!canvas || !ctx || !canvas.width) return 0;
      const px = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
      let n = 0;
      for (let i = 0; i < px.length; i += 4) if (px[i] === r && px[i + 1] === g && px[i + 2] === b) n++;
      return n;
    },
    [r, g, b],
  );
}
