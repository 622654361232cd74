// Debian's Chromium for the browser tests, started the way this machine needs it: headless, and
// without the background services whose connections the closed network refuses.
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, expect } from 'vitest';

export const CHROMIUM = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}

/**
 * A fresh Chromium profile on a desktop-sized page, recording every request and every page error;
 * `artifacts`: the folder screenshots go to, created if missing.
 */
export async function openConsolePage(artifacts?: string): Promise<{
  context: import('playwright-core').BrowserContext;
  page: import('playwright-core').Page;
  requests: { url: string; headers: Record<string, string> }[];
  problems: string[];
  close: () => Promise<void>;
}> {
  const { chromium } = await import('playwright-core');
  const { mkdirSync, mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  if (artifacts) mkdirSync(artifacts, { recursive: true });
  const profile = mkdtempSync(join(tmpdir(), 'kiln-console-chromium-'));
  // A persistent context on a fresh profile directory: storage starts empty and is this test's own.
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    args: CHROMIUM_ARGS,
    viewport: { width: 1280, height: 900 },
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const requests: { url: string; headers: Record<string, string> }[] = [];
  const problems: string[] = [];
  context.on('request', (r) => requests.push({ url: r.url(), headers: r.headers() }));
  page.on('console', (m) => {
    // A refused request logs "Failed to load resource: … 400": expected. CSP violations are not.
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(String(e)));
  return {
    context,
    page,
    requests,
    problems,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** axe-core on the page as it is now: no serious or critical violation. */
export async function expectAccessible(page: import('playwright-core').Page, what: string): Promise<void> {
  expect(await seriousViolations(page), what).toEqual([]);
}

/** axe-core's violations of serious or critical impact on the page as it is now. */
export async function seriousViolations(
  page: import('playwright-core').Page,
): Promise<{ id: string; impact: string; nodes: unknown[] }[]> {
  const { readFileSync } = await import('node:fs');
  const axe = readFileSync(new URL('../../node_modules/axe-core/axe.min.js', import.meta.url), 'utf8');
  // Evaluated through the DevTools protocol, which the page's CSP does not govern.
  await page.evaluate(axe);
  const violations = await page.evaluate(async () => {
    const r = await (window as any).axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v: any) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n: any) => n.target) }));
  });
  return violations.filter((v: { impact: string }) => v.impact === 'serious' || v.impact === 'critical');
}

/** `npm test` builds the console before the integration tier; a lone run of a console test builds it here. */
export async function ensureConsoleBuilt(): Promise<void> {
  const { execFileSync } = await import('node:child_process');
  const { existsSync } = await import('node:fs');
  const { fileURLToPath } = await import('node:url');
  const root = fileURLToPath(new URL('../..', import.meta.url));
  if (existsSync(`${root}/console/dist/index.html`)) return;
  execFileSync(process.execPath, [`${root}/node_modules/vite/bin/vite.js`, 'build', 'console'], {
    cwd: root,
    stdio: 'ignore',
  });
}

type ConsolePage = Awaited<ReturnType<typeof openConsolePage>>;

/**
 * The hooks of a console test file: the console built, `start` (its Kiln), then the page in
 * Chromium when there is one (`opened` receives it); both closed after the file.
 */
export function consoleHooks(o: {
  artifacts: string;
  withBrowser: boolean;
  start: () => Promise<{ stop(): Promise<void> }>;
  opened: (b: ConsolePage) => void;
}): void {
  let kiln: { stop(): Promise<void> } | undefined;
  let browser: ConsolePage | undefined;
  beforeAll(async () => {
    await ensureConsoleBuilt();
    kiln = await o.start();
    if (!o.withBrowser) return;
    browser = await openConsolePage(o.artifacts);
    o.opened(browser);
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await kiln?.stop();
  });
}
