// The client as a real package: `npm run build:client` bundles it for the browser platform (a Node
// built-in on its import path fails the build), `npm pack` makes @kiln/client's tarball, and a
// scratch project installs it offline (it has no dependencies) and uses it from plain `node` (ESM
// and CommonJS, against a tiny HTTP server speaking the API's shape) and from TypeScript checked
// with `tsc --noEmit` against the shipped declarations only. The built CLI runs too.
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../../..');
const PKG = join(ROOT, 'dist/client-package');
const KEY = 'sk-package-test';
let scratch: string;
let server: Server;
let baseURL: string;
const seen: { method: string; url: string; auth?: string }[] = [];

function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<string> {
  return new Promise((res, rej) =>
    execFile(cmd, args, { cwd, env: { ...process.env, ...env }, timeout: 60_000 }, (err, stdout, stderr) =>
      err ? rej(new Error(`${cmd} ${args.join(' ')}: ${err.message}\n${stdout}\n${stderr}`)) : res(stdout),
    ),
  );
}
const npm = (args: string[], cwd: string) => run('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], cwd);

/** The API's shape, as far as the scratch scripts use it. */
function fakeKiln(): Server {
  let polls = 0;
  return createServer((req, res) => {
    seen.push({ method: req.method!, url: req.url!, auth: req.headers.authorization });
    const json = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify(body));
    };
    if (req.headers.authorization !== `Bearer ${KEY}`)
      return json(401, { error: { code: 'invalid_api_key', message: 'Invalid API key.' } });
    const url = new URL(req.url!, 'http://x');
    if (req.method === 'GET' && url.pathname === '/v1/models')
      return json(200, { object: 'list', data: [{ id: 'kiln-image-1', object: 'model', kind: 'image' }] });
    if (req.method === 'POST' && url.pathname === '/v1beta/models/kiln-image-1:generateContent')
      return json(202, {
        id: 'task-1',
        object: 'image.task',
        model: 'kiln-image-1',
        status: 'accepted',
        polling_url: '/v1/tasks/task-1',
        content_url: '/v1/tasks/task-1/content',
      });
    if (req.method === 'GET' && url.pathname === '/v1/tasks/task-1')
      return ++polls < 2
        ? json(200, { id: 'task-1', status: 'running' }, { 'retry-after': '0' })
        : json(200, {
            id: 'task-1',
            status: 'succeeded',
            candidates: [{ content: { parts: [{ inlineData: { mimeType: 'image/png', data: 'http://f/1.png' } }] } }],
          });
    json(404, { error: { code: 'not_found', message: 'No such task.' } });
  });
}

beforeAll(async () => {
  server = fakeKiln();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  await run(process.execPath, ['--import', 'tsx', 'scripts/build-client.ts'], ROOT);
  scratch = mkdtempSync(join(tmpdir(), 'kiln-client-pkg-'));
  const tarball = (await npm(['pack', PKG, '--pack-destination', scratch, '--json'], ROOT)).trim();
  const file = (JSON.parse(tarball) as { filename: string }[])[0].filename;
  writeFileSync(join(scratch, 'package.json'), JSON.stringify({ name: 'scratch', private: true, type: 'module' }));
  // No dependencies: the install needs nothing from a registry.
  await npm(['install', join(scratch, file), '--offline', '--ignore-scripts'], scratch);
}, 120_000);

