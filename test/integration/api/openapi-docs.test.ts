// The OpenAPI document covers every route the app serves (read from the router buildApp exposes),
// every error code and status, validates as 3.1, and /docs renders in headless Chromium without a
// single request leaving this machine.
import { existsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Router from '@koa/router';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_STATUS, TASK_FAILURE_CODES } from '../../../src/shared/errors.js';
import { newVideoRecord } from '../../../src/shared/video-task.js';
import { videoView } from '../../../src/shared/views.js';
import { ADMISSION_ERRORS } from '../../../src/usage/admission.js';
import { Video } from '../../../src/video/openapi.js';
import { startKiln, type Kiln } from '../../support/kiln.js';
import { CHROMIUM, launchChromium } from '../../support/browser.js';

let kiln: Kiln;
let doc: any;

beforeAll(async () => {
  kiln = await startKiln({ workers: false });
  doc = await (await fetch(`${kiln.baseUrl}/openapi.json`)).json();
});
afterAll(async () => {
  await kiln?.stop();
});

type Route = { method: string; path: string };
const mountedRoutes = (rs: Iterable<Router>): Route[] =>
  [...rs].flatMap((r) =>
    r.stack.flatMap((layer) =>
      layer.methods
        .filter((m) => m !== 'HEAD' && m !== 'OPTIONS')
        .map((m) => ({ method: m.toLowerCase(), path: layer.path as string })),
    ),
  );

/** Mounted routes the document does not describe (Koa `:x` or an operation's documented form). */
function undocumented(routes: Route[], document: any): Route[] {
  const documented = new Set<string>();
  for (const [path, item] of Object.entries<any>(document.paths)) {
    for (const [method, op] of Object.entries<any>(item)) {
      documented.add(`${method} ${path}`);
      if (op['x-koa-route']) documented.add(`${method} ${op['x-koa-route']}`);
    }
  }
  return routes.filter(
    (r) =>
      !documented.has(`${r.method} ${r.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}')}`) &&
      !documented.has(`${r.method} ${r.path}`),
  );
}

describe('OpenAPI document', () => {
  it('validates as OpenAPI 3.1', async () => {
    expect(doc.openapi).toBe('3.1.0');
    const validator = new Validator();
    const result = await validator.validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('describes every route the app serves, and nothing else', () => {
    // The router buildApp mounted every route table on, as Koa matches requests against it.
    const routes = mountedRoutes([kiln.api.app.router]);
    // The image, video, chat, operator and codec tables at least.
    expect(routes.length).toBeGreaterThanOrEqual(15);
    expect(routes).toContainEqual({ method: 'post', path: '/v1beta/models/:modelAction' });
    expect(undocumented(routes, doc)).toEqual([]);
    const operations = Object.values(doc.paths).reduce((n: number, item: any) => n + Object.keys(item).length, 0);
    expect(operations).toBe(routes.length);
    expect(kiln.api.app.operations).toHaveLength(routes.length);
  });

  it('would catch a route served outside the tables', () => {
    const extra = new Router();
    extra.get('/v1/not-in-the-document', (ctx) => {
      ctx.body = 1;
    });
    expect(undocumented(mountedRoutes([kiln.api.app.router, extra]), doc)).toEqual([
      { method: 'get', path: '/v1/not-in-the-document' },
    ]);
  });

  it('names every error code and every HTTP status of the error catalogue', () => {
    const text = JSON.stringify(doc);
    for (const code of Object.keys(ERROR_STATUS)) expect(text, code).toContain(`"${code}"`);
    const statuses = new Set(
      Object.values(doc.paths).flatMap((item: any) =>
        Object.values(item).flatMap((op: any) => Object.keys(op.responses)),
      ),
    );
    const httpCodes = Object.entries(ERROR_STATUS).filter(
      ([c]) => c === 'invalid_request' || !(TASK_FAILURE_CODES as readonly string[]).includes(c),
    );
    // 405 answers a method no operation takes: it is a shared response component.
    expect(doc.components.responses.MethodNotAllowed.description).toContain('405');
    for (const [code, status] of httpCodes)
      if (status !== 405) expect(statuses.has(String(status)), `${code} ${status}`).toBe(true);
    // The submit operation lists its contract errors under their statuses.
    const submit = doc.paths['/v1beta/models/{model}:generateContent'].post;
    expect(submit.responses['202']).toBeDefined();
    expect(submit.responses['400'].content['application/json'].schema.properties.error.properties.code.enum).toEqual(
      expect.arrayContaining([
        'output_must_be_url',
        'prompt_too_long',
        'too_many_reference_images',
        'invalid_reference_image_url',
        'invalid_reference_image_scheme',
      ]),
    );
    expect(submit.responses['413']).toBeDefined();
    expect(submit.responses['503'].headers['Retry-After']).toBeDefined();
    expect(doc.paths['/v1/tasks/{id}/content'].get.responses['409']).toBeDefined();
    expect(
      doc.paths['/v1/tasks/batch-get'].post.requestBody.content['application/json'].schema.properties.ids.maxItems,
    ).toBe(100);
  });
});

describe('answers as documented', () => {
  it('documents a finished video as it is answered: expires_at an integer, error code uncertain', () => {
    const expires = doc.components.schemas.Video.properties.expires_at;
    expect([expires.type].flat().sort()).toEqual(['integer', 'null']);
    // The views the API stores and answers, checked against the schema the document is made from.
    const queued = newVideoRecord(
      {
        id: 'video_0123456789abcdef0123456789abcdef',
        owner: 'o',
        model: 'kiln-video-1',
        request: { prompt: 'a fox', seconds: '4', size: '720x1280' },
        created_at: 1_800_000_000,
      },
      'queued',
    );
    const finished = {
      ...queued,
      status: 'succeeded' as const,
      completed_at: 1_800_000_060,
      expires_at: 1_800_604_860,
    };
    const uncertain = { ...finished, status: 'uncertain' as const, uncertain_reason: 'lost answer' };
    for (const r of [queued, finished, uncertain])
      expect(Video.safeParse(videoView(r)).error, r.status).toBeUndefined();
  });

  it('documents the 429 limit refusals on every operation that submits tasks', () => {
    const submits = Object.values(doc.paths).flatMap((item: any) =>
      Object.values(item).filter((op: any) =>
        [
          'submitImageTask',
          'submitImageTaskV1',
          'createVideo',
          'predictLongRunningVideo',
          'predictLongRunningVideoV1',
          'createImage',
          'createImageEdit',
        ].includes(op.operationId),
      ),
    );
    expect(submits).toHaveLength(7);
    for (const op of submits as any[]) {
      const refusal = op.responses['429'];
      expect(refusal, op.operationId).toBeDefined();
      // Kiln's and Google's error bodies alike: the description names the codes of the status.
      for (const code of ADMISSION_ERRORS.filter((c) => ERROR_STATUS[c] === 429))
        expect(refusal.description, op.operationId).toContain(`\`${code}\``);
      expect(refusal.headers['Retry-After'], op.operationId).toBeDefined();
    }
  });
});

describe('idempotency, cancel and webhook operations', () => {
  const headerOf = (op: any, name: string) => op.parameters?.find((p: any) => p.in === 'header' && p.name === name);

  it('documents Idempotency-Key as a header parameter of both submits, beside their descriptions', () => {
    const submit = doc.paths['/v1beta/models/{model}:generateContent'].post;
    const video = doc.paths['/v1/videos'].post;
    for (const op of [submit, video]) {
      const key = headerOf(op, 'Idempotency-Key');
      expect(key, op.operationId).toBeDefined();
      expect(key.required).not.toBe(true);
      expect(key.schema).toMatchObject({ type: 'string', minLength: 1, maxLength: 255 });
      expect(key.description).toContain('idempotency_key_reused');
      // The operation's own text about the header stays.
      expect(op.description).toContain('Idempotent-Replayed: true');
      expect(op.responses['422'].content['application/json'].schema.properties.error.properties.code.enum).toContain(
        'idempotency_key_reused',
      );
    }
    // Only the submits take it.
    expect(headerOf(doc.paths['/v1/tasks/{id}'].get, 'Idempotency-Key')).toBeUndefined();
    const webhookQuery = submit.parameters.filter((p: any) => p.in === 'query').map((p: any) => p.name);
    expect(webhookQuery).toEqual(expect.arrayContaining(['webhook', 'webhook_events']));
  });

  it('has the cancel operations and the webhook secret endpoints', () => {
    for (const [path, id] of [
      ['/v1/tasks/{id}/cancel', 'cancelTask'],
      ['/v1/videos/{id}/cancel', 'cancelVideo'],
    ]) {
      const op = doc.paths[path]?.post;
      expect(op?.operationId, path).toBe(id);
      expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['200', '202', '404']));
    }
    expect(doc.paths['/v1/webhooks/secret'].get.operationId).toBe('getWebhookSecret');
    expect(doc.paths['/v1/webhooks/secret/rotate'].post.operationId).toBe('rotateWebhookSecret');
    expect(doc.components.schemas.WebhookSecret.properties).toHaveProperty('secret');
    expect(doc.webhooks.taskStatus.post.parameters.map((p: any) => p.name)).toEqual(
      expect.arrayContaining(['webhook-id', 'webhook-timestamp', 'webhook-signature']),
    );
  });
});

