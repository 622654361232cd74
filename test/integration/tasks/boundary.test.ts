// The determinism boundary and the Web UI's view of a task.
import { ESLint } from 'eslint';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKiln, http, submitBody, waitForStatus, eventually, listIds, type Kiln } from '../../support/kiln.js';
import { SA } from '../../../src/temporal/search-attributes.js';

describe('lint rule for workflows/', () => {
  const eslint = new ESLint();
  const lint = async (code: string, filePath = 'workflows/probe.ts') =>
    (await eslint.lintText(code, { filePath }))[0].messages.map((m) => m.ruleId);

  it.each([
    ["import { Redis } from 'ioredis';\nexport const r = Redis;", 'no-restricted-imports'],
    ["import Koa from 'koa';\nexport const k = Koa;", 'no-restricted-imports'],
    ["import { readFileSync } from 'node:fs';\nexport const f = readFileSync;", 'no-restricted-imports'],
    [
      "import { createActivities } from '../activities/image/index.js';\nexport const a = createActivities;",
      'no-restricted-imports',
    ],
    ['export const e = process.env.X;', 'no-restricted-globals'],
    ["export const f = fetch('http://x');", 'no-restricted-globals'],
  ])('refuses %s', async (code, rule) => {
    expect(await lint(code)).toContain(rule);
  });

  it('allows @temporalio/workflow, shared constants and type-only activity imports', async () => {
    const ok =
      "import { sleep } from '@temporalio/workflow';\nimport type { " +
      "Activities } from '../activities/image/index.js';\nimport { " +
      "TASK_FAILURE_CODES } from '../src/shared/errors.js';\nexport type " +
      'A = Activities;\nexport const x = [sleep, TASK_FAILURE_CODES];';
    expect(await lint(ok)).toEqual([]);
    // The same imports outside workflows/ are fine.
    expect(await lint("import { Redis } from 'ioredis';\nexport const r = Redis;", 'src/probe.ts')).toEqual([]);
  });
});

describe('task as operators see it', () => {
  let kiln: Kiln;
  beforeAll(async () => {
    kiln = await startKiln({
      models: [{ id: 'kiln-image-1', provider: 'local', latencyMs: 10 }],
      env: { RETENTION_DAYS: '2' },
    });
  });
  afterAll(async () => {
    await kiln?.stop();
  });

  it('carries owner and model as search attributes (a success leaves KilnStatus unset), a summary, and a retention TTL in Redis', async () => {
    const api = http(kiln.baseUrl);
    const id = (await api('/v1beta/models/kiln-image-1:generateContent', { method: 'POST', json: submitBody() })).json
      .id;
    await waitForStatus(() => api(`/v1/tasks/${id}`), 'succeeded');
    const handle = kiln.api.client.workflow.getHandle(id);
    // The activity writes `succeeded` before the workflow completes: Redis can say so a moment
    // before Temporal has closed the workflow.
    const desc = await eventually(
      () => handle.describe(),
      (d) => d.status.name === 'COMPLETED',
    );
    const record = await kiln.api.store.get(id);
    expect(desc.typedSearchAttributes.get(SA.owner)).toBe(record!.owner);
    expect(desc.typedSearchAttributes.get(SA.model)).toBe('kiln-image-1');
    // A success is Completed with KilnStatus unset (KilnStatus names failed and uncertain outcomes).
    expect(desc.typedSearchAttributes.get(SA.status)).toBeUndefined();
    expect(await desc.staticSummary()).toMatch(/^image task · kiln-image-1 · owner [a-f0-9]{12}$/);
    const raw = await kiln.api.client.workflowService.describeWorkflowExecution({
      namespace: 'default',
      execution: { workflowId: id },
    });
    const summary = raw.executionConfig?.userMetadata?.summary;
    // Readable in the Web UI without a codec server: the summary is the one payload left in plain.
    expect(Buffer.from(summary!.metadata!.encoding!).toString()).toBe('json/plain');
    // Operators filter by these in the Web UI; the same query through the API:
    const found = await eventually(
      () =>
        listIds(
          kiln.api.client,
          `KilnOwner = '${record!.owner}' AND ExecutionStatus = 'Completed' AND KilnStatus IS NULL`,
        ),
      (ids) => ids.includes(id),
    );
    expect(found.filter((x) => x === id)).toHaveLength(1);
    const ttl = await kiln.api.redis.ttl(kiln.api.store.taskKey(id));
    expect(ttl).toBeGreaterThan(2 * 86400 - 60);
    expect(ttl).toBeLessThanOrEqual(2 * 86400);
  });
});
