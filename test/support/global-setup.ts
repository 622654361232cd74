// Starts one real redis-server and one real Temporal dev server for the whole run.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { bundleWorkflowCode } from '@temporalio/worker';
import { startRedis, startTemporal } from '../../scripts/services.js';
import { WORKFLOWS_PATH } from '../../src/worker/start.js';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
    temporalAddress: string;
    workflowBundle: string;
    tmpRoot: string;
  }
}

export default async function setup(project: TestProject) {
  const tmpRoot = mkdtempSync(join(tmpdir(), 'kiln-test-'));
  const [redis, temporal, bundle] = await Promise.all([
    startRedis({ dir: join(tmpRoot, 'redis') }),
    startTemporal({ dbFile: join(tmpRoot, 'temporal', 'dev.sqlite') }),
    bundleWorkflowCode({
      workflowsPath: WORKFLOWS_PATH,
      logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: console.error },
    }),
  ]);
  project.provide('redisUrl', redis.url);
  project.provide('temporalAddress', temporal.url);
  // Built once for the run; workers in this process and in child processes load it from a file.
  const bundlePath = join(tmpRoot, 'workflow-bundle.js');
  writeFileSync(bundlePath, bundle.code);
  project.provide('workflowBundle', bundlePath);
  project.provide('tmpRoot', tmpRoot);
  return async () => {
    await Promise.all([redis.stop(), temporal.stop()]);
    rmSync(tmpRoot, { recursive: true, force: true });
  };
}
