// The OpenTelemetry SDK stays out of a process that does not trace: loading it cost ~3 MiB in each
// API process and the worker (BENCHMARKS.md, memory). A child process loads the API's and the
// worker's module graphs and calls setupTracing with tracing off, then names the SDK modules it
// loaded; with tracing on they must be there, so the check can tell.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT as ROOT } from '../../../src/infra/project-root.js';

const SDK = ['@opentelemetry/sdk-trace-base', '@opentelemetry/resources', '@temporalio/interceptors-opentelemetry-v2'];

function sdkModulesLoaded(exporter: 'none' | 'console'): string[] {
  const script = `
    import { registerHooks } from 'node:module';
    const urls = [];
    registerHooks({ load(url, context, next) { urls.push(url); return next(url, context); } });
    await import(${JSON.stringify(join(ROOT, 'src/api/runtime.ts'))});
    await import(${JSON.stringify(join(ROOT, 'src/worker/start.ts'))});
    const { setupTracing } = await import(${JSON.stringify(join(ROOT, 'src/ops/tracing.ts'))});
    const tracing = await setupTracing({ tracesExporter: '${exporter}' }, 'kiln-test');
    await tracing?.shutdown();
    console.log(JSON.stringify(urls));`;
  const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, OTEL_TRACES_EXPORTER: exporter },
  });
  const urls = JSON.parse(out.trim().split('\n').at(-1)!) as string[];
  return SDK.filter((pkg) => urls.some((u) => u.includes(`/node_modules/${pkg}/`)));
}

describe('tracing', () => {
  it('loads the OpenTelemetry SDK only when tracing is on', { timeout: 60_000 }, () => {
    expect(sdkModulesLoaded('none')).toEqual([]);
    expect(sdkModulesLoaded('console')).toEqual(SDK);
  });
});
