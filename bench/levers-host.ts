// bench/levers.ts's single-process Kiln: the worker (startWorkers) and the starts of Kiln's submit
// (startTask: the unfinished gauge's reservation, then the workflow start) in one process, over the
// worker's own NativeConnection: the only shape in which eager workflow start can work. The driver
// asks over HTTP for a timed loop of starts or a batch; both with and without TEMPORAL_EAGER_START,
// so the lever is measured in one process, one connection, the same run.
import { createServer } from 'node:http';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { loadConfig, type Config } from '../src/config/env.js';
import { upstreamQueue } from '../src/config/models.js';
import { ownerOfKey } from '../src/infra/callers.js';
import { createLogger } from '../src/ops/log.js';
import { startTask } from '../src/tasks/start.js';
import { createTaskStore } from '../src/tasks/store/create.js';
import { startWorkers } from '../src/worker/start.js';
import { benchTaskInput, loop, sleep } from './lib.js';

const config = loadConfig();
const log = createLogger('warn', 'kiln-levers-host', 'json');
const workers = await startWorkers(config, log);
const redis = new Redis(config.redisUrl);
const store = createTaskStore(redis, { prefix: config.redisPrefix, retentionSeconds: config.retentionSeconds });
const owner = ownerOfKey(config.ownerKey, 'bench-key-owner-0000000000');
const configs: Record<'eager' | 'plain', Config> = {
  eager: { ...config, temporal: { ...config.temporal, eagerStart: true } },
  plain: { ...config, temporal: { ...config.temporal, eagerStart: false } },
};

/** What Kiln's submit asks of Temporal for one image task (as bench/run.ts's raw start, plus the gauge). */
const submit = (eager: boolean) => {
  const id = `task_${randomBytes(16).toString('hex')}`;
  return startTask(
    { config: configs[eager ? 'eager' : 'plain'], store, temporal: workers.client },
    {
      workflowType: 'imageTaskWorkflow',
      id,
      owner,
      model: 'bench-image',
      summary: 'image · bench-image',
      input: benchTaskInput(id, owner, upstreamQueue(config.temporal, 'bench-image')) as never,
    },
  );
};

/** Did the server hand the first workflow task back with the start? (false: the lever is not in effect) */
async function eagerTaken(): Promise<boolean> {
  const id = `probe_${randomBytes(8).toString('hex')}`;
  const h = await workers.client.workflow.start('imageTaskWorkflow', {
    workflowId: id,
    taskQueue: config.temporal.taskQueue,
    requestEagerStart: true,
    args: [benchTaskInput(id, owner, upstreamQueue(config.temporal, 'bench-image'))],
  });
  await h.result().catch(() => undefined);
  return h.eagerlyStarted;
}

const server = createServer((req, res) => {
  const u = new URL(req.url ?? '/', 'http://x');
  const eager = u.searchParams.get('eager') === '1';
  const reply = (p: Promise<unknown>) =>
    p.then(
      (v) => res.end(JSON.stringify(v)),
      (err: Error) => {
        res.statusCode = 500;
        res.end(JSON.stringify({ error: err.message }));
      },
    );
  if (u.pathname === '/probe') return void reply(eagerTaken());
  if (u.pathname === '/submit') return void reply(loop(16, Number(u.searchParams.get('seconds')), () => submit(eager)));
  if (u.pathname === '/batch')
    return void reply(
      (async () => {
        const n = Number(u.searchParams.get('n'));
        const t = performance.now();
        let next = 0;
        await Promise.all(
          Array.from({ length: 16 }, async () => {
            while (next++ < n) await submit(eager);
          }),
        );
        while ((await store.unfinishedCount()) > 0) await sleep(5);
        return performance.now() - t;
      })(),
    );
  res.statusCode = 404;
  res.end('{}');
});
server.listen(Number(process.env.HOST_PORT), '127.0.0.1');
process.once('SIGTERM', () => {
  server.close();
  redis.disconnect();
  void workers.shutdown().then(() => process.exit(0));
});
