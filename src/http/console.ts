// The Kiln Console (console/, built into console/dist by `npm run build:console`): static files at
// /console, and `GET /` redirects there. Not API operations, so not in a route table nor in
// /openapi.json: a small middleware in front of the router that answers only GET and HEAD of its own
// paths; anything else falls through to the router (404/405 as before).
import { createReadStream, existsSync, statSync } from 'node:fs';
import { dirname, extname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Middleware } from 'koa';

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

// Everything comes from this origin: no inline script or style, no CDN. Images may be data:/blob:
// (previews); results served by Kiln's /v1/files are same-origin.
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "font-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

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

export function consoleStatic(dir: string = CONSOLE_DIR): Middleware {
  const root = resolve(dir);
  return async (ctx, next) => {
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return next();
    if (ctx.path === '/') {
      ctx.redirect('/console/');
      return;
    }
    if (ctx.path !== '/console' && !ctx.path.startsWith('/console/')) return next();
    const rel = ctx.path.slice('/console'.length).replace(/^\/+/, '');
    const file = resolve(root, rel === '' ? 'index.html' : rel);
    ctx.set('Content-Security-Policy', CONSOLE_CSP);
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Referrer-Policy', 'no-referrer');
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
