// bin/kiln-run starts the minified bundles of `npm run build:server` (scripts/build-bundle.ts), not
// the modules the other tests run. `npm run dev`'s test (api/dev-stack.test.ts) serves a task
// through them; this one loads every chunk, also those loaded only on demand (a provider, the
// tracing SDK), so a package that cannot be bundled, or an external one that does not resolve from
// dist/bundle, fails here rather than on the first task of that kind.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT as ROOT } from '../../../src/infra/project-root.js';

const BUNDLE = join(ROOT, 'dist', 'bundle');
const chunks = (role: string) => readdirSync(join(BUNDLE, role)).filter((f) => f.endsWith('.js') && f !== 'main.js');

beforeAll(() => {
  execFileSync('npm', ['run', '-s', 'build:server'], { cwd: ROOT, stdio: 'pipe', timeout: 240_000 });
}, 300_000);

describe('the production bundles', () => {
  it.each(['api', 'worker'])('%s: every chunk loads from dist/bundle', { timeout: 60_000 }, (role) => {
    const files = chunks(role);
    // The API's providers and tracing SDK, the worker's providers: on-demand code stays split.
    expect(files.some((f) => f.startsWith('tracing-sdk-'))).toBe(true);
    if (role === 'worker') expect(files.filter((f) => /^(image|video)-/.test(f)).length).toBeGreaterThan(5);
    const script = `for (const f of ${JSON.stringify(files.map((f) => pathToFileURL(join(BUNDLE, role, f)).href))}) await import(f);
      console.log('loaded');`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' });
    expect(out.trim().split('\n').at(-1)).toBe('loaded');
  });

  it('leaves out what reads files beside its own package, and maps back to the sources', () => {
    for (const role of ['api', 'worker']) {
      const text = [...chunks(role), 'main.js'].map((f) => readFileSync(join(BUNDLE, role, f), 'utf8')).join('\n');
      // pino starts its transports from files beside it; grpc-js loads .proto files beside it;
      // jimp reads its fonts beside itself (bundled, every local render failed).
      const inside = ['thread-stream-worker', 'channelz.proto', 'open-sans-16-black'].filter((s) => text.includes(s));
      expect(inside, `${role} bundle`).toEqual([]);
      expect(text.includes('//# sourceMappingURL=main.js.map'), `${role} main.js names its source map`).toBe(true);
      // iconv-lite's code pages and mime-db's table load from node_modules (data V8 would keep as
      // bundle text), and both resolve from dist/bundle: the test above loads the chunks.
      const data = ['windows1252', 'application/vnd.ms-excel'].filter((s) => text.includes(s));
      expect(data, `${role} bundle`).toEqual([]);
    }
  });

  it('gives the API the Temporal protos without the Cloud API and the core protocol', () => {
    const text = chunks('api')
      .map((f) => readFileSync(join(BUNDLE, 'api', f), 'utf8'))
      .join('\n');
    // (The payload visitor still names coresdk types in strings; their definitions are gone.)
    const has = (name: string) => text.includes(`${name}:{`);
    expect(has('StartWorkflowExecutionRequest'), 'workflowservice').toBe(true);
    expect(has('ActivitySlotInfo'), 'coresdk').toBe(false);
    expect(has('CreateNamespaceExportSinkRequest'), 'temporal.api.cloud').toBe(false);
  });
});
