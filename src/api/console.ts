// The Kiln Console (console/, built into console/dist by `npm run build:console`): static files at
// /console, and `GET /` redirects there. Not API operations, so not in a route table nor in
// /openapi.json: a small middleware in front of the router that answers only GET and HEAD of its own
// paths; anything else falls through to the router (404/405 as before).
import { createReadStream, existsSync, statSync } from 'node:fs';
import { dirname, extname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Middleware } from 'koa';
import type { BlobStoreConfig, Config } from '../config/env.js';

/**
 * console/dist of this checkout or image: two levels up from src/http, or further up when this
 * module runs compiled (dist/server/src/http/console.js); the nearest ancestor that has a built one.
 */
export const CONSOLE_DIR = findConsoleDir();

function findConsoleDir(): string {
  const fallback = fileURLToPath(new URL('../../console/dist/', import.meta.url));
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'console', 'dist', 'index.html'))) return join(dir, 'console', 'dist');
    if (dirname(dir) === dir) return fallback;
  }
}

export interface ConsoleOptions {
  /** The built console (default console/dist). */
  dir?: string;
  /** Where result images and videos come from besides this origin (S3): allowed as img-src and media-src. */
  mediaOrigins?: string[];
  /** `/console/config.json`: what the page needs to know about this Kiln. */
  settings?: ConsoleSettings;
}

/** Served at /console/config.json: the page cannot carry it inline (the CSP forbids inline scripts). */
export interface ConsoleSettings {
  /** `${TEMPORAL_UI_URL}/namespaces/<namespace>/workflows/`: a task's id completes it; null when not configured. */
  temporal_workflow_url: string | null;
  /**
   * PUBLIC_BASE_URL: the page loads result files under `${public_base_url}/v1/files/` through its own
   * origin, which reaches this Kiln even when that address does not (an IP, a reverse proxy).
   */
  public_base_url: string | null;
}

/** The console's options for a configuration: the S3 origin of results, the Temporal Web UI link and PUBLIC_BASE_URL. */
export function consoleOptions(
  config: Pick<Config, 'blobStore' | 'temporal' | 'publicBaseUrl'>,
  dir?: string,
): ConsoleOptions {
  const origin = blobOrigin(config.blobStore);
  const ui = config.temporal.uiUrl;
  return {
    ...(dir ? { dir } : {}),
    mediaOrigins: origin ? [origin] : [],
    settings: {
      temporal_workflow_url: ui ? `${ui}/namespaces/${encodeURIComponent(config.temporal.namespace)}/workflows/` : null,
      public_base_url: config.publicBaseUrl,
    },
  };
}

/**
 * The origin of the URLs the S3 store hands out (null for the filesystem store, whose /v1/files are
 * same-origin): the public base URL's, else the one the SDK presigns for (the endpoint, with the bucket as
 * a subdomain unless path-style; AWS's regional host without an endpoint).
 */
export function blobOrigin(b: BlobStoreConfig): string | null {
  if (b.kind !== 's3') return null;
  if (b.publicBaseUrl) return new URL(b.publicBaseUrl).origin;
  const u = new URL(b.endpoint ?? `https://s3.${b.region}.amazonaws.com`);
  // As the SDK decides: path style also for a bucket name that is no single host label (dots) and for an IP host.
  const ipHost = /^\d+\.\d+\.\d+\.\d+$/.test(u.hostname) || u.hostname.startsWith('[');
  const pathStyle = b.forcePathStyle || ipHost || !/^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/.test(b.bucket);
  return pathStyle ? u.origin : `${u.protocol}//${b.bucket}.${u.host}`;
}

// Everything comes from this origin: no inline script or style, no CDN. Images may be data:/blob:
// (previews); results come from Kiln's /v1/files (same origin: the page rewrites PUBLIC_BASE_URL's file
// URLs to its own origin) or, with S3, from the bucket's origin only.
export function consoleCsp(mediaOrigins: readonly string[] = []): string {
  const media = ["'self'", ...mediaOrigins].join(' ');
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    `img-src ${media} data: blob:`,
    `media-src ${media} blob:`,
    "connect-src 'self'",
    "font-src 'self'",
    "manifest-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

export const CONSOLE_CSP = consoleCsp();

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
  '.map': 'application/json',
};

export function consoleStatic(opts: ConsoleOptions = {}): Middleware {
  const root = resolve(opts.dir ?? CONSOLE_DIR);
  const csp = consoleCsp(opts.mediaOrigins);
  const settings = JSON.stringify(opts.settings ?? { temporal_workflow_url: null, public_base_url: null });
  return async (ctx, next) => {
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return next();
    if (ctx.path === '/') {
      ctx.redirect('/console/');
      return;
    }
    if (ctx.path !== '/console' && !ctx.path.startsWith('/console/')) return next();
    const rel = ctx.path.slice('/console'.length).replace(/^\/+/, '');
    const file = resolve(root, rel === '' ? 'index.html' : rel);
    ctx.set('Content-Security-Policy', csp);
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Referrer-Policy', 'no-referrer');
    if (rel === 'config.json') {
      ctx.set('Cache-Control', 'no-cache');
      ctx.type = 'application/json';
      ctx.body = settings;
      return;
    }
    if (file !== root && !file.startsWith(root + sep)) return next();
    if (!existsSync(file) || !statSync(file).isFile()) {
      if (rel === '' && !existsSync(root)) {
        ctx.status = 503;
        ctx.type = 'text/plain; charset=utf-8';
        ctx.body = 'The Kiln Console is not built: run `npm run build:console`.\n';
        return;
      }
      return next();
    }
    ctx.type = TYPES[extname(file)] ?? 'application/octet-stream';
    // Hashed asset names never change content; the page itself is checked each time.
    ctx.set('Cache-Control', rel.startsWith('assets/') ? 'public, max-age=31536000, immutable' : 'no-cache');
    ctx.length = statSync(file).size;
    // HEAD: Koa sends headers only; an unread stream would hold its file open.
    if (ctx.method === 'HEAD') ctx.status = 200;
    else ctx.body = createReadStream(file);
  };
}