afterAll(() => {
  server?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

// Each step spawns node, npm or tsc: slow on a busy 2-core machine while other unit files run.
describe('@kiln/client package', { timeout: 60_000 }, () => {
  it('ships only the built files, with no dependencies', () => {
    const manifest = JSON.parse(readFileSync(join(scratch, 'node_modules/@kiln/client/package.json'), 'utf8'));
    expect(manifest.name).toBe('@kiln/client');
    expect(manifest.dependencies).toBeUndefined();
    expect(manifest.exports['.']).toMatchObject({ import: './index.js', require: './index.cjs' });
    const esm = readFileSync(join(PKG, 'index.js'), 'utf8');
    // Bundled for browsers: no Node built-in, no Buffer, no bare import left.
    expect(esm).not.toMatch(/from ["']node:|require\(["']node:|\bBuffer\./);
    expect(esm).not.toMatch(/^import .* from ["'][^.]/m);
  });

  it('works from plain node (ESM): models, createAndWait, typed errors', async () => {
    writeFileSync(
      join(scratch, 'use.mjs'),
      `import { Kiln, imageUrlsOf, NotFoundError, AuthenticationError } from '@kiln/client';
const kiln = new Kiln({ baseURL: process.env.BASE, apiKey: '${KEY}', polling: { firstCheckMs: 0, intervalMs: 5 } });
const models = await kiln.models();
const task = await kiln.tasks.createAndWait({ model: models[0].id, prompt: 'a lighthouse' });
let notFound = null;
try { await kiln.tasks.get('nope'); } catch (e) { notFound = e instanceof NotFoundError ? e.code : String(e); }
let badKey = null;
const wrong = new Kiln({ baseURL: process.env.BASE, apiKey: 'wrong', maxRetries: 0 });
try { await wrong.models(); } catch (e) { badKey = e instanceof AuthenticationError ? e.code : String(e); }
const ids = models.map((m) => m.id);
console.log(JSON.stringify({ models: ids, status: task.status, urls: imageUrlsOf(task), notFound, badKey }));
`,
    );
    const out = JSON.parse(await run(process.execPath, ['use.mjs'], scratch, { BASE: baseURL }));
    expect(out).toEqual({
      models: ['kiln-image-1'],
      status: 'succeeded',
      urls: ['http://f/1.png'],
      notFound: 'not_found',
      badKey: 'invalid_api_key',
    });
    expect(seen.some((r) => r.method === 'POST' && r.url.includes(':generateContent?output=url'))).toBe(true);
  });

  it('works from CommonJS (require)', async () => {
    writeFileSync(
      join(scratch, 'use.cjs'),
      `const { Kiln } = require('@kiln/client');
new Kiln({ baseURL: process.env.BASE, apiKey: '${KEY}' }).models().then((m) => console.log(m[0].id));`,
    );
    expect((await run(process.execPath, ['use.cjs'], scratch, { BASE: baseURL })).trim()).toBe('kiln-image-1');
  });

  it('type-checks a TypeScript consumer against the shipped declarations', async () => {
    writeFileSync(
      join(scratch, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          lib: ['ES2022', 'DOM'],
          types: [],
        },
        files: ['use.ts'],
      }),
    );
    writeFileSync(
      join(scratch, 'use.ts'),
      `import { Kiln, KilnAPIError, imagesOf, type ImageTask, type SubmitResponse } from '@kiln/client';
const kiln = new Kiln({ baseURL: 'http://localhost:8787', apiKey: 'k' });
export async function go(): Promise<string[]> {
  const sub: SubmitResponse = await kiln.tasks.create({ model: 'm', prompt: 'p', aspectRatio: '16:9' });
  const task: ImageTask = await kiln.tasks.wait(sub.id);
  const status: 'accepted' | 'queued' | 'running' | 'succeeded' | 'failed' | 'uncertain' = task.status;
  // @ts-expect-error: prompt is a string (the declarations are real types, not any)
  await kiln.tasks.create({ model: 'm', prompt: 1 });
  try { await kiln.tasks.get('x'); } catch (e) { if (e instanceof KilnAPIError) return [e.code, String(e.status)]; }
  return [status, ...imagesOf(task).map((i) => (i.kind === 'url' ? i.url : i.mimeType))];
}
`,
    );
    await run(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', scratch], scratch);
  });

  it('the kiln CLI runs from the built files', async () => {
    const env = { KILN_BASE_URL: baseURL, KILN_API_KEY: KEY };
    // dist/cli/main.js itself, and through the bin shim (which picks it while no source file is newer).
    for (const entry of ['dist/cli/main.js', 'bin/kiln.js']) {
      const out = await run(process.execPath, [join(ROOT, entry), '--json', 'tasks', 'get', 'task-1'], ROOT, env);
      expect(JSON.parse(out), entry).toMatchObject({ id: 'task-1', status: 'succeeded' });
    }
  });
});
