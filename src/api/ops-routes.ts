// Operator endpoints: readiness, Prometheus metrics, the OpenAPI document and its reference page
// (Swagger UI served from node_modules: no CDN, works offline). One declaration per route (see
// route-table.ts).
import { createReadStream } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import type { ApiMetrics } from '../ops/metrics.js';
import type { CheckResult } from '../ops/readiness.js';
import { KilnError } from '../shared/errors.js';
import { buildOpenApiDocument, type OperationDoc } from '../http/openapi.js';
import { registerWebhookDelivery } from './openapi-webhooks.js';
import { route, type RouteDef } from '../http/route-table.js';

export interface OpsDeps {
  metrics: ApiMetrics;
  readiness: () => Promise<{ ready: boolean; checks: Record<string, CheckResult> }>;
  /** True once SIGTERM arrived: the API drains and reports unready. */
  stopping: () => boolean;
}

const UI_DIR = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'application/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

// No inline script: the page's Content-Security-Policy allows only this origin, which also
// guarantees the browser never reaches out to a CDN or the public validator.
const INIT_JS = `window.onload = () => {
  window.ui = SwaggerUIBundle({ url: '../openapi.json', dom_id: '#swagger-ui', validatorUrl: null, deepLinking: true,
    tryItOutEnabled: false, displayRequestDuration: true, defaultModelsExpandDepth: 0 });
};`;
const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Kiln API reference</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" type="image/png" href="docs/assets/favicon-32x32.png">
<link rel="stylesheet" href="docs/assets/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="docs/assets/swagger-ui-bundle.js"></script>
<script src="docs/assets/kiln-docs.js"></script></body></html>`;
const CSP =
  "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; " +
  "script-src 'self'; connect-src 'self'; font-src 'self' data:; frame-ancestors 'none'";

const Check = z.object({ ok: z.boolean(), ms: z.number().int(), detail: z.string().optional() });
const Readiness = z
  .object({ status: z.enum(['ready', 'unready']), checks: z.object({ redis: Check, temporal: Check, worker: Check }) })
  .meta({ id: 'Readiness' });
const text = (description: string, contentType: string) => ({ description, contentType, schema: z.string() });

/** `documented`: every operation the app mounts, this table's included; read on the first request. */
export function opsRoutes(
  { metrics, readiness, stopping }: OpsDeps,
  documented: () => readonly OperationDoc[],
): RouteDef[] {
  let doc: string | undefined;
  return [
    route({
      method: 'get',
      route: '/readyz',
      operationId: 'readyz',
      tags: ['operations'],
      auth: false,
      summary: 'Readiness: Redis and Temporal reachable, a worker polling the task queue',
      description: 'Each check has a 1 s deadline, so this answers within about a second whatever is down.',
      responses: {
        200: { description: 'Ready', schema: Readiness },
        503: { description: 'Not ready (or shutting down)', schema: Readiness },
      },
      handler: async (ctx) => {
        const r = await readiness();
        const ready = r.ready && !stopping();
        ctx.status = ready ? 200 : 503;
        ctx.set('Cache-Control', 'no-store');
        ctx.body = { status: ready ? 'ready' : 'unready', checks: r.checks };
      },
    }),

    route({
      method: 'get',
      route: '/metrics',
      operationId: 'metrics',
      tags: ['operations'],
      auth: false,
      summary: 'Prometheus metrics of the API (summed over its processes)',
      responses: { 200: text('Prometheus text format', 'text/plain; version=0.0.4') },
      handler: async (ctx) => {
        ctx.type = metrics.contentType;
        ctx.body = await metrics.render();
      },
    }),

    route({
      method: 'get',
      route: '/openapi.json',
      operationId: 'openapi',
      tags: ['operations'],
      auth: false,
      summary: 'This OpenAPI 3.1 document',
      responses: { 200: { description: 'OpenAPI document', schema: z.record(z.string(), z.unknown()) } },
      handler: (ctx) => {
        doc ??= JSON.stringify(buildOpenApiDocument(documented(), { more: registerWebhookDelivery }));
        ctx.type = 'application/json';
        ctx.body = doc;
      },
    }),

    route({
      method: 'get',
      route: '/docs',
      operationId: 'docs',
      tags: ['operations'],
      auth: false,
      summary: 'Interactive API reference (served by Kiln, works offline)',
      responses: { 200: text('HTML page', 'text/html') },
      handler: (ctx) => {
        // Relative asset URLs need the trailing-slash-free path; /docs/ would resolve them one level down.
        ctx.type = 'text/html; charset=utf-8';
        ctx.set('Content-Security-Policy', CSP);
        ctx.body = PAGE;
      },
    }),

    route({
      method: 'get',
      route: '/docs/assets/:file',
      operationId: 'docsAsset',
      tags: ['operations'],
      auth: false,
      summary: 'Static files of the reference page',
      request: { params: z.object({ file: z.string() }) },
      responses: { 200: text('The file', 'application/octet-stream') },
      errors: ['not_found'],
      handler: (ctx, { params: { file } }) => {
        ctx.set('Cache-Control', 'public, max-age=3600');
        if (file === 'kiln-docs.js') {
          ctx.type = 'application/javascript; charset=utf-8';
          ctx.body = INIT_JS;
          return;
        }
        const type = ASSETS[file];
        if (!type) throw new KilnError('not_found', 'No such file.');
        ctx.type = type;
        ctx.body = createReadStream(join(UI_DIR, file));
      },
    }),
  ];
}
