// The reservation sweep (src/usage/sweep.ts), run by the worker reconciler: an API process killed
// (SIGKILL) between reserving a submit's units and starting its workflow leaves a reservation no
// workflow will ever settle; the sweep voids it within a minute. A task whose terminal write went
// in without its settlement (a process lost in between) is settled by its record.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freePort } from '../../../scripts/services.js';
import { ownerOfKey } from '../../../src/infra/callers.js';
import { newImageRecord } from '../../../src/shared/image-task.js';
import { createQuota } from '../../../src/usage/settlement.js';
import { createTaskStore } from '../../../src/tasks/store/create.js';
import { dayOf } from '../../../src/usage/store.js';
import { KEY_A, listIds, startKiln, submitBody, type Kiln } from '../../support/kiln.js';
import { spawnEntry } from '../../support/spawn-entry.js';

let kiln: Kiln;
const cleanups: (() => Promise<unknown>)[] = [];
beforeAll(async () => {
  kiln = await startKiln({
    env: { RECONCILE_EVERY_MS: '1000', OWNER_DAILY_UNITS: '1' },
    models: [{ id: 'img', provider: 'local', latencyMs: 20 }],
  });
}, 120_000);
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
  await kiln?.stop();
});

it('SIGKILL between reservation and start: no workflow, and the sweep voids the reservation within a minute', async () => {
  const quota = createQuota(kiln.config, kiln.api.redis);
  const owner = ownerOfKey(kiln.config.ownerKey, KEY_A);
  const port = await freePort();
  const api = spawnEntry(
    'src/api/main.ts',
    {
      ...kiln.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      API_PROCESSES: '1',
      TEST_CRASH_AFTER_ADMISSION: '1',
    },
    'kiln api listening',
    cleanups,
  );
  await api.ready;
  const sent = await fetch(`http://127.0.0.1:${port}/v1beta/models/img:generateContent`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' },
    body: JSON.stringify(submitBody()),
  }).then(
    (r) => `answered ${r.status}`,
    () => 'no answer',
  );
  expect(sent).toBe('no answer');
  await expect.poll(() => api.child.exitCode ?? api.child.signalCode).toBe('SIGKILL');
  const [held] = await quota.reservations(owner);
  expect(held).toMatchObject({ units: 1, held: false, model: 'img' });
  // The daily quota (1 unit) is taken by a task that will never run: a submit is refused for now.
  const refused = await fetch(`${kiln.baseUrl}/v1beta/models/img:generateContent`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' },
    body: JSON.stringify(submitBody()),
  });
  expect(refused.status).toBe(429);

  // Meanwhile, a task whose `succeeded` went in without its settlement: written through a store
  // that does not settle, as if its process died between the two.
  const raw = createTaskStore(kiln.api.redis, { prefix: kiln.config.redisPrefix, retentionSeconds: 3600 });
  const other = 'key:swept-owner';
  const doneId = `task_${'a'.repeat(32)}`;
  expect((await quota.admit({ owner: other, id: doneId, model: 'img', units: 1, chargeFailed: false })).admitted).toBe(
    true,
  );
  const now = Math.floor(Date.now() / 1000);
  const base = newImageRecord({ id: doneId, owner: other, model: 'img', created_at: now }, 'accepted');
  await raw.transition({ ...base, status: 'succeeded', finished_at: now, candidates: [] });

  const start = Date.now();
  await expect
    .poll(async () => (await quota.reservations(owner)).length + (await quota.reservations(other)).length, {
      timeout: 60_000,
      interval: 500,
    })
    .toBe(0);
  expect(Date.now() - held.reservedAtMs).toBeLessThan(60_000);
  expect(Date.now() - start).toBeLessThan(60_000);
  expect(await listIds(kiln.api.client, `WorkflowId = '${held.id}'`)).toEqual([]);
  const day = dayOf(Date.now());
  expect((await quota.usage(owner, [day])).get(day)?.get('img')?.submitted ?? 0).toBe(0);
  expect(await quota.standing(owner)).toMatchObject({ daily_units: 0, max_unfinished: 0 });
  expect((await quota.usage(other, [day])).get(day)?.get('img')).toMatchObject({
    submitted: 1,
    succeeded: 1,
    units: 1,
  });
  // The quota is free again.
  const ok = await fetch(`${kiln.baseUrl}/v1beta/models/img:generateContent`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' },
    body: JSON.stringify(submitBody()),
  });
  expect(ok.status).toBe(202);
}, 120_000);