describe('/docs', () => {
  const hasChromium = existsSync(CHROMIUM);
  if (!hasChromium) {
    console.warn(
      `SKIPPED /docs browser test: ${CHROMIUM} is missing; run ` +
        `scripts/bootstrap.sh as root (apt-get install chromium) to enable it.`,
    );
  }
  it.skipIf(!hasChromium)(
    `renders in headless Chromium with no request leaving 127.0.0.1${hasChromium ? '' : ' (SKIPPED: no chromium)'}`,
    async () => {
      const browser = await launchChromium();
      try {
        const page = await browser.newPage();
        const requests: string[] = [];
        page.on('request', (r) => requests.push(r.url()));
        const consoleErrors: string[] = [];
        page.on('console', (m) => {
          if (m.type() === 'error') consoleErrors.push(m.text());
        });
        const res = await page.goto(`${kiln.baseUrl}/docs`, { waitUntil: 'networkidle' });
        expect(res?.status()).toBe(200);
        await page.waitForSelector('.opblock', { timeout: 20_000 });
        const operations = Object.values(doc.paths).reduce((n: number, item: any) => n + Object.keys(item).length, 0);
        // The webhook deliveries (OpenAPI `webhooks`) render as operations too.
        const webhooks = Object.values(doc.webhooks ?? {}).reduce(
          (n: number, item: any) => n + Object.keys(item).length,
          0,
        );
        expect(webhooks).toBeGreaterThan(0);
        expect(await page.locator('.opblock').count()).toBe(operations + webhooks);
        expect(await page.locator('.info .title').innerText()).toContain('Kiln');
        // Kept for a person to look at: what an integrator sees.
        writeFileSync(join(tmpdir(), 'kiln-docs.png'), await page.screenshot({ fullPage: false }));
        const outside = requests.filter(
          (u) => !u.startsWith(`${kiln.baseUrl}/`) && !u.startsWith('data:') && !u.startsWith('blob:'),
        );
        expect(outside).toEqual([]);
        expect(requests).toContain(`${kiln.baseUrl}/openapi.json`);
        expect(consoleErrors).toEqual([]);
      } finally {
        await browser.close();
      }
    },
  );
});
