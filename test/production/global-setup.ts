// The production tier's backing stack, started once for the run (scripts/production/): PostgreSQL,
// the real Temporal server, a 6-node Redis Cluster (plus one redis-server when
// KILN_PRODUCTION_REDIS=single), moto S3. Test files run Kiln's own processes against it and drive
// the stack's failures through a small control endpoint on loopback (the handles live here).
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { bundleWorkflowCode } from '@temporalio/worker';
import { WORKFLOWS_PATH } from '../../src/worker/start.js';
import { ROOT } from '../../scripts/services.js';
import { nodeCommand } from '../../scripts/production/redis-cluster.js';
import {
  startBacking,
  type Backing,
  type KilnDeploymentOptions,
  type RedisMode,
} from '../../scripts/production/kiln.js';

declare module 'vitest' {
  export interface ProvidedContext {
    stackEnv: Record<string, string>;
    redis: KilnDeploymentOptions['redis'];
    redisMode: RedisMode;
    controlUrl: string;
    stackDir: string;
  }
}

type Action = (b: Backing, arg: Record<string, unknown>) => Promise<unknown>;

const actions: Record<string, Action> = {
  'temporal/stop': (b) => b.stack.temporal.stop(),
  'temporal/kill': (b) => b.stack.temporal.kill(),
  'temporal/start': (b) => b.stack.temporal.start(),
  /** kill -9 a primary: the one serving `key` when given, else any; answers its port. */
  'redis/kill-primary': async (b, arg) => {
    const masters = await b.stack.redis.masters();
    let victim = masters[0];
    if (typeof arg.key === 'string') {
      const slot = Number(await nodeCommand(victim.port, 'CLUSTER', 'KEYSLOT', arg.key));
      const owner = (await b.stack.redis.topology()).find(
        (t) =>
          t.role === 'master' &&
          t.slots.some((r) => {
            const [lo, hi = lo] = r.split('-').map(Number);
            return slot >= lo && slot <= hi;
          }),
      );
      victim = masters.find((m) => m.port === owner?.port) ?? victim;
    }
    await victim.kill();
    return { port: victim.port };
  },
  'redis/start-node': async (b, arg) => {
    const node = b.stack.redis.nodes.find((n) => n.port === arg.port);
    if (!node) throw new Error(`no redis node on port ${arg.port}`);
    await node.start();
  },
  'redis/wait-healthy': (b) => b.stack.redis.waitHealthy(60_000),
  'redis/topology': (b) => b.stack.redis.topology(),
  /** FLUSHALL on every node that executes Kiln's commands (each primary): the read model is lost. */
  'redis/flushall': async (b) => {
    await Promise.all((await b.redisPorts()).map((port) => nodeCommand(port, 'FLUSHALL')));
  },
};

export default async function setup(project: TestProject) {
  execFileSync('bash', [join(ROOT, 'scripts/production/install.sh')], { stdio: 'inherit' });
  const dir = join(ROOT, '.data', 'production-test');
  const [b, bundle] = await Promise.all([
    startBacking({
      dir,
      fresh: true,
      log: (l) => process.env.KILN_PRODUCTION_VERBOSE && console.error(`[production] ${l}`),
    }),
    // Once for the run: workers restarted by the drills load it instead of bundling again.
    bundleWorkflowCode({
      workflowsPath: WORKFLOWS_PATH,
      logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: console.error },
    }),
  ]);
  const bundlePath = join(dir, 'workflow-bundle.js');
  writeFileSync(bundlePath, bundle.code);
  project.provide('workflowBundle', bundlePath);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const action = actions[(req.url ?? '').replace(/^\//, '')];
      const arg = chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : {};
      if (!action) return void res.writeHead(404).end();
      action(b, arg).then(
        (v) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(v ?? null)),
        (err: Error) => res.writeHead(500).end(err.message),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  project.provide('stackEnv', b.stack.env);
  project.provide('redis', b.redis);
  project.provide('redisMode', b.mode);
  project.provide('stackDir', b.stack.dir);
  project.provide('controlUrl', `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  return async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await b.stop();
  };
}
